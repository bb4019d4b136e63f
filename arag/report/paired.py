"""The report's paired comparisons (the viewer shows the same): two runs of one dataset compared question
by question on the questions both scored. Which runs are paired, and which is A (Δ = A − B):
docs/evaluation.md, "Noise: intervals and paired comparisons"."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations, groupby
from typing import Any, Callable, Sequence

import duckdb

from arag.report.intervals import ALPHA, DELTA, PAIRED_HEADER, RESAMPLES, WITHIN_NOISE, Paired, paired, paired_cells
from arag.report.format import SCORED, setting_text
from arag.report.paper import PAPER_ABLATIONS_FILE, PAPER_RESULTS_FILE, PaperResults
from arag.report.tables import Topic, fitted_tables
from arag.report.sweeps import differing_keys, setting_order

METRICS = (("LLM-Acc", "llm_acc"), ("Cont-Acc", "contain_acc"))
TITLE = "## Paired comparisons"
# The methods the paper's Table 1 counts as A-RAG (its own agent, conf/method/<name>.yaml `kind`).
ARAG_KIND = "agent"
TABLE1 = "Table 1"
TABLE2 = "Table 2"
TABLE_TITLES = {TABLE1: "A-RAG against the baselines and A-RAG (Full) against A-RAG (Naive), as the paper's Table 1",
                TABLE2: "A-RAG (Full) against each ablation, as the paper's Table 2"}
WITHIN_TITLE = "Within one method: runs that differ in one shown setting, or its only two runs"


@dataclass(frozen=True)
class MethodComparison:
    a: str  # the A-RAG method under test
    b: str  # the baseline or ablation it is set against
    table: str  # the paper's table that sets them side by side


@lru_cache(maxsize=1)
def paper_comparisons() -> tuple[MethodComparison, ...]:
    """The method pairs the A-RAG paper compares: Table 1's A-RAG rows each against every row above it, the
    nearest first; Table 2's first row against each ablation below it."""
    from arag.config.files import method_names, read_method_config

    out: list[MethodComparison] = []
    for file in (PAPER_RESULTS_FILE, PAPER_ABLATIONS_FILE):
        # the table's methods in its row order (every backbone's, first seen first)
        rows = list(dict.fromkeys(m for methods in PaperResults.load(table=file).backbones.values() for m in methods))
        unknown = [m for m in rows if m not in method_names()]
        if unknown:
            raise ValueError(f"conf/paper_results/{file}: method {unknown[0]!r} has no config in conf/method (known: {', '.join(method_names())})")
        if file == PAPER_RESULTS_FILE:
            out += [MethodComparison(a, b, TABLE1) for i, a in reversed(list(enumerate(rows))) if read_method_config(a).get("kind") == ARAG_KIND for b in reversed(rows[:i])]
        else:
            out += [MethodComparison(rows[0], b, TABLE2) for b in rows[1:]]
    return tuple(dict.fromkeys(out))


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

    def rejudges(self, other: "RunKey") -> bool:
        return self.settings.get("rejudged_from") == other.run_id


def earlier_first(x: RunKey, y: RunKey) -> tuple[RunKey, RunKey]:
    """(A, B): a re-judged copy after its source, else the smaller shown settings, then the earlier run, first."""
    if x.rejudges(y):
        return y, x
    if y.rejudges(x):
        return x, y
    return (x, y) if x.order() <= y.order() else (y, x)


def within_method_pairs(runs: Sequence[RunKey]) -> list[tuple[RunKey, RunKey]]:
    out = []
    for _, grouped in groupby(sorted(runs, key=lambda r: (r.dataset, r.method, r.order())), key=lambda r: (r.dataset, r.method)):
        group = list(grouped)
        if len(group) == 2:
            out.append(earlier_first(*group))
            continue
        for a, b in combinations(group, 2):
            differ = [k for k, v in a.shown if b.value(k) != v]
            if len(differ) != 1:
                continue
            (name,) = differ
            same_else = [r for r in group if all(r.value(k) == v for k, v in a.shown if k != name)]
            low, high = setting_order(name, a.value(name)), setting_order(name, b.value(name))
            if not any(low < setting_order(name, r.value(name)) < high for r in same_else):
                out.append(earlier_first(a, b))
    return out


def method_pairs(runs: Sequence[RunKey], compared: Sequence[MethodComparison]) -> list[tuple[RunKey, RunKey, str]]:
    """(A, B, the paper's table) of each comparison's methods with one dataset and the same shown settings, A the method under test."""
    by_key: dict[tuple, dict[str, list[RunKey]]] = {}
    for r in runs:
        by_key.setdefault((r.dataset, r.shown), {}).setdefault(r.method, []).append(r)
    ordered = sorted(by_key.items(), key=lambda kv: (kv[0][0], [setting_order(k, v) for k, v in kv[0][1]]))
    return [(a, b, c.table) for _, methods in ordered for c in compared for a in methods.get(c.a, []) for b in methods.get(c.b, [])]


def run_keys(con: duckdb.DuckDBPyConnection, shown_settings: Sequence[str]) -> list[RunKey]:
    shown = ["model", *shown_settings]
    has_finished = any(r[0] == "finished_at" for r in con.execute("DESCRIBE episodes").fetchall())
    rows = con.execute(
        f"""SELECT run_id, dataset, method, {', '.join(shown)}, any_value(settings), {'min(finished_at)' if has_finished else 'NULL'}
            FROM episodes GROUP BY ALL ORDER BY ALL"""
    ).fetchall()
    n = len(shown)
    return [RunKey(r[0], r[1], r[2], tuple(zip(shown, r[3 : 3 + n])), json.loads(r[3 + n] or "{}"), r[4 + n]) for r in rows]


def differences(a: RunKey, b: RunKey) -> str:
    """What tells B from A: method, shown settings, code commit; else the identity settings' keys that differ."""
    out = ["method"] if a.method != b.method else []
    out += [f"{k} {setting_text(v)} → {setting_text(b.value(k))}" for k, v in a.shown if b.value(k) != v]
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


@dataclass(frozen=True)
class Comparison:
    a: RunKey
    b: RunKey
    table: str | None  # the paper's table of a method pair; None for two runs of one method
    differs: str  # what tells b from a, e.g. "max_steps 10 → 15; code a058428 → 9161588"
    metric: str
    result: Paired


def comparisons(con: duckdb.DuckDBPyConnection, shown_settings: Sequence[str]) -> list[Comparison]:
    """Every pair's comparison per accuracy (METRICS): what the report and the viewer list, in this order."""
    runs = run_keys(con, shown_settings)
    chosen = [*method_pairs(runs, paper_comparisons()), *((a, b, None) for a, b in within_method_pairs(runs))]  # the paper's pairs first
    out = []
    by_metric = {name: scores(con, column) for name, column in METRICS}
    for a, b, table in chosen:
        for name, _ in METRICS:
            result = paired(by_metric[name].get(a.run_id, {}), by_metric[name].get(b.run_id, {}))
            if result is not None:
                out.append(Comparison(a, b, table, differences(a, b), name, result))
    return out


def method_tables(found: Sequence[Comparison], table: str, label: Callable[[str], str]) -> list[str]:
    """One of the paper's tables' pairs, a table per dataset, model and shown settings (its title names them)."""
    blocks: dict[tuple, list[Comparison]] = {}
    for c in found:
        if c.table == table:
            blocks.setdefault((c.a.dataset, c.a.shown), []).append(c)
    header = ["A", "B", "runs A → B", "differs in", "metric", *PAIRED_HEADER]
    out = []
    for (dataset, _), chosen in blocks.items():
        first = chosen[0].a
        settings = ", ".join(f"{k}={setting_text(v)}" for k, v in first.shown if k != "model")
        title = " · ".join([f"{TABLE_TITLES[table]}: {dataset}", setting_text(first.value("model")), *([settings] if len(first.shown) > 1 else [])])
        rows = [[label(c.a.method), label(c.b.method), f"{c.a.run_id} → {c.b.run_id}", c.differs, c.metric, *paired_cells(c.result)] for c in chosen]
        out += fitted_tables(5, [Topic(title, header, rows, ["l"] * 5 + ["r"] * 7 + ["l"])])
    return out


def within_table(found: Sequence[Comparison], label: Callable[[str], str]) -> list[str]:
    header = ["dataset", "method", "runs A → B", "differs in", "metric", *PAIRED_HEADER]
    rows = [[c.a.dataset, label(c.a.method), f"{c.a.run_id} → {c.b.run_id}", c.differs, c.metric, *paired_cells(c.result)] for c in found if c.table is None]
    return fitted_tables(5, [Topic(WITHIN_TITLE, header, rows, ["l"] * 5 + ["r"] * 7 + ["l"])]) if rows else []


def paired_section(con: duckdb.DuckDBPyConnection, shown_settings: Sequence[str], label: Callable[[str], str]) -> str:
    found = comparisons(con, shown_settings)
    if not found:
        return f"{TITLE}\n\nNo two runs of one dataset (one method, or two methods the paper compares) to compare on shared questions.\n"
    return "\n".join([
        TITLE,
        "",
        "Two runs of one dataset on the questions both scored (n), question by question: their accuracies in % "
        f"there, the difference {DELTA} in points with its paired bootstrap 95% interval "
        f"({RESAMPLES:,} resamplings of the shared questions, seeded), the questions only one of them got right, and the "
        f"exact McNemar p-value (binomial test of those discordant questions). \"{WITHIN_NOISE}\": p ≥ {ALPHA} or an interval "
        "that holds 0, a difference that chance alone could make on these questions. Across methods, the paper's comparisons "
        "(Tables 1 and 2) between runs of one model and the same shown settings: A the A-RAG method under test, B the baseline "
        "or ablation. Within one method, runs whose shown settings differ in one (neighbours along it), or the only two runs "
        "of a dataset and method: A the smaller setting or the earlier run (a re-judged copy after its source), B the other.",
        "",
        *(line for table in (TABLE1, TABLE2) for line in method_tables(found, table, label)),
        *within_table(found, label),
    ])
