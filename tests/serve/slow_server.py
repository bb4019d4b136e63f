"""`python -m tests.serve.slow_server <pipelines.serve overrides>`: the tool server, where a call
whose arguments mention "slow" takes ARAG_TEST_SLOW_S seconds, so probes can fill its queue. Each
call mentioning "slow", "fresh" or a word "held-<name>" / "note-<name>" is noted (one line, the
word) in the file ARAG_TEST_CALL_LOG when it starts running, and in ARAG_TEST_QUEUE_LOG when it
reaches the server's call gate (written in the same step of the event loop as the call joins the
queue, so a test that has read the line knows the call is queued), and "slot-<client address>" there
when a request asks to wait for a request slot (arag.serve.guard.Guard._wait_for_slot). A call mentioning
"held-<name>" runs only once the file <ARAG_TEST_RELEASE_DIR>/<name> exists: a tool stand-in that
blocks until the test releases it."""

from __future__ import annotations

import json
import os
import re
import runpy
import time
from pathlib import Path

from arag.serve.guard import Guard
from arag.serve.tool_service import ToolService
from arag.tools import ToolContext

_call = ToolContext.call
_run = ToolService._run
_wait_for_slot = Guard._wait_for_slot
HELD_MAX_S = 120  # a held call never released (a failed test) gives up after this long
WORDS = re.compile(r"\b(slow|fresh|held-\w+|note-\w+)\b")


def _noted(arguments: object) -> str | None:
    text = arguments.decode("utf-8", "replace") if isinstance(arguments, bytes) else arguments if isinstance(arguments, str) else json.dumps(arguments)
    found = WORDS.search(text)
    return found.group(1) if found else None


def _note(variable: str, word: str) -> None:
    if os.environ.get(variable):
        with open(os.environ[variable], "a") as log:
            log.write(word + "\n")


def slowed_call(self, tool, arguments, **kwargs):
    word = _noted(arguments)
    if word is not None:
        _note("ARAG_TEST_CALL_LOG", word)
    if word == "slow":
        time.sleep(float(os.environ.get("ARAG_TEST_SLOW_S", "2")))
    if word is not None and word.startswith("held-"):
        release = Path(os.environ["ARAG_TEST_RELEASE_DIR"]) / word[len("held-") :]
        deadline = time.monotonic() + HELD_MAX_S
        while not release.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
    return _call(self, tool, arguments, **kwargs)


async def noted_run(self, tool, arguments, **kwargs):
    word = _noted(arguments)
    if word is not None:
        _note("ARAG_TEST_QUEUE_LOG", word)
    return await _run(self, tool, arguments, **kwargs)


async def noted_wait_for_slot(self, slot, lost):
    _note("ARAG_TEST_QUEUE_LOG", f"slot-{slot.client}")
    return await _wait_for_slot(self, slot, lost)


ToolContext.call = slowed_call
Guard._wait_for_slot = noted_wait_for_slot
ToolService._run = noted_run
runpy.run_module("pipelines.serve", run_name="__main__")
