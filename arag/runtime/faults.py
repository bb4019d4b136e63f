"""Fault injection for the kill tests: with `variable`=N in the environment, a job sleeps once its
count reaches N, so a test can kill it at a known point however fast the machine is."""

from __future__ import annotations

import logging
import os
import sys
import time

log = logging.getLogger("arag.runtime")


def hold_at_fault_point(variable: str, count: int, job: str = "job") -> None:
    limit = os.environ.get(variable)
    if limit and count >= int(limit):
        message = f"{variable}={limit}: holding the {job} here until it is killed"
        log.warning(message)
        print(message, file=sys.stderr, flush=True)  # also where no logging is configured (a Ray worker)
        while True:
            time.sleep(3600)
