"""The report's episodes with their facts counted from the trajectories (arag.evaluation.episode_facts),
not read from the stored columns, so that old runs show the numbers the viewer shows. Where a row
has no trajectory, its call counts stand and tool errors and repeated calls are NULL ("n/a")."""

from __future__ import annotations

from typing import Any, Sequence

import duckdb
import pyarrow as pa

from arag.evaluation.episode_facts import EVIDENCE_FACTS, FACT_INPUT_COLUMNS, EpisodeFacts, row_facts
from arag.evaluation.rows import CALLS_OTHER, ERROR_KIND_PREFIX
from arag.tools.failures import FAILURE_KINDS
from arag.report.format import sql_literal

# The stored rows as read; KEY (where each is) joins the facts to them.
STORED_TABLE = "stored_episodes"
FACTS_TABLE = "episode_facts"
KEY = ("filename", "file_row_number")
# Rows read per batch: trajectories are the large column.
BATCH_ROWS = 500


def fact_record(facts: EpisodeFacts, call_columns: Sequence[str]) -> dict[str, Any]:
    named = {c.removeprefix("calls_") for c in call_columns}
    record: dict[str, Any] = {c: getattr(facts, c) for c in EVIDENCE_FACTS}
    if facts.recorded:  # else the row's own call counts stand
        record["tool_calls"] = facts.tool_calls
        record.update({c: facts.calls.get(c.removeprefix("calls_"), 0) for c in call_columns})
        record[CALLS_OTHER] = sum(n for name, n in facts.calls.items() if name not in named)
    if not facts.counted:
        return record  # tool errors and repeats: unknown
    kinds = facts.tool_error_kinds or {}
    record["tool_errors"], record["repeated_calls"] = facts.tool_errors, facts.repeated_calls
    record.update({f"{ERROR_KIND_PREFIX}{k}": kinds.get(k, 0) for k in FAILURE_KINDS})
    return record


def create_views(con: duckdb.DuckDBPyConnection, files: Sequence[str]) -> None:
    """The tables `stored_episodes` and `episode_facts`, and the view `all_episodes` (stored rows, counted facts)."""
    listing = ", ".join(sql_literal(f) for f in files)
    # A table, not a view over the files: every query of a report reads it, and each would scan every file again.
    con.execute(f"CREATE TABLE {STORED_TABLE} AS SELECT * FROM read_parquet([{listing}], union_by_name = true, filename = true, file_row_number = true)")
    present = [r[0] for r in con.execute(f"DESCRIBE {STORED_TABLE}").fetchall()]
    call_columns = [c for c in present if c.startswith("calls_") and c != CALLS_OTHER]
    ints = ["tool_calls", *call_columns, CALLS_OTHER, "tool_errors", *(f"{ERROR_KIND_PREFIX}{k}" for k in FAILURE_KINDS), "repeated_calls",
            "evidence_supporting", "evidence_seen", "evidence_read"]
    columns = [*((c, pa.int32()) for c in ints), ("evidence_recall_seen", pa.float64()), ("evidence_recall_read", pa.float64())]
    inputs = [c for c in ("trajectory", *FACT_INPUT_COLUMNS) if c in present]
    batches = con.sql(f"SELECT {', '.join([*KEY, *inputs])} FROM {STORED_TABLE}").to_arrow_reader(BATCH_ROWS)
    records = [{**{k: row[k] for k in KEY}, **fact_record(row_facts(row), call_columns)} for batch in batches for row in batch.to_pylist()]
    schema = pa.schema([("filename", pa.string()), ("file_row_number", pa.int64()), *columns])
    con.from_arrow(pa.Table.from_pylist(records, schema=schema)).create(FACTS_TABLE)
    counted = [c for c, _ in columns]
    kept = {"tool_calls", *call_columns, CALLS_OTHER}  # the row's stored value stands where its trajectory holds no tool-call record
    replaced = [f"coalesce(f.{c}, s.{c}) AS {c}" if c in kept else f"f.{c} AS {c}" for c in counted if c in present]
    added = [f"f.{c} AS {c}" for c in counted if c not in present]
    con.execute(
        f"""CREATE VIEW all_episodes AS SELECT s.* EXCLUDE ({', '.join(KEY)}){f' REPLACE ({", ".join(replaced)})' if replaced else ''}{''.join(', ' + a for a in added)}
            FROM {STORED_TABLE} s LEFT JOIN {FACTS_TABLE} f USING ({', '.join(KEY)})"""
    )
