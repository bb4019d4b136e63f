"""Report tables that fit a page: no table wider than MAX_COLUMNS (wider ones split by topic), and a
column whose value is the same on every row stated once above its table instead (arag.report.tables);
checked on the reports of the committed CPU runs and on small tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from arag.report.build import build_report
from arag.report.episodes import SETTING_HEADERS
from arag.report.tables import MAX_COLUMNS, Topic, constants_line, fitted_tables
from tests.support.report_tables import report_tables, table

COMMITTED = Path(__file__).resolve().parents[2] / "benchmarks" / "cpu_evaluations" / "results"
# The per-run tables: every row a run cell keyed by dataset, model and method.
PER_RUN_SECTIONS = ("Details per run", "Retrieved tokens and cost per episode", "Tool use", "AgenticRAG")
# Tables whose columns are their structure, shown even where every row holds the same value: each
# run's protocol card (a setting per row) and a pivot's dataset columns.
STRUCTURAL = ("Protocol",)


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    out = tmp_path_factory.mktemp("reports")
    return {name: build_report(COMMITTED / name, out / (name or "all")).markdown for name in ("", "2wiki", "2wiki20", "novel")}


@pytest.mark.parametrize("name", ["", "2wiki", "2wiki20", "novel"])
def test_no_table_of_the_committed_reports_is_too_wide_or_repeats_one_value(reports, name):
    tables = report_tables(reports[name])
    assert len(tables) > 10
    too_wide = [(t.section, t.title, len(t.header)) for t in tables if len(t.header) > MAX_COLUMNS]
    assert not too_wide, f"tables wider than {MAX_COLUMNS} columns: {too_wide}"
    repeated = [(t.section, t.title, h) for t in tables if len(t.rows) > 1 and not t.section.startswith(STRUCTURAL)
                for h in t.header if len(set(t.column(h))) == 1 and not _dataset_column(t, h)]
    assert not repeated, f"columns with one value on every row: {repeated}"
    # A run cell's dataset, model and method are in every per-run table, as a column or stated above it.
    per_run = [t for t in tables if t.section.startswith(PER_RUN_SECTIONS) and t.rows]
    assert per_run, f"no table with rows under {PER_RUN_SECTIONS}: the check below would check nothing"
    for t in per_run:
        assert all({"dataset", "model", "method"} <= set(r) for r in t.records), (t.section, t.title)


def _dataset_column(t, header: str) -> bool:
    """A pivot's dataset column (its structure, kept even where one value fills it)."""
    return t.section.startswith(("Main results", "Ablations", "Retrieved tokens per question")) and header not in ("Method", *SETTING_HEADERS.values())


def test_the_one_model_of_the_committed_runs_is_stated_once_per_section(reports):
    text = reports["2wiki"]
    for section in ("## Details per run", "## Retrieved tokens and cost per episode", "## Tool use"):
        body = text.split(section)[1].split("\n## ")[0]
        assert body.count("Same on every row: dataset: 2wikimultihopqa · model: qwen2.5-coder-1.5b-instruct\n") == 1, section
    assert not [t for t in report_tables(text) if "dataset" in t.header or "model" in t.header]
    # The tool-use tables of the whole tree: the tools no run called stated once, not a column of zeros each.
    calls = table(reports[""], "Calls per tool", section="Tool use")
    assert calls.constants["semantic_search"] == "0.00" and "semantic_search" not in calls.header
    assert "keyword_search" in calls.header and "find" in calls.header


def test_the_retrieved_tokens_table_is_one_table_with_the_varying_settings_as_columns(reports):
    tokens = [t for t in report_tables(reports[""]) if t.section.startswith("Retrieved tokens per question")]
    assert len(tokens) == 1  # no block per setting
    assert tokens[0].header[:4] == ["max steps", "guard rails", "judge", "Method"]
    assert tokens[0].header[4:] == ["2wikimultihopqa", "graphrag-bench-novel-docs"]
    full = [r for r in tokens[0].records if r["Method"] == "A-RAG (Full)" and r["max steps"] == "15"]
    assert [r["2wikimultihopqa"] for r in full] == ["6,788"]


KEYS = ["dataset", "method"]


def rows_of(n: int) -> list[list[str]]:
    return [["2wiki", f"m{i}", *(str(i * j) for j in range(14)), "same"] for i in range(n)]


def test_constant_columns_are_stated_once_above_and_wide_tables_split_with_their_keys():
    header = [*KEYS, *(f"c{j}" for j in range(14)), "fixed"]
    lines = fitted_tables(2, [Topic("Wide", header, rows_of(3))])
    tables = report_tables("\n".join(["## S", "", *lines]))
    # c0 is 0 on every row (i * 0), like dataset and the last column: one line above, no column.
    assert lines[0] == "**Wide (1/2)**" and lines[2] == constants_line([("dataset", "2wiki"), ("c0", "0"), ("fixed", "same")])
    assert [t.title for t in tables] == ["Wide (1/2)", "Wide (2/2)"]
    assert all(len(t.header) <= MAX_COLUMNS and t.header[0] == "method" for t in tables)
    assert [h for t in tables for h in t.header[1:]] == [f"c{j}" for j in range(1, 14)]  # every value column once, in order
    assert tables[1].records[2]["c13"] == "26" and tables[1].records[2]["dataset"] == "2wiki"


def test_a_single_row_keeps_its_columns_and_a_section_states_shared_keys_once():
    one = fitted_tables(2, [Topic("", [*KEYS, "x"], [["2wiki", "m", "1"]])])
    assert one == ["| dataset | method | x |\n| --- | --- | ---: |\n| 2wiki | m | 1 |", ""]
    rows = [["2wiki", "a", "1", "0"], ["2wiki", "b", "2", "0"]]
    lines = fitted_tables(2, [Topic("First", [*KEYS, "x", "y"], rows), Topic("Second", [*KEYS, "z"], [["2wiki", "a", "0"], ["2wiki", "b", "0"]])])
    text = "\n".join(lines)
    assert text.count("dataset: 2wiki") == 1 and lines[0] == constants_line([("dataset", "2wiki")])
    # A section's table all of whose values are the same: the line alone (its rows are in the first table).
    assert lines[-2:] == [constants_line([("z", "0")]), ""] and text.count("| method |") == 1
    # A lone table keeps its row keys even when every value is the same.
    lone = fitted_tables(2, [Topic("", [*KEYS, "z"], [["2wiki", "a", "0"], ["2wiki", "b", "0"]])])
    assert lone[0] == constants_line([("dataset", "2wiki"), ("z", "0")]) and "| method |" in lone[2]
