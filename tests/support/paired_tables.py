"""The paired comparisons as the report and the viewer show them, read back for tests: each pair as
{(run A, run B, metric): (n, A %, B %, Δ (A − B), 95% CI of Δ, right only in A / B, p, verdict)}."""

from __future__ import annotations

from html.parser import HTMLParser

from arag.report.intervals import PAIRED_HEADER
from arag.report.paired import TITLE
from tests.support.report_tables import report_tables

PairCells = dict[tuple[str, str, str], tuple[str, ...]]


def report_pairs(markdown: str) -> PairCells:
    """Every row of the report's "Paired comparisons" tables (constants stated above a table filled in)."""
    section = TITLE + markdown.split(TITLE, 1)[1].split("\n## ", 1)[0]
    out: PairCells = {}
    for t in report_tables(section):
        for r in t.records:
            a, b = r["runs A → B"].split(" → ")
            key = (a, b, r["metric"])
            assert key not in out, f"pair {key} listed twice in the report"
            out[key] = tuple(r[h] for h in PAIRED_HEADER)
    return out


class _PairedRows(HTMLParser):
    """The viewer's `tr.paired` rows: their data-a, data-b, data-metric and the text of their cells."""

    def __init__(self, page: str):
        super().__init__()
        self.rows: list[tuple[dict, list[str]]] = []
        self._row: tuple[dict, list[str]] | None = None
        self._cell: list[str] | None = None
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "tr":
            self._row = (attrs, []) if "paired" in (attrs.get("class") or "").split() else None
            if self._row:
                self.rows.append(self._row)
        elif tag == "td" and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "td" and self._row is not None and self._cell is not None:
            self._row[1].append("".join(self._cell))
            self._cell = None
        elif tag == "tr":
            self._row = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def viewer_pairs(page: str) -> PairCells:
    """Every row of the viewer's paired table: its last cells are PAIRED_HEADER's."""
    out: PairCells = {}
    for attrs, cells in _PairedRows(page).rows:
        key = (attrs["data-a"], attrs["data-b"], attrs["data-metric"])
        assert key not in out, f"pair {key} listed twice in the viewer"
        out[key] = tuple(cells[-len(PAIRED_HEADER):])
    return out
