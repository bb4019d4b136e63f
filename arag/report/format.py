"""What every report table shares: Markdown tables, number formats, the scored-questions rule, the
accuracies' two denominators and the error for runs that must not be merged."""

from __future__ import annotations

import math
from typing import Any, Sequence

# A failed episode (an outage, a timeout, a worker lost): no result, counted apart with its cause, never scored.
FAILED = "status = 'failed'"
# The questions both accuracies average over: the completed episodes but those the judge gave no verdict for.
SCORED = f"NOT ({FAILED}) AND coalesce(judge_status, '') <> 'failed'"
# Answered as the official A-RAG evaluation counts it (scripts/eval.py): a non-empty prediction. Its
# accuracies divide by these questions only; ours by every completed one (an empty answer scoring 0).
ANSWERED = "status = 'ok' AND trim(coalesce(prediction, '')) <> ''"
OF_ATTEMPTED = "(of completed)"
OF_ANSWERED = "(of answered)"
# A failure's cause as a table names it: its text before the first colon ("model call failed after
# 4 attempt(s)", "episode timed out after 600s", "worker error").
NO_CAUSE = "no cause recorded"
FAILURE_CAUSE_SQL = f"trim(split_part(coalesce(nullif(trim(failure), ''), '{NO_CAUSE}'), ':', 1))"


def sql_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def failure_cause(failure: str | None) -> str:
    """FAILURE_CAUSE_SQL in Python (the viewer's count)."""
    return ((failure or "").strip() or NO_CAUSE).split(":", 1)[0].strip()


def accuracy_sql(column: str, answered: bool = False) -> str:
    """Two SQL aggregates, the sum and count of a 0/1 score over the scored (or `answered`) questions."""
    where = f"{SCORED} AND {ANSWERED}" if answered else SCORED
    return f"sum({column}) FILTER ({where}), count({column}) FILTER ({where})"


def failures_sql() -> str:
    """Two SQL aggregates: the failed episodes and their distinct causes, most frequent first."""
    return f"count(*) FILTER ({FAILED}), list({FAILURE_CAUSE_SQL} ORDER BY {FAILURE_CAUSE_SQL}) FILTER ({FAILED})"


class UnlikeRunsError(ValueError):
    """Two runs would share a table cell (or a sweep series) though their identities differ."""


# format_value's kinds besides "pct" (a share, written as "f1" of 100 × value).
FORMATS = {"int": "{:,.0f}", "f1": "{:.1f}", "f2": "{:.2f}"}


def format_value(value: Any, kind: str = "pct") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if kind == "pct":
        value, kind = 100 * value, "f1"
    return FORMATS[kind].format(value)


def setting_text(value: Any) -> str:
    """A setting's value in a table; "—" where the run left it unset."""
    return "—" if value is None else str(value)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]], align: Sequence[str] | None = None) -> str:
    align = align or ["l"] + ["r"] * (len(header) - 1)
    sep = ["---:" if a == "r" else ":---:" if a == "c" else "---" for a in align]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(sep) + " |"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def pyplot():
    """matplotlib's pyplot on the Agg backend: reports write files only, no display."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
