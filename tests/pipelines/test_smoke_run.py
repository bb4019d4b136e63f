"""The documented no-LLM smoke run (docs/evaluation.md, conf/smoke/scripted.yaml) over the README's
2Wiki index: it answers the first question end to end, exits 0 and prints no error-looking line.
Slow in spirit (Ray starts); skipped without the index or the benchmark data."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.paths import DATA_DIR, REPO, TWOWIKI_INDEX, TWOWIKI_QUESTIONS
from tests.runtime.test_quiet import ERROR_LOOKING

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (TWOWIKI_INDEX / "manifest.json").exists(), reason=f"no complete 2Wiki index at {TWOWIKI_INDEX} (set ARAG_2WIKI_INDEX)"),
    pytest.mark.skipif(not TWOWIKI_QUESTIONS.exists(), reason=f"no 2Wiki questions at {TWOWIKI_QUESTIONS} (set ARAG_DATA_DIR)"),
]


def test_the_smoke_run_passes_quietly(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "ARAG_VERBOSE")} | {"ARAG_DATA_DIR": str(DATA_DIR)}
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.evaluate", "+smoke=scripted", "+corpus=2wikimultihopqa", f"index.path={TWOWIKI_INDEX}",
         f"results.path={tmp_path / 'smoke'}", f"hydra.run.dir={tmp_path / 'h'}"],
        capture_output=True, text=True, timeout=600, cwd=REPO, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "evaluated 1/1 questions: 1 answered, 0 failed" in done.stdout and "contain-acc 100.0  llm-acc 100.0" in done.stdout
    shown = [line for line in (done.stdout + done.stderr).splitlines() if ERROR_LOOKING.search(line)]
    assert not shown, "error-looking lines:\n" + "\n".join(shown)
