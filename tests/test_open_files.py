"""Processes holding thousands of connections raise their open-files limit (soft up to hard) instead of
failing with 'Too many open files', and say so where even the hard limit is too low."""

from __future__ import annotations

import subprocess
import sys

import pytest

resource = pytest.importorskip("resource")

from tests.support.paths import REPO  # noqa: E402

PROBE = """
import resource, sys
from arag.open_files import ensure_open_files, HEADROOM
soft, hard = {soft}, {hard}
resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
warning = ensure_open_files({connections}, "runtime.concurrency=X")
print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
print(warning)
"""


def probe(soft: int, hard: int, connections: int) -> tuple[int, str]:
    out = subprocess.run([sys.executable, "-c", PROBE.format(soft=soft, hard=hard, connections=connections)], capture_output=True, text=True, cwd=REPO, check=True).stdout.splitlines()
    return int(out[0]), out[1]


def test_the_soft_limit_is_raised_to_what_the_connections_need():
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2000:
        pytest.skip(f"this machine's hard limit ({hard}) is too low to raise to")
    assert probe(512, 2000, 1000) == (1256, "None")  # 1,000 connections + 256
    assert probe(1800, 2000, 1000) == (1800, "None")  # enough already: left as it is


def test_a_hard_limit_too_low_is_named():
    soft, warning = probe(256, 600, 1000)
    assert soft == 600
    assert "runtime.concurrency=X needs about 1256 open files" in warning and "ulimit -n 1256" in warning
