"""The first page's listing of episodes: the filters (every value checked), the sorts, and the
listed episodes as export records (CSV or JSON)."""

from __future__ import annotations

from typing import Any, Iterable

from arag.evaluation.rows import ERROR_KIND_PREFIX, OK
from arag.tools.failures import FAILURE_KINDS
from arag.viewer.data import OUTCOMES, Run, outcome
from arag.viewer.errors import Refused

# Filters of the episode list: (name, {value: label}); every value is checked.
CHOICES: dict[str, dict[str, str]] = {
    "outcome": {o: o for o in OUTCOMES},
    "forced": {"yes": "forced", "no": "not forced"},
    "evidence": {"seen": "some gold seen", "read": "some gold read in full", "seen_not_read": "gold seen, none read", "none": "no gold seen"},
    "tool_errors": {"yes": "with tool errors", "no": "without"},
    "repeated": {"yes": "with repeated calls", "no": "without"},
    "gold_wrong": {"yes": "gold seen but wrong"},
}
# Sortable columns: name → the row value it sorts by.
SORTS = {
    "run": lambda run, r: run.label,
    "question": lambda run, r: str(r.get("question") or ""),
    "outcome": lambda run, r: OUTCOMES.index(outcome(r)),
    "steps": lambda run, r: r.get("steps"),
    "tokens": lambda run, r: r.get("prompt_tokens"),
    "retrieved": lambda run, r: r.get("retrieved_tokens"),
    "seen": lambda run, r: r.get("evidence_recall_seen"),
    "read": lambda run, r: r.get("evidence_recall_read"),
    "errors": lambda run, r: r.get("unusable_results"),
    "repeated": lambda run, r: r.get("repeated"),
    "seconds": lambda run, r: r.get("wall_s"),
}


def gold_seen_but_wrong(row: dict[str, Any]) -> bool:
    """The judge said wrong although the episode saw a chunk holding gold evidence."""
    return outcome(row) == "wrong" and (row.get("evidence_recall_seen") or 0) > 0


def _evidence(row: dict[str, Any], wanted: str) -> bool:
    seen, read = row.get("evidence_recall_seen"), row.get("evidence_recall_read")
    if seen is None or row.get("status") != OK:  # no supporting titles, or a failed episode's unrecorded steps: nothing to count
        return False
    return {"seen": seen > 0, "read": (read or 0) > 0, "seen_not_read": seen > 0 and not read, "none": seen == 0}[wanted]


# What each filter of CHOICES keeps: (row, the value chosen) → bool.
KEEPS = {
    "outcome": lambda row, value: outcome(row) == value,
    "forced": lambda row, value: bool(row.get("forced")) == (value == "yes"),
    "evidence": lambda row, value: _evidence(row, value),
    "tool_errors": lambda row, value: bool(row.get("unusable_results")) == (value == "yes"),
    "repeated": lambda row, value: bool(row.get("repeated")) == (value == "yes"),
    "gold_wrong": lambda row, value: gold_seen_but_wrong(row),
}


def passes(run: Run, row: dict[str, Any], f: dict[str, str], needle: str) -> bool:
    if not all(keeps(row, f[name]) for name, keeps in KEEPS.items() if f.get(name)):
        return False
    shown = (str(row.get("question") or ""), str(row["question_id"]), str(row.get("prediction") or ""))
    return not needle or any(needle in s.lower() for s in shown) or row["question_id"] in run.trajectories_holding(needle)


def check_listing(f: dict[str, str]) -> None:
    """A filter or sort value that is not one of its choices is refused by name (a 400 page)."""
    for name, choices in {**CHOICES, "sort": SORTS}.items():
        if f.get(name) and f[name] not in choices:
            raise Refused(f"{name}={f[name]!r} is not one of {', '.join(choices)}")
    if f.get("order") and f["order"] not in ("asc", "desc"):
        raise Refused(f"order={f['order']!r} is not asc or desc")


def filter_rows(runs: list[Run], f: dict[str, str]) -> list[tuple[Run, dict[str, Any]]]:
    """The episodes passing every given filter, in run then question order or by `sort` (missing values last)."""
    check_listing(f)
    needle = (f.get("q") or "").strip().lower()
    out = []
    for run in runs:
        if (f.get("run") and run.run_id != f["run"]) or (f.get("dataset") and run.dataset != f["dataset"]) or (f.get("method") and run.method != f["method"]):
            continue
        out += [(run, row) for row in sorted(run.rows, key=lambda r: str(r["question_id"])) if passes(run, row, f, needle)]
    if f.get("sort"):
        value = SORTS[f["sort"]]
        present = [p for p in out if value(*p) is not None]
        present.sort(key=lambda p: value(*p), reverse=f.get("order") == "desc")
        out = present + [p for p in out if value(*p) is None]
    return out


# An exported episode's tool errors of each kind (arag.tools.failures), as the rows name them.
KIND_COLUMNS = tuple(f"{ERROR_KIND_PREFIX}{kind}" for kind in FAILURE_KINDS)
# The columns of an exported episode list, in order.
EXPORT_COLUMNS = (
    "run_id", "dataset", "method", "model", "question_id", "question", "gold_answers", "prediction", "outcome", "failure",
    "forced", "forced_reason", "llm_acc", "contain_acc", "steps", "tool_calls", "unusable_results", *KIND_COLUMNS, "repeated", "prompt_tokens",
    "completion_tokens", "retrieved_tokens", "evidence_supporting", "evidence_seen", "evidence_read", "evidence_recall_seen", "evidence_recall_read",
    "gold_seen_but_wrong", "wall_s",
)  # fmt: skip


def _kind_count(kind: str):
    """An episode's tool errors of one kind (None where its trajectory could not tell)."""
    return lambda r: None if r.get("tool_error_kinds") is None else r["tool_error_kinds"].get(kind, 0)


def export_records(shown: Iterable[tuple[Run, dict[str, Any]]]) -> list[dict[str, Any]]:
    derived = {"outcome": lambda r: outcome(r), "gold_seen_but_wrong": gold_seen_but_wrong,
               **{c: _kind_count(c[len(ERROR_KIND_PREFIX):]) for c in KIND_COLUMNS}}
    return [{c: (derived[c](r) if c in derived else r.get(c)) for c in EXPORT_COLUMNS} for _, r in shown]
