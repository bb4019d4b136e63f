"""One count of every episode fact (arag.evaluation.episode_facts) on the committed CPU runs
(benchmarks/cpu_evaluations/results: 2Wiki, its 20-question rerun and GraphRAG-Bench Novel with two
re-judged copies): the report and the viewer print the same tool errors by kind, unusable and
repeated calls and evidence recall for every run, counted from the trajectories of runs stored before
those counts were recorded; the tool-use plot splits datasets and counts a re-judge's episodes once;
the report names each re-judge, its source and its judge. The report's tables are built by the
report's own functions (arag.report.build) over the same connection a report uses."""

from __future__ import annotations

from pathlib import Path

import pytest

from arag.report.episodes import connect
from arag.report.figures import tool_use_series
from arag.report.run_tables import details_table, tool_table
from arag.report.rejudges import counted_runs, rejudge_section
from tests.support.facts_agreement import COMPARED, both_sides
from tests.support.report_tables import table

COMMITTED = Path(__file__).resolve().parents[2] / "benchmarks" / "cpu_evaluations" / "results"
ARAG_NAIVE_10_STEPS = "50522084c0aceef9"  # 2Wiki, 50 questions
NOVEL_REJUDGES = {"c091414684ab2bda": "e9a0079474b562ed", "c270c6a77fbba1b0": "dbf1a07ee4f9177e"}


@pytest.fixture(scope="module")
def con():
    return connect(COMMITTED)


def test_the_report_and_the_viewer_agree_on_every_count_of_every_committed_run(con):
    markdown = "\n".join([details_table(con), tool_table(con)])
    pairs = both_sides(COMMITTED, markdown)
    assert len(pairs) == 10  # 4 + 2 + 4 runs, each a row of its own in the report's tables
    for report, viewer in pairs:
        assert report.cells == viewer.cells, report.run_id
    cells = {report.run_id: report.cells for report, _ in pairs}
    # A-RAG (Naive) at 10 steps, stored before tool errors had kinds: its row says 0 tool errors.
    naive = cells[ARAG_NAIVE_10_STEPS]
    assert (naive["unusable calls"], naive["unknown ids"], naive["already read"], naive["repeated calls"]) == ("370 of 409 (90.5%)", "321", "49", "302 of 409 (73.8%)")
    assert (naive["tool errors"], naive["evidence read"], naive["evidence seen"]) == ("7.40", "34.0", "34.0")
    assert sum(1 for c in cells.values() for k in COMPARED if c[k] not in ("0", "0.00", "0 of 0", "–")) > 30  # counts, not zeros
    for rejudge, source in NOVEL_REJUDGES.items():  # the same episodes: the same counts
        assert cells[rejudge] == cells[source]


def test_the_committed_rows_store_no_counts_the_report_now_shows(con):
    """The report's tool errors are not the stored column: the committed A-RAG (Naive) rows say 0."""
    stored = con.execute(f"SELECT sum(tool_errors) FROM stored_episodes WHERE run_id = '{ARAG_NAIVE_10_STEPS}'").fetchone()[0]
    counted = con.execute(f"SELECT sum(tool_errors), sum(tool_calls) FROM episodes WHERE run_id = '{ARAG_NAIVE_10_STEPS}'").fetchone()
    assert (stored, counted) == (0, (370, 409))


def test_the_tool_use_plot_splits_datasets_and_counts_a_rejudged_run_once(con):
    series = {label: sum(n for _, n in hist) for label, _, hist in tool_use_series(con)}
    novel = {label: n for label, n in series.items() if "graphrag-bench-novel-docs" in label}
    assert sorted(n for n in novel.values()) == [20, 20]  # A-RAG (Full) and AgenticRAG, 20 questions each, not 40
    assert sum(series.values()) == 4 * 50 + 2 * 20 + 2 * 20  # every episode once: 280 of the 320 rows
    assert all(("2wikimultihopqa" in label) != ("graphrag-bench-novel-docs" in label) for label in series)
    assert set(NOVEL_REJUDGES).isdisjoint(counted_runs(con)) and set(NOVEL_REJUDGES.values()) <= set(counted_runs(con))


def test_the_report_names_each_rejudge_its_source_and_judges(con):
    section = table(rejudge_section(con, str), "Re-judged runs", section="Re-judged runs")
    assert [(r["run"], r["method"], r["re-judged from"], r["judge"], r["judge of the run it re-judges"]) for r in section.records] == [
        ("`c091414684ab2bda`", "agenticrag", "`e9a0079474b562ed`", "qwen2.5-coder-1.5b-instruct (preset paper)", "qwen2.5-coder-1.5b-instruct (unnamed preset)"),
        ("`c270c6a77fbba1b0`", "arag_full", "`dbf1a07ee4f9177e`", "qwen2.5-coder-1.5b-instruct (preset paper)", "qwen2.5-coder-1.5b-instruct (unnamed preset)"),
    ]
