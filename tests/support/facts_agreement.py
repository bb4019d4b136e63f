"""The report and the viewer side by side on one results tree: per run, every episode count both
show (tool calls, tool errors in all and by kind, repeated calls, evidence recall seen and read), as
each prints it. The report's numbers are read from its tables (tool use, details per run), the
viewer's from a run's page (/run) and its exported episodes (/export?format=json)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from arag.report.episodes import connect, varying_settings
from arag.report.run_tables import calls_share, key_cells, key_header
from arag.report.format import format_value
from arag.tools.failures import FAILURE_KINDS
from tests.support.report_tables import report_tables

# The report tables that hold the counts, by (section, title start).
TOOL_TABLES = (("Tool use", "Tool errors, repeated calls"), ("Tool use", "Tool errors by kind"), ("Tool use", "Calls per tool"))
EVIDENCE_TABLE = ("Details per run", "Accuracy over the answered ones")
# The counts compared, by the report's column header.
COMPARED = ("tool errors", "unusable calls", "repeated calls", *(k.replace("_", " ") for k in FAILURE_KINDS), "evidence read", "evidence seen")


@dataclass
class Side:
    """One run's counts as one side prints them, by the report's column header."""

    run_id: str
    cells: dict[str, str]


def merged_records(markdown: str, section: str, title: str) -> list[dict[str, str]]:
    """The records of a report table, its parts (a table split to fit a page) merged row by row."""
    parts = [t for t in report_tables(markdown) if t.section.startswith(section) and t.title.startswith(title)]
    assert parts, f"no table {title!r} in section {section!r}"
    rows = [dict(r) for r in parts[0].records]
    for part in parts[1:]:
        assert len(part.records) == len(rows), f"the parts of {title!r} differ in their rows"
        for row, more in zip(rows, part.records):
            row.update(more)
    return rows


def report_side(root: Path, markdown: str) -> list[Side]:
    """Each run's cells in the report's tables: the row whose keys (dataset, model, method and the
    settings that vary) are the run's; each run must have a row of its own."""
    con = connect(root)
    cols = ["dataset", "model", "method", *varying_settings(con)]
    runs = con.execute(f"SELECT run_id, {', '.join(cols)} FROM episodes GROUP BY ALL ORDER BY run_id").fetchall()
    assert len({r[0] for r in runs}) == len(runs), "a run whose rows differ in a shown setting"
    tables = [merged_records(markdown, s, t) for s, t in (*TOOL_TABLES, EVIDENCE_TABLE)]
    out = []
    for run_id, *values in runs:
        key = dict(zip(key_header(cols), key_cells(cols, values)))
        cells: dict[str, str] = {}
        for records in tables:
            (row,) = [r for r in records if all(r.get(k) == v for k, v in key.items())]
            cells.update(row)
        out.append(Side(run_id, {c: cells[c] for c in COMPARED}))
    return out


def viewer_side(client, run_id: str) -> Side:
    """A run's counts on the viewer's pages, printed as the report prints them."""
    from tests.viewer.test_viewer import Dom

    page = Dom(client.get(f"/run?run={run_id}").text)
    calls = int(page.by_id("tool-calls"))
    unusable, repeated = page.by_id("unusable-calls"), page.by_id("repeated-calls")
    episodes = client.get(f"/export?run={run_id}&format=json").json()
    assert episodes and {e["run_id"] for e in episodes} == {run_id}

    def mean(column: str, kind: str) -> str:
        values = [e[column] for e in episodes if e[column] is not None]
        return format_value(sum(values) / len(values) if values else None, kind)

    evidence = {"evidence read": mean("evidence_recall_read", "pct"), "evidence seen": mean("evidence_recall_seen", "pct")}
    if unusable == "n/a":  # a row stored without a trajectory: nothing counted
        assert repeated == "n/a" and any(e["unusable_results"] is None for e in episodes)
        return Side(run_id, {**{c: "n/a" for c in COMPARED}, **evidence})
    assert sum(e["unusable_results"] for e in episodes) == int(unusable) and sum(e["repeated"] for e in episodes) == int(repeated)
    cells = {
        "tool errors": mean("unusable_results", "f2"),
        "unusable calls": calls_share(int(unusable), calls),
        "repeated calls": calls_share(int(repeated), calls),
        **{k.replace("_", " "): format_value(sum(e[f"tool_errors_{k}"] for e in episodes), "int") for k in FAILURE_KINDS},
        **evidence,
    }
    return Side(run_id, cells)


def both_sides(root: Path, markdown: str) -> list[tuple[Side, Side]]:
    """(report, viewer) per run under `root`, by run id."""
    from starlette.testclient import TestClient

    from arag.viewer import create_app

    report = report_side(root, markdown)
    with TestClient(create_app(root)) as client:
        return [(r, viewer_side(client, r.run_id)) for r in report]
