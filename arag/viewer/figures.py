"""A run's figures, each with its interval (accuracy, steps, retrieved tokens, tool mix), computed here
and drawn as inline SVG by templates/figures.html."""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

from arag.evaluation.rows import OK
from arag.report.intervals import bootstrap_interval
from arag.tools.failures import FAILURE_KINDS

BAR_W, BAR_H = 320, 16
HIST_W, HIST_H = 320, 70
BINS = 10


def mean_text(values: Sequence[float]) -> str | None:
    """ "3.5 [2.0, 5.0] n=4": the mean with its 95% bootstrap interval (arag.report.intervals.bootstrap_interval, seeded)."""
    if not values:
        return None
    low, high = bootstrap_interval([float(v) for v in values])
    return f"{sum(values) / len(values):.1f} [{low:.1f}, {high:.1f}] n={len(values)}"


def column(rows: list[dict[str, Any]], name: str) -> list[float]:
    return [float(r[name]) for r in rows if r.get(name) is not None and r.get("status") == OK]


def number(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:.1f}"


def histogram_bars(values: Sequence[float]) -> list[tuple[float, float, float, float, str]]:
    """(x, y, width, height, title) per bar: counts per value (a short whole-number range) or per one of BINS bins."""
    lo, hi = min(values), max(values)
    if hi - lo < 3 * BINS:
        edges = [lo + i for i in range(int(hi - lo) + 2)]
    else:
        width = (hi - lo) / BINS
        edges = [lo + i * width for i in range(BINS + 1)]
    counts = Counter(min(int((v - lo) / (edges[1] - edges[0])), len(edges) - 2) for v in values)
    top = max(counts.values())
    w = HIST_W / (len(edges) - 1)

    def span(a: float, b: float) -> str:
        return number(a) if b - a == 1 else f"{number(a)}–{number(b)}"

    return [(round(i * w + 1, 1), round(HIST_H - 14 - (HIST_H - 18) * counts[i] / top, 1), round(w - 2, 1), round((HIST_H - 18) * counts[i] / top, 1),
             f"{span(edges[i], edges[i + 1])}: {counts[i]}") for i in range(len(edges) - 1) if counts[i]]


def tool_mix(rows: list[dict[str, Any]]) -> list[tuple[str, int, float]]:
    """(tool, calls, share of all calls) over the run's episodes, most called first."""
    total = sum((Counter(r.get("tool_mix") or {}) for r in rows), Counter())
    n = sum(total.values())
    return [(tool, calls, calls / n) for tool, calls in sorted(total.items(), key=lambda kv: (-kv[1], kv[0]))]


def kind_totals(rows: list[dict[str, Any]]) -> dict[str, int]:
    """Tool errors per failure kind over the run's episodes (arag.evaluation.episode_facts), the kinds that occurred."""
    total = sum((Counter(r.get("tool_error_kinds") or {}) for r in rows), Counter())
    return {kind: total[kind] for kind in FAILURE_KINDS if total[kind]}
