"""benchmarks/evaluate_harness.py: the in-process runner and the Ray harness over the same questions,
at the same number of episodes in flight, each ratio against the baseline of its own worker count."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = ["-m", "benchmarks.evaluate_harness"]  # run as the docs say, from the checkout


@pytest.mark.slow
def test_the_harness_benchmark_runs_both_sides_at_the_same_concurrency(eval_index, questions_file):
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    argv = [sys.executable, *SCRIPT, "--index", str(eval_index.path), "--questions", str(questions_file),
            "--n", "6", "--workers", "1,2", "--concurrency", "2", "--batch-size", "4"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=REPO, env={**env, "RAY_AUTH_MODE": "disabled"})
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith(("baseline", "evaluate"))]
    names = [re.split(r"\s{2,}", line)[0] for line in lines]
    # Each worker count: its own in-process baseline with the same episodes in flight (W x concurrency).
    assert names == [
        "baseline: in-process runner, 2 in flight", "baseline: in-process runner, 2 in flight, steady",
        "evaluate: 1 worker(s) x 2, with start-up", "evaluate: 1 worker(s) x 2, steady state",
        "baseline: in-process runner, 4 in flight", "baseline: in-process runner, 4 in flight, steady",
        "evaluate: 2 worker(s) x 2, with start-up", "evaluate: 2 worker(s) x 2, steady state",
    ]
    assert all(" 6 ep " in line for line in lines if "steady" not in line)
    assert all(re.search(r"\d+\.\d\dx", line) for line in lines)
    assert all("parts written" in line for line in lines if "start-up" in line)
