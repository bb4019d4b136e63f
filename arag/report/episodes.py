"""The `episodes` table every report section queries (a row per question and run, facts counted from
the trajectories) and what the sections share about it: the settings that vary, the methods' order and
labels, the tools counted, the token unit, and the refusal of unlike runs in one table cell."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import duckdb

from arag.config.files import method_declarations
from arag.evaluation.results import row_files
from arag.evaluation.rows import CALLS_OTHER
from arag.tools.registry import TOOLS
from arag.report.facts import create_views
from arag.report.format import UnlikeRunsError, setting_text
from arag.report.protocol import judge_label_sql
from arag.report.sweeps import setting_order

MAIN_METHODS = ("direct", "naive_rag", "arag_naive", "arag_full")
# The paper's Table 2: A-RAG (Full) and its variants without one tool, in the paper's row order.
ABLATION_ROWS = ("arag_full", "arag_no_keyword", "arag_no_semantic", "arag_no_chunk_read")
# The AgenticRAG comparison table: its ablations beside A-RAG (Full) and Naive RAG.
AGENTIC_COMPARISON = ("naive_rag", "arag_full", "agenticrag", "agenticrag_no_summarize", "agenticrag_no_semantic_find", "agenticrag_single_query")
# Settings that may vary between runs (a column only where they do), and the tables' headers.
SETTING_COLUMNS = ("max_steps", "reasoning_effort", "token_budget", "temperature", "guard_rails", "judge")
SETTING_HEADERS = {c: c.replace("_", " ") for c in ("model", *SETTING_COLUMNS)}

# Guard rails change what an agent may do, so runs that differ only in them must not share a table
# block; they live in the `settings` JSON, and the view spells the ones that are on as one value.
GUARD_RAILS_SQL = """coalesce(nullif(concat_ws(' ',
    CASE WHEN TRY_CAST(json_extract_string(settings, '$.agent.guard_rails.tool_steps') AS INTEGER) > 0
         THEN 'tool_steps=' || json_extract_string(settings, '$.agent.guard_rails.tool_steps') END,
    CASE WHEN json_extract_string(settings, '$.agent.guard_rails.require_read_before_answer') = 'true'
         THEN 'require_read_before_answer' END,
    CASE WHEN json_extract_string(settings, '$.agent.guard_rails.shown_chunk_ids_only') = 'true'
         THEN 'shown_chunk_ids_only' END), ''), 'off')"""

# The judge, named by the model that judged and its preset (arag.report.protocol): a run
# and its re-judged copy (pipelines.rejudge) then sit in separate table blocks.
JUDGE_SQL = judge_label_sql()
# The table that holds the settings that vary (in SETTING_COLUMNS order), computed once per connection.
VARYING_TABLE = "varying_settings"


def connect(results_path: str | Path, where: str | None = None) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with the table `episodes` over every results file."""
    root = Path(results_path)
    if not root.is_dir():
        raise FileNotFoundError(f"no results folder at {root}")
    files = [str(p) for p in row_files(root)]
    if not files:
        raise FileNotFoundError(f"no results (*.parquet) under {root}")
    con = duckdb.connect()
    create_views(con, files)
    # A table, not a view: every section queries it, and a view would join the facts and parse each
    # row's settings JSON again for every query.
    con.execute(f"CREATE TABLE episodes AS SELECT *, {GUARD_RAILS_SQL} AS guard_rails, {JUDGE_SQL} AS judge FROM all_episodes {'WHERE ' + where if where else ''}")
    _store_varying(con)
    return con


def _store_varying(con: duckdb.DuckDBPyConnection) -> None:
    """The settings columns whose value varies; the judge only where it varies for one model (it names its model)."""
    def distinct(col: str) -> str:
        return f"count(DISTINCT coalesce(CAST({col} AS VARCHAR), '—'))"

    others = [c for c in SETTING_COLUMNS if c != "judge"]
    per_column = dict(zip(others, con.execute(f"SELECT {', '.join(distinct(c) for c in others)} FROM episodes").fetchone()))
    per_column["judge"] = con.execute(f"SELECT coalesce(max(n), 0) FROM (SELECT {distinct('judge')} AS n FROM episodes GROUP BY model)").fetchone()[0]
    varying = [c for c in SETTING_COLUMNS if (per_column[c] or 0) > 1]
    con.execute(f"CREATE OR REPLACE TABLE {VARYING_TABLE} AS SELECT ?::VARCHAR[] AS names", [varying])


def varying_settings(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The settings columns whose value varies (counted when the connection was made)."""
    return con.execute(f"SELECT names FROM {VARYING_TABLE}").fetchone()[0]


def check_one_run_per_cell(con: duckdb.DuckDBPyConnection) -> None:
    keys = ["dataset", "model", "method", *varying_settings(con)]
    clash = con.execute(
        f"""SELECT {', '.join(keys)}, list(DISTINCT run_id ORDER BY run_id) FROM episodes
            GROUP BY ALL HAVING count(DISTINCT run_id) > 1 ORDER BY ALL"""
    ).fetchall()
    if clash:
        lines = [f"  {', '.join(f'{k}={setting_text(v)}' for k, v in zip(keys, r[:-1]))}: runs {', '.join(r[-1])}" for r in clash[:10]]
        raise UnlikeRunsError(
            "these results hold runs that differ in their settings (judge, protocol, index, prompts or code version) "
            "but would share a table cell; the report does not average unlike runs. Choose one per cell with "
            "report.where=\"run_id IN ('...')\" or separate results folders:\n" + "\n".join(lines)
        )


def setting_keys(names: Sequence[str], values: Sequence[Any]) -> list[tuple]:
    """Sort keys for a row's values of the settings `names` (numbers by value, effort by level)."""
    return [setting_order(c, v) for c, v in zip(names, values)]


def method_order(methods: Sequence[str]) -> list[str]:
    """The paper tables' methods in their order, then every other configured method, then the rest, by name."""
    known = list(dict.fromkeys([*MAIN_METHODS, *ABLATION_ROWS, *AGENTIC_COMPARISON, *method_declarations()]))
    return sorted(methods, key=lambda m: (known.index(m) if m in known else len(known), m))


def method_label(method: str) -> str:
    """The method's name in the tables: its config's `label` (conf/method/<name>.yaml)."""
    declared = method_declarations().get(method)
    return declared["label"] if declared else method


def tool_columns(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The tools counted (a calls_<tool> column each): the registered ones, then any other the files hold, then "other"."""
    present = [r[0] for r in con.execute("DESCRIBE episodes").fetchall() if r[0].startswith("calls_") and r[0] != CALLS_OTHER]
    registered = [t for t in TOOLS if f"calls_{t}" in present]
    return [*registered, *(c.removeprefix("calls_") for c in present if c.removeprefix("calls_") not in registered), "other"]


def token_unit(con: duckdb.DuckDBPyConnection) -> str:
    """The tokenizer the runs' retrieved tokens count with (cl100k_base for runs from before it was recorded)."""
    names = [n for (n,) in con.execute(
        """SELECT DISTINCT coalesce(json_extract_string(settings, '$.retrieved_tokens_tokenizer'), 'cl100k_base') FROM episodes
           WHERE json_extract_string(settings, '$.method.tools') <> '[]' OR json_extract_string(settings, '$.method.kind') = 'naive_rag' ORDER BY 1"""
    ).fetchall()] or ["o200k_base"]
    mixed = " (runs counted with different tokenizers: compare within one)" if len(names) > 1 else ""
    return f"{' / '.join(names)} tokens of the retrieved text put into the context{mixed}"
