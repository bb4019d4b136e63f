"""A run's figures, each with its interval: accuracy (95% Wilson interval, arag.report.intervals),
steps and retrieved tokens per episode (mean with a seeded 95% bootstrap interval, and their
distribution), and the tool mix (calls per tool, share of all calls). Drawn as inline SVG: nothing
fetched, no script."""

from __future__ import annotations

import html
from collections import Counter
from dataclasses import dataclass
from typing import Any, Sequence

from arag.evaluation.rows import OK
from arag.report.intervals import Proportion, bootstrap_interval
from arag.tools.failures import FAILURE_KINDS

BAR_W, BAR_H = 320, 16
HIST_W, HIST_H = 320, 70
BINS = 10


@dataclass(frozen=True)
class Mean:
    value: float
    low: float
    high: float
    n: int

    def text(self, digits: int = 1) -> str:
        return f"{self.value:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}] n={self.n}"


def mean(values: Sequence[float]) -> Mean | None:
    """The mean with its 95% bootstrap interval (arag.report.intervals.bootstrap_interval, seeded)."""
    if not values:
        return None
    low, high = bootstrap_interval([float(v) for v in values])
    return Mean(sum(values) / len(values), low, high, len(values))


def column(rows: list[dict[str, Any]], name: str, answered_only: bool = True) -> list[float]:
    return [float(r[name]) for r in rows if r.get(name) is not None and (r.get("status") == OK or not answered_only)]


def interval_bar(p: Proportion, label: str) -> str:
    """A 0–100% axis with the accuracy as a bar and its interval as a whisker."""
    low, high = p.interval
    x = lambda v: round(v * BAR_W, 1)  # noqa: E731
    return (
        f'<svg class="interval-bar" role="img" aria-label="{html.escape(label)} {html.escape(p.text())}" width="{BAR_W}" height="{BAR_H}" viewBox="0 0 {BAR_W} {BAR_H}">'
        f'<rect x="0" y="3" width="{BAR_W}" height="{BAR_H - 6}" fill="#eee"/><rect x="0" y="3" width="{x(p.value or 0)}" height="{BAR_H - 6}" fill="#0b57d0" opacity="0.55"/>'
        f'<line x1="{x(low)}" x2="{x(high)}" y1="{BAR_H / 2}" y2="{BAR_H / 2}" stroke="#1d1d1f" stroke-width="2"/>'
        f'<line x1="{x(low)}" x2="{x(low)}" y1="2" y2="{BAR_H - 2}" stroke="#1d1d1f"/><line x1="{x(high)}" x2="{x(high)}" y1="2" y2="{BAR_H - 2}" stroke="#1d1d1f"/></svg>'
    )


def histogram(values: Sequence[float], label: str, whole: bool) -> str:
    """Counts per value (whole numbers over a short range) or per one of BINS equal bins."""
    if not values:
        return ""
    lo, hi = min(values), max(values)
    if whole and hi - lo < 3 * BINS:
        edges = [lo + i for i in range(int(hi - lo) + 2)]
    else:
        width = (hi - lo) / BINS or 1.0
        edges = [lo + i * width for i in range(BINS + 1)]
    counts = Counter(min(int((v - lo) / (edges[1] - edges[0])), len(edges) - 2) for v in values)
    n_bins = len(edges) - 1
    top = max(counts.values())
    w = HIST_W / n_bins
    bars = "".join(
        f'<rect x="{round(i * w + 1, 1)}" y="{round(HIST_H - 14 - (HIST_H - 18) * counts[i] / top, 1)}" width="{round(w - 2, 1)}" height="{round((HIST_H - 18) * counts[i] / top, 1)}" fill="#1e8e3e" opacity="0.7">'
        f"<title>{html.escape(_span(edges[i], edges[i + 1], whole))}: {counts[i]}</title></rect>"
        for i in range(n_bins) if counts[i]
    )  # fmt: skip
    axis = f'<text x="0" y="{HIST_H - 2}" font-size="10">{html.escape(_fmt(lo))}</text><text x="{HIST_W}" y="{HIST_H - 2}" font-size="10" text-anchor="end">{html.escape(_fmt(hi))}</text>'
    return f'<svg class="histogram" role="img" aria-label="{html.escape(label)}" width="{HIST_W}" height="{HIST_H}" viewBox="0 0 {HIST_W} {HIST_H}">{bars}{axis}</svg>'


def _fmt(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:.1f}"


def _span(a: float, b: float, whole: bool) -> str:
    return _fmt(a) if whole and b - a == 1 else f"{_fmt(a)}–{_fmt(b)}"


def tool_mix(rows: list[dict[str, Any]]) -> list[tuple[str, int, float]]:
    """(tool, calls, share of all calls) over the run's episodes, most called first."""
    total: Counter = Counter()
    for r in rows:
        total.update(r.get("tool_mix") or {})
    n = sum(total.values())
    return [(tool, calls, calls / n) for tool, calls in sorted(total.items(), key=lambda kv: (-kv[1], kv[0]))]


def kind_totals(rows: list[dict[str, Any]]) -> dict[str, int]:
    """Tool errors per failure kind over the run's episodes (arag.evaluation.episode_facts), the kinds that occurred."""
    total: Counter = Counter()
    for r in rows:
        total.update(r.get("tool_error_kinds") or {})
    return {kind: total[kind] for kind in FAILURE_KINDS if total[kind]}


def share_bar(share: float) -> str:
    return (f'<svg class="share-bar" width="{BAR_W}" height="{BAR_H}" viewBox="0 0 {BAR_W} {BAR_H}"><rect x="0" y="3" width="{BAR_W}" height="{BAR_H - 6}" fill="#eee"/>'
            f'<rect x="0" y="3" width="{round(share * BAR_W, 1)}" height="{BAR_H - 6}" fill="#8430ce" opacity="0.6"/></svg>')
