"""The results viewer in a real headless browser (Chromium from Debian's packages; `.ci/run` installs
it): two tiny evaluations (pipelines.evaluate, scripted backend) write a results tree, the one
command `python -m pipelines.view` serves it, and Chromium's DOM of the pages is checked. The test
writes a screenshot of the episode page (its path is printed) for a person to look at."""

from __future__ import annotations

import contextlib
import io
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

import pytest

from arag.runtime.evaluate import evaluate
from tests.support.scripted_evaluation import base_overrides, compose_evaluate
from tests.viewer.test_viewer import REPO, Dom, listed

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


@contextlib.contextmanager
def served(results: Path):
    """`python -m pipelines.view` on a results tree; yields its address."""
    server = subprocess.Popen(
        [sys.executable, "-m", "pipelines.view", f"results.path={results}", "view.port=0", "view.open_browser=false"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in server.stdout], daemon=True).start()
    try:
        first = lines.get(timeout=120)
        assert " at http://127.0.0.1:" in first, first + server.stderr.read() if server.poll() is not None else first
        yield first.split(" at ")[1].split()[0]
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture
def viewer(ray_local, eval_index, questions_file, tmp_path):
    """A results tree of two real runs (the scripted agent with 10 steps and with 1) and the viewer on it."""
    results = tmp_path / "results"
    runs = {}
    for steps in (10, 1):
        summary = evaluate(compose_evaluate(*base_overrides(eval_index.path, questions_file, results, "limit=3", f"agent.max_steps={steps}")), out=io.StringIO())
        runs[steps] = summary["run_id"]
    with served(results) as url:
        yield url, runs


def test_the_viewer_in_a_browser_lists_the_runs_and_shows_an_episodes_tool_calls_and_verdict(viewer, tmp_path):
    url, runs = viewer
    index = Dom(chromium(tmp_path, url, "--dump-dom"))
    assert {(runs[10], q) for q in ("q0", "q1", "q2")} | {(runs[1], q) for q in ("q0", "q1", "q2")} == listed(index)
    # Every accuracy with its 95% interval and n. With one step the scripted agent never answers: those
    # episodes failed, so that run shows its failures and their cause, no score (it showed 0.0% [0.0, 56.1] n=3).
    order = [a["data-run"] for _, a, _ in index.having("run", tag="tr")]
    shown = {(run, column): x for column in ("llm-acc", "contain-acc") for run, (_, _, x) in zip(order, index.having(column))}
    assert [shown[runs[1], c] for c in ("llm-acc", "contain-acc")] == ["3 failed (the forced final reply was not an answer)"] * 2
    assert all(re.fullmatch(r"\d+\.\d% \[\d+\.\d, \d+\.\d\] n=3", shown[runs[10], c]) for c in ("llm-acc", "contain-acc")), shown
    # No question was scored in both runs: nothing to compare.
    paired = Dom(chromium(tmp_path, url + "paired", "--dump-dom"))
    assert not paired.having("paired", tag="tr") and "No two runs of these results share a scored question." in paired.text()

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


# The committed CPU runs (benchmarks/cpu_evaluations/results: 10 runs, 320 episodes of A-RAG, naive RAG,
# AgenticRAG and a re-judged copy): these tests read that tree.
COMMITTED = REPO / "benchmarks" / "cpu_evaluations" / "results"
AGENTICRAG, REJUDGED, ARAG_NAIVE = "e9a0079474b562ed", "c091414684ab2bda", "50522084c0aceef9"
SIX_RUNS_QUESTION = "a80d84e7096d11ebbdb0ac1f6bf848b6"  # a 2Wiki question all six 2Wiki runs answered


@pytest.fixture(scope="module")
def committed():
    with served(COMMITTED) as url:
        yield url


def test_in_a_browser_the_committed_runs_show_identity_sort_filter_search_and_export(committed, tmp_path):
    url = committed
    index = Dom(chromium(tmp_path, url, "--dump-dom"))
    runs = {a["data-run"]: x for _, a, x in index.having("run", tag="tr")}
    assert len(runs) == 10 and "a6d0e5c (judged at 0e139c3)" in runs[REJUDGED] and AGENTICRAG in runs[REJUDGED]
    judges = [x for _, _, x in index.having("judge", tag="td")]
    assert judges.count("qwen2.5-coder-1.5b-instruct (preset paper)") == 8 and judges.count("qwen2.5-coder-1.5b-instruct (unnamed preset)") == 2  # the originals the re-judged copies came from
    assert len(listed(index)) == 200  # the first page of 320

    steps = lambda dom: [int(x) for _, _, x in dom.having("steps") if x]  # noqa: E731
    down = Dom(chromium(tmp_path, f"{url}?sort=steps&order=desc", "--dump-dom"))
    assert steps(down) == sorted(steps(down), reverse=True) and len(set(steps(down))) > 1

    errors = Dom(chromium(tmp_path, f"{url}?{urlencode({'run': ARAG_NAIVE, 'tool_errors': 'yes'})}", "--dump-dom"))
    shown = listed(errors)
    assert shown and {r for r, _ in shown} == {ARAG_NAIVE} and all(int(x) > 0 for _, _, x in errors.having("errors", tag="td"))
    wrong = Dom(chromium(tmp_path, f"{url}?gold_wrong=yes&evidence=read", "--dump-dom"))
    assert listed(wrong) and all(x == "gold seen but wrong" for _, _, x in wrong.having("gold-wrong"))
    found = Dom(chromium(tmp_path, f"{url}?{urlencode({'q': 'Pawel-Rammingen'})}", "--dump-dom"))  # in AgenticRAG's tool results and predictions
    assert {r for r, _ in listed(found)} >= {AGENTICRAG}

    (csv_link, json_link) = [a["href"] for _, a, _ in errors.having("export")]
    with urllib.request.urlopen(url + csv_link.lstrip("/")) as response:
        lines = response.read().decode().splitlines()
    assert lines[0].startswith("run_id,") and len(lines) - 1 == len(shown)


def test_in_a_browser_agenticrag_episodes_mark_gold_and_tool_errors_look_like_errors(committed, tmp_path):
    url = committed
    episode = Dom(chromium(tmp_path, f"{url}episode?{urlencode({'run': AGENTICRAG, 'q': 'Novel-74440a6a'})}", "--dump-dom"))
    assert any("Novel-44557" in x for _, _, x in episode.having("gold", tag="span"))
    assert "turn1search1" in {x for _, _, x in episode.having("gold", tag="mark")}
    errors = Dom(chromium(tmp_path, f"{url}?{urlencode({'run': ARAG_NAIVE, 'tool_errors': 'yes'})}", "--dump-dom"))
    run, q = sorted(listed(errors))[0]
    legacy = Dom(chromium(tmp_path, f"{url}episode?{urlencode({'run': run, 'q': q})}", "--dump-dom"))
    unusable = [x for _, a, x in legacy.having("tool-call") if "unusable" in a["class"].split()]
    assert unusable and all("tool error: unknown ids" in x for x in unusable) and legacy.having("error-line")

    qid = "Novel-74440a6a"
    side = Dom(chromium(tmp_path, f"{url}compare?{urlencode({'dataset': 'graphrag-bench-novel-docs', 'q': qid})}", "--dump-dom"))
    assert len(side.having("run-column")) == 4 and len(side.having("run-identity")) == 4
    html = chromium(tmp_path, f"{url}compare?{urlencode({'dataset': 'graphrag-bench-novel-docs', 'q': qid})}", "--dump-dom")
    columns = html.split('class="box run-column"')[1:]
    assert len(columns) == 4 and all('class="chunk gold"' in part for part in columns)


# A laptop's width, and what is measured in the page at it: the page's own overflow, each table's (or
# the compare columns') width against its container's, and where the episodes start.
LAPTOP_PX = 1400
LAYOUT_JS = """JSON.stringify({
  page: [document.documentElement.scrollWidth, document.documentElement.clientWidth],
  runs: [...document.querySelectorAll('table.runs')].map(t => [t.scrollWidth, t.parentElement.clientWidth]),
  columns: [...document.querySelectorAll('.columns')].map(c => [c.scrollWidth, c.clientWidth]),
  clipped: [...document.querySelectorAll('.run-column')].filter(c => c.scrollWidth > c.clientWidth + 1 || c.getBoundingClientRect().right > window.innerWidth).length,
  run_columns: document.querySelectorAll('.run-column').length,
  episodes_top: document.getElementById('episodes') ? document.getElementById('episodes').getBoundingClientRect().top : null})"""


def test_at_1400_px_the_runs_and_compare_tables_fit_and_filtered_episodes_come_first(committed):
    """Measured by Chromium's layout (tests/support/headless_chromium.py), not by time: nothing wider than
    the window, each table within its container (no hidden columns), every compare column in view."""
    import json

    from tests.support.headless_chromium import Browser

    url = committed
    with Browser(CHROMIUM) as browser:
        index = json.loads(browser.run(url, LAPTOP_PX, LAYOUT_JS))
        filtered = json.loads(browser.run(f"{url}?{urlencode({'run': ARAG_NAIVE})}", LAPTOP_PX, LAYOUT_JS))
        compare = json.loads(browser.run(f"{url}compare?{urlencode({'dataset': '2wikimultihopqa', 'q': SIX_RUNS_QUESTION})}", LAPTOP_PX, LAYOUT_JS))
    for layout in (index, filtered, compare):
        page_width, window = layout["page"]
        assert page_width <= window, layout
    assert len(index["runs"]) == 1 and all(width <= container for width, container in index["runs"]), index
    assert compare["run_columns"] == 6 and compare["clipped"] == 0 and all(width <= container for width, container in compare["columns"]), compare
    assert filtered["episodes_top"] < 300, filtered  # a filtered listing starts with its episodes, not below the runs
    assert index["episodes_top"] > filtered["episodes_top"]


def test_in_a_browser_a_runs_figures_and_settings(committed, tmp_path):
    url = committed
    page = Dom(chromium(tmp_path, f"{url}run?run={AGENTICRAG}", "--dump-dom"))
    values = {a["data-metric"]: x for _, a, x in page.having("value", tag="td")}
    assert re.fullmatch(r"\d+\.\d% \[\d+\.\d, \d+\.\d\] n=20", values["llm_acc"]) and values["steps"].startswith("mean ") and "n=20" in values["steps"]
    assert {a["data-tool"] for _, a, _ in page.having("tool", tag="tr")} == {"search", "find", "open", "summarize"}
    assert len(page.having("interval-bar")) == 2 and len(page.having("histogram")) == 2
    settings = Dom(chromium(tmp_path, f"{url}settings?run={AGENTICRAG}", "--dump-dom"))
    assert f'"run_id": "{AGENTICRAG}"' in settings.by_id("run-json")
