"""The results viewer in a real headless browser (Chromium from Debian's packages; `.ci/run` installs
it): two tiny evaluations (pipelines.evaluate, scripted backend) write a results tree, the one
command `python -m pipelines.view` serves it, and Chromium's DOM of the pages is checked. The test
writes a screenshot of the episode page (its path is printed) for a person to look at."""

from __future__ import annotations

import io
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
from urllib.parse import urlencode

import pytest

from arag.runtime.evaluate import evaluate
from tests.evaluation.conftest import base_overrides, compose_evaluate
from tests.evaluation.test_viewer import REPO, Dom, listed

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(CHROMIUM is None, reason="no chromium (Debian: apt-get install chromium)")]


def chromium(tmp_path, url: str, *flags: str) -> str:
    """Chromium's output for a page: the DOM after it rendered (--dump-dom) or nothing (--screenshot)."""
    profile = tmp_path / "chromium-profile"
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--hide-scrollbars", *flags, url],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.fixture
def viewer(ray_local, eval_index, questions_file, tmp_path):
    """A results tree of two real runs (the scripted agent with 10 steps and with 1) and the viewer on it."""
    results = tmp_path / "results"
    runs = {}
    for steps in (10, 1):
        summary = evaluate(compose_evaluate(*base_overrides(eval_index.path, questions_file, results, "limit=3", f"agent.max_steps={steps}")), out=io.StringIO())
        runs[steps] = summary["run_id"]
    server = subprocess.Popen(
        [sys.executable, "-m", "pipelines.view", f"results.path={results}", "view.port=0", "view.open_browser=false"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in server.stdout], daemon=True).start()
    try:
        first = lines.get(timeout=120)
        assert " at http://127.0.0.1:" in first, first + server.stderr.read() if server.poll() is not None else first
        yield first.split(" at ")[1].split()[0], runs
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_the_viewer_in_a_browser_lists_the_runs_and_shows_an_episodes_tool_calls_and_verdict(viewer, tmp_path):
    url, runs = viewer
    index = Dom(chromium(tmp_path, url, "--dump-dom"))
    assert {(runs[10], q) for q in ("q0", "q1", "q2")} | {(runs[1], q) for q in ("q0", "q1", "q2")} == listed(index)
    # Every accuracy with its 95% interval and n; the two runs (same questions) compared pair by pair.
    shown = [x for _, _, x in index.having("llm-acc") + index.having("contain-acc")]
    assert len(shown) == 4 and all(re.fullmatch(r"\d+\.\d% \[\d+\.\d, \d+\.\d\] n=3", x) for x in shown), shown
    assert [x for _, _, x in index.having("verdict", tag="td")] and all(v in ("within noise", "differs") for _, _, v in index.having("verdict", tag="td"))

    episode_url = f"{url}episode?{urlencode({'run': runs[10], 'q': 'q0'})}"
    dom = Dom(chromium(tmp_path, episode_url, "--dump-dom"))
    assert [a["data-tool"] for _, a, _ in dom.having("tool-call")] == ["keyword_search", "chunk_read"]
    assert any("2#0" in x and "Ermengarde of Tours" in x for _, _, x in dom.having("gold", tag="span"))
    assert "correct" in dom.by_id("verdict") and dom.by_id("prediction") == "20 March 851"

    forced = Dom(chromium(tmp_path, f"{url}?forced=yes", "--dump-dom"))
    assert listed(forced) == {(runs[1], q) for q in ("q0", "q1", "q2")}
    compare = next(a["href"] for _, a, _ in index.having(tag="a") if a.get("href", "").startswith("/compare?") and a["href"].endswith("q=q0"))
    side = Dom(chromium(tmp_path, url + compare.lstrip("/"), "--dump-dom"))
    assert len(side.having("run-column")) == 2

    shot = tmp_path / "episode.png"
    chromium(tmp_path, episode_url, f"--screenshot={shot}", "--window-size=1280,1500")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    print(f"\nscreenshot of the episode page: {shot}")
