"""The report's paired comparisons: two runs of one dataset and method that answered some of the same
questions, compared question by question (arag.report.intervals.paired) on the questions both
scored, so that a difference the size of chance is called so.

Which runs are paired, within each (dataset, method): two runs whose shown settings (the model and
the settings the report shows because they vary) differ in exactly one, with no run of the same
other settings between them along it (a sweep's neighbours, a run and its re-judged copy); and the
two runs of a (dataset, method) that has exactly two, whatever they differ in (a re-run after a
change: before and after).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import combinations
from typing import Any, Callable, Sequence

import duckdb

from arag.report.intervals import ALPHA, RESAMPLES, WITHIN_NOISE, Paired, paired, paired_cells
from arag.report.format import SCORED
from arag.report.tables import Topic, fitted_tables
from arag.report.sweeps import differing_keys, setting_order

METRICS = (("LLM-Acc", "llm_acc"), ("Cont-Acc", "contain_acc"))
TITLE = "## Paired comparisons"


@dataclass(frozen=True)
class RunKey:
    run_id: str
    dataset: str
    method: str
    shown: tuple[tuple[str, Any], ...]  # (setting, value): the model and the settings the report shows
    settings: dict[str, Any]  # the identity settings of its rows
    started: Any  # its first episode's finish time, to put an earlier run first

    def value(self, name: str) -> Any:
        return dict(self.shown)[name]

    def order(self) -> tuple:
        return (*(setting_order(k, v) for k, v in self.shown), str(self.started or ""), self.run_id)


@dataclass(frozen=True)
class Comparison:
    a: RunKey
    b: RunKey
    differs: str  # what tells b from a, e.g. "max_steps 10 → 15; code a058428 → 9161588"
    metric: str
    result: Paired


def run_keys(con: duckdb.DuckDBPyConnection, shown_settings: Sequence[str]) -> list[RunKey]:
    shown = ["model", *shown_settings]
    has_finished = any(r[0] == "finished_at" for r in con.execute("DESCRIBE episodes").fetchall())
    rows = con.execute(
        f"""SELECT run_id, dataset, method, {', '.join(shown)}, any_value(settings), {'min(finished_at)' if has_finished else 'NULL'}
            FROM episodes GROUP BY ALL ORDER BY ALL"""
    ).fetchall()
    n = len(shown)
    return [RunKey(r[0], r[1], r[2], tuple(zip(shown, r[3 : 3 + n])), json.loads(r[3 + n] or "{}"), r[4 + n]) for r in rows]


def pairs(runs: Sequence[RunKey]) -> list[tuple[RunKey, RunKey]]:
    """The pairs compared (module docstring), each earlier-or-smaller run first."""
    groups: dict[tuple[str, str], list[RunKey]] = {}
    for r in runs:
        groups.setdefault((r.dataset, r.method), []).append(r)
    out = []
    for _, group in sorted(groups.items()):
        group.sort(key=RunKey.order)
        if len(group) == 2:
            out.append((group[0], group[1]))
            continue
        for a, b in combinations(group, 2):
            differ = [k for k, v in a.shown if b.value(k) != v]
            if len(differ) != 1:
                continue
            (name,) = differ
            same_else = [r for r in group if all(r.value(k) == v for k, v in a.shown if k != name)]
            low, high = setting_order(name, a.value(name)), setting_order(name, b.value(name))
            if not any(low < setting_order(name, r.value(name)) < high for r in same_else):
                out.append((a, b))
    return out


def _short(value: Any) -> str:
    return "—" if value is None else str(value)


def differences(a: RunKey, b: RunKey) -> str:
    """The shown settings that differ, the code commit when it does, else the identity settings' keys."""
    out = [f"{k} {_short(v)} → {_short(b.value(k))}" for k, v in a.shown if b.value(k) != v]
    commit_a, commit_b = (str((r.settings.get("code") or {}).get("commit") or "")[:7] for r in (a, b))
    if commit_a != commit_b:
        out.append(f"code {commit_a or '?'} → {commit_b or '?'}")
    if not out:
        keys = differing_keys(a.settings, b.settings)
        out.append("settings " + ", ".join(keys[:4]) + (f" and {len(keys) - 4} more" if len(keys) > 4 else "") if keys else "nothing recorded")
    return "; ".join(out)


def scores(con: duckdb.DuckDBPyConnection, column: str) -> dict[str, dict[str, float]]:
    """{run id: {question id: score}} over the scored questions with a score."""
    out: dict[str, dict[str, float]] = {}
    for run_id, question_id, score in con.execute(f"SELECT run_id, question_id, {column} FROM episodes WHERE {SCORED} AND {column} IS NOT NULL").fetchall():
        out.setdefault(run_id, {})[question_id] = score
    return out


def comparisons(con: duckdb.DuckDBPyConnection, shown_settings: Sequence[str]) -> list[Comparison]:
    chosen = pairs(run_keys(con, shown_settings))
    if not chosen:
        return []
    out = []
    by_metric = {name: scores(con, column) for name, column in METRICS}
    for a, b in chosen:
        for name, _ in METRICS:
            result = paired(by_metric[name].get(a.run_id, {}), by_metric[name].get(b.run_id, {}))
            if result is not None:
                out.append(Comparison(a, b, differences(a, b), name, result))
    return out


def paired_section(con: duckdb.DuckDBPyConnection, shown_settings: Sequence[str], label: Callable[[str], str] = str) -> str:
    found = comparisons(con, shown_settings)
    if not found:
        return f"{TITLE}\n\nNo two runs of one dataset and method to compare on shared questions.\n"
    header = ["dataset", "method", "A → B", "differs in", "metric", "n", "A", "B", "Δ (B − A)", "95% CI of Δ", "right only in A / B", "p", "verdict"]
    rows = [[c.a.dataset, label(c.a.method), f"{c.a.run_id} → {c.b.run_id}", c.differs, c.metric, *paired_cells(c.result)] for c in found]
    return "\n".join([
        TITLE,
        "",
        "Two runs of one dataset and method on the questions both scored (n), question by question: their accuracies in % "
        "there, the difference Δ in points with its paired bootstrap 95% interval "
        f"({RESAMPLES:,} resamplings of the shared questions, seeded), the questions only one of them got right, and the "
        f"exact McNemar p-value (binomial test of those discordant questions). \"{WITHIN_NOISE}\": p ≥ {ALPHA} or an interval "
        "that holds 0, a difference that chance alone could make on these questions. Pairs: runs whose shown settings differ "
        "in one (neighbours along it), or the only two runs of a dataset and method.",
        "",
        *fitted_tables(5, [Topic("", header, rows, ["l"] * 5 + ["r"] * 7 + ["l"])]),
    ])
