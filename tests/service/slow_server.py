"""`python -m tests.service.slow_server <pipelines.serve overrides>`: the tool server, where a call
whose arguments mention "slow" takes ARAG_TEST_SLOW_S seconds, so probes can fill its queue. Each
call mentioning "slow" or "fresh" is noted (one line) in the file ARAG_TEST_CALL_LOG when it starts."""

from __future__ import annotations

import json
import os
import runpy
import time

from arag.tools import ToolContext

_call = ToolContext.call


def _noted(arguments: object) -> str | None:
    text = arguments.decode("utf-8", "replace") if isinstance(arguments, bytes) else arguments if isinstance(arguments, str) else json.dumps(arguments)
    return next((word for word in ("slow", "fresh") if word in text), None)


def slowed_call(self, tool, arguments, **kwargs):
    word = _noted(arguments)
    if word is not None and os.environ.get("ARAG_TEST_CALL_LOG"):
        with open(os.environ["ARAG_TEST_CALL_LOG"], "a") as log:
            log.write(word + "\n")
    if word == "slow":
        time.sleep(float(os.environ.get("ARAG_TEST_SLOW_S", "2")))
    return _call(self, tool, arguments, **kwargs)


ToolContext.call = slowed_call
runpy.run_module("pipelines.serve", run_name="__main__")
