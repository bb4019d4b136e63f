"""The test-time-scaling layout: accuracy and cost against one swept setting, a table per series
(runs alike but in the swept setting, at least two values of it). Runs of a series that differ in
any other identity setting are refused (docs/evaluation.md, "Test-time scaling")."""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import groupby
from typing import Any, Callable

import duckdb

from arag.report.intervals import Proportion, proportion
from arag.report.intervals import cell as accuracy_cell
from arag.report.format import UnlikeRunsError, accuracy_sql, failures_sql, setting_text
from arag.report.format import format_value as _fmt
from arag.report.tables import Topic, fitted_tables

# A swept row column → where it sits in a run's identity settings (arag.evaluation.run_settings).
SWEEPABLE: dict[str, tuple[str, ...]] = {"max_steps": ("agent", "max_steps"), "reasoning_effort": ("model", "reasoning_effort")}
EFFORT_ORDER = ("none", "minimal", "low", "medium", "high")


@dataclass(frozen=True)
class SweepPoint:
    x: Any
    run_id: str
    n: int
    llm: Proportion | None  # LLM-Acc over its scored questions
    contain: Proportion | None
    judge_failed: int
    tokens: float | None  # prompt + completion tokens per question
    reasoning_tokens: float | None
    retrieved_tokens: float | None
    steps: float | None
    model_calls: float | None
    wall_s: float | None
    failed: int  # failed episodes: never scored, named beside the accuracies
    failure_causes: tuple[str, ...]  # one per failed episode


@dataclass(frozen=True)
class Series:
    fixed: tuple[tuple[str, Any], ...]  # (name, value) of every setting held fixed
    points: tuple[SweepPoint, ...]  # in x order


def setting_order(x: str, value: Any) -> tuple:
    """Sort key: unset first, numbers by value, reasoning effort by level, anything else as text."""
    if value is None:
        return (0, 0, "")
    if x == "reasoning_effort":
        text = str(value)
        return (1, EFFORT_ORDER.index(text) if text in EFFORT_ORDER else len(EFFORT_ORDER), text)
    return (1, value, "") if isinstance(value, (int, float)) else (2, 0, str(value))


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(value, dict):
        return {prefix: value}
    return {key: v for k, inner in value.items() for key, v in _flatten(inner, f"{prefix}.{k}" if prefix else str(k)).items()}


def differing_keys(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The dotted keys whose values differ between two identity settings (missing counts as differing)."""
    fa, fb = _flatten(a), _flatten(b)
    return sorted(k for k in fa.keys() | fb.keys() if fa.get(k, object()) != fb.get(k, object()))


def check_series_identity(x: str, runs: list[tuple[str, Any, str]]) -> None:
    """runs: (run id, x, settings JSON); UnlikeRunsError when two differ in an identity setting but `x`."""
    swept = ".".join(SWEEPABLE[x])
    first_id, first_x, first_settings = runs[0]
    base = json.loads(first_settings or "{}")
    for run_id, value, settings in runs[1:]:
        keys = [k for k in differing_keys(base, json.loads(settings or "{}")) if k != swept]
        if keys:
            shown = ", ".join(keys[:8]) + (f" and {len(keys) - 8} more" if len(keys) > 8 else "")
            raise UnlikeRunsError(
                f"a sweep over {x} may only vary {x}, but runs {first_id} ({x}={first_x}) and {run_id} ({x}={value}) also differ in: {shown}. "
                "Keep one value of each other setting with report.where=\"...\" or separate results folders."
            )


def sweep_series(con: duckdb.DuckDBPyConnection, x: str, shown_settings: list[str]) -> list[Series]:
    """The series over `x` (runs grouped by everything but `x`, checked) with ≥ 2 points."""
    if x not in SWEEPABLE:  # `x` goes into the SQL text
        raise ValueError(f"report: cannot sweep over {x!r}; sweepable settings: {', '.join(SWEEPABLE)}")
    others = [c for c in shown_settings if c != x]
    keys = ["dataset", "model", "method", *others, "guard_rails"]
    data = con.execute(
        f"""SELECT {', '.join(keys)}, {x}, run_id, any_value(settings), count(*),
                   {accuracy_sql('llm_acc')}, {accuracy_sql('contain_acc')}, count(*) FILTER (judge_status = 'failed'),
                   avg(prompt_tokens + completion_tokens), avg(reasoning_tokens), avg(retrieved_tokens), avg(steps), avg(model_calls), avg(wall_s),
                   {failures_sql()}
            FROM episodes GROUP BY ALL ORDER BY ALL"""
    ).fetchall()
    out = []
    for key, group in groupby(data, key=lambda r: r[: len(keys)]):  # ORDER BY ALL: a series' runs are adjacent
        rows = [r[len(keys) :] for r in group]
        if len({r[0] for r in rows}) < 2:
            continue
        rows.sort(key=lambda r: setting_order(x, r[0]))
        check_series_identity(x, [(r[1], r[0], r[2]) for r in rows])
        points = tuple(SweepPoint(r[0], r[1], r[3], proportion(r[4], r[5]), proportion(r[6], r[7]), *r[8:-1], tuple(r[-1] or ())) for r in rows)
        out.append(Series(tuple(zip(keys, key)), points))
    # Series in the order of their fixed values (reasoning effort by level, not alphabetically).
    return sorted(out, key=lambda s: [setting_order(k, v) for k, v in s.fixed])


def _sum_n(p: Proportion | None) -> tuple[float | None, int]:
    return (p.successes, p.n) if p else (None, 0)


def sweep_table(con: duckdb.DuckDBPyConnection, x: str, shown_settings: list[str], label: Callable[[str], str]) -> str:
    """Markdown: one table per series, x as the first column, accuracy and cost per point."""
    title = f"## Test-time scaling: accuracy and cost against {x}"
    series = sweep_series(con, x, shown_settings)
    if not series:
        return f"{title}\n\nNo runs that differ only in `{x}` (a sweep: `+sweep=test_time_scaling_{'steps' if x == 'max_steps' else 'effort'}`).\n"
    out = [
        title,
        "",
        f"One table per series: its runs differ only in `{x}` (checked on their identity settings); the settings named above a "
        "table are fixed. LLM-Acc and Cont-Acc over the same questions (judge failures and failed episodes left out of both, the failed ones named beside them), each in % with its 95% Wilson "
        "interval [low, high] and n; a difference between two points is tested in the paired comparisons. Tokens: prompt + completion "
        "tokens per question; wall s: mean seconds per episode.",
        "",
    ]
    header = [x, "n", "LLM-Acc", "Cont-Acc", "judge failed", "tokens / question", "reasoning tokens", "retrieved tokens", "steps", "model calls", "wall s", "run"]
    for s in series:
        fixed = dict(s.fixed)
        name = " · ".join([str(fixed.pop("dataset")), str(fixed.pop("model")), label(str(fixed.pop("method")))])
        rails = fixed.pop("guard_rails")
        named = [f"{k}={setting_text(v)}" for k, v in fixed.items()] + ([f"guard_rails={rails}"] if rails != "off" else [])
        out += [f"**{name}**" + (f" — {', '.join(named)}" if named else ""), ""]
        rows = [
            [setting_text(p.x), _fmt(p.n, "int"), accuracy_cell(*_sum_n(p.llm), p.failed, p.failure_causes),
             accuracy_cell(*_sum_n(p.contain), p.failed, p.failure_causes), _fmt(p.judge_failed, "int"),
             _fmt(p.tokens, "int"), _fmt(p.reasoning_tokens, "int"), _fmt(p.retrieved_tokens, "int"), _fmt(p.steps, "f1"),
             _fmt(p.model_calls, "f1"), _fmt(p.wall_s, "f2"), p.run_id]
            for p in s.points
        ]
        out += fitted_tables(1, [Topic("", header, rows, ["l"] + ["r"] * (len(header) - 2) + ["l"])])
    return "\n".join(out)


# ---- the paper's Figure 4 -----------------------------------------------------------------------
# A-RAG's test-time-scaling figure (§5.1, Figure 4): LLM-Acc alone, against the step limit from 5 to
# 20 and against reasoning effort from minimal to high, one panel per backbone (the paper: steps
# for GPT-5-mini and GPT-4o-mini, effort for GPT-5-mini and GPT-5, all on MuSiQue-300). Its effort
# panels run at one step limit: ours at the official configuration's (AgentConfig.max_steps).
PAPER_STEP_RANGE = (5, 20)
PAPER_EFFORT_LEVELS = ("minimal", "low", "medium", "high")
AXIS_LABELS = {"max_steps": "max steps", "reasoning_effort": "reasoning effort"}
PAPER_FIGURE_FILE = "test_time_scaling.png"


@dataclass(frozen=True)
class Panel:
    """One panel of the figure: LLM-Acc (%) of each series of one (swept setting, backbone, dataset)."""

    x: str
    model: str
    dataset: str
    lines: tuple[tuple[str, tuple[tuple[Any, Proportion], ...]], ...]  # (series label, ((x, LLM-Acc), ...))

    @property
    def title(self) -> str:
        return f"{self.model} · {self.dataset}"


def _in_paper_range(x: str, value: Any) -> bool:
    if x == "max_steps":
        return isinstance(value, (int, float)) and PAPER_STEP_RANGE[0] <= value <= PAPER_STEP_RANGE[1]
    return value in PAPER_EFFORT_LEVELS


def paper_figure_panels(con: duckdb.DuckDBPyConnection, shown_settings: list[str], label: Callable[[str], str], official_steps: int) -> tuple[list[Panel], list[str]]:
    """The figure's panels (max steps first) and a note per series or point left out: effort series at another
    step limit than `official_steps`, x outside the paper's range, points without an LLM-Acc."""
    steps_of = dict(con.execute("SELECT run_id, any_value(max_steps) FROM episodes GROUP BY run_id").fetchall())
    lines: dict[tuple[str, str, str], list] = {}
    notes: list[str] = []
    for x in SWEEPABLE:
        for s in sweep_series(con, x, shown_settings):
            fixed = dict(s.fixed)
            model, dataset = str(fixed.pop("model")), str(fixed.pop("dataset"))
            rails = fixed.pop("guard_rails")
            if x == "reasoning_effort":
                fixed.pop("max_steps", None)  # the same for every effort line: the official step limit, named on the axis
            name = " · ".join([label(str(fixed.pop("method"))), *(f"{k}={setting_text(v)}" for k, v in fixed.items()),
                               *([f"guard_rails={rails}"] if rails != "off" else [])])
            where = f"{model} · {dataset} · {name}"
            if x == "reasoning_effort":
                steps = sorted({steps_of[p.run_id] for p in s.points}, key=lambda v: setting_order("max_steps", v))
                if steps != [official_steps]:
                    notes.append(f"{where}: reasoning effort swept at max_steps={', '.join(map(str, steps))}, not the official {official_steps}")
                    continue
            kept = [p for p in s.points if _in_paper_range(x, p.x) and p.llm is not None]
            dropped = [p.x for p in s.points if p not in kept]
            if dropped:
                notes.append(f"{where}: {x}={', '.join(map(setting_text, dropped))} (outside the paper's range, or no LLM-Acc)")
            if len(kept) >= 2:
                lines.setdefault((x, model, dataset), []).append((name, tuple((p.x, p.llm) for p in kept)))
    order = list(SWEEPABLE)
    panels = [Panel(x, m, d, tuple(ls)) for (x, m, d), ls in sorted(lines.items(), key=lambda kv: (order.index(kv[0][0]), kv[0][1], kv[0][2]))]
    return panels, notes
