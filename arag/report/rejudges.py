"""Re-judged runs in a report (pipelines.rejudge): which run each scores again and with which judge.
A re-judged run holds its source's episodes with only the judge's columns changed, so what the agents
did (tool use) counts each episode once (docs/evaluation.md, "Re-judging")."""

from __future__ import annotations

from typing import Callable

import duckdb

from arag.report.format import sql_literal
from arag.report.tables import Topic, fitted_tables

REJUDGED_FROM_SQL = "json_extract_string(settings, '$.rejudged_from')"


def counted_runs(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Every run that is no re-judge, and a re-judged run only where its source is absent (the first by run id)."""
    return [run for (run,) in con.execute(
        f"""WITH origins AS (SELECT DISTINCT run_id, coalesce({REJUDGED_FROM_SQL}, run_id) AS origin FROM episodes)
            SELECT DISTINCT CASE WHEN origin IN (SELECT run_id FROM origins) THEN origin ELSE min(run_id) OVER (PARTITION BY origin) END
                   AS run FROM origins ORDER BY run"""
    ).fetchall()]


def counted_once_sql(con: duckdb.DuckDBPyConnection) -> str:
    """A WHERE condition keeping each episode once (`counted_runs`)."""
    runs = counted_runs(con)
    return "run_id IN (" + ", ".join(sql_literal(r) for r in runs) + ")" if runs else "FALSE"


def rejudge_section(con: duckdb.DuckDBPyConnection, label: Callable[[str], str]) -> str:
    """The re-judged runs, each with the run it re-judges and both judges; empty when there is none."""
    found = con.execute(
        f"""SELECT run_id, any_value({REJUDGED_FROM_SQL}), any_value(judge), any_value(dataset), any_value(method) FROM episodes
            WHERE {REJUDGED_FROM_SQL} IS NOT NULL GROUP BY run_id ORDER BY run_id"""
    ).fetchall()
    if not found:
        return ""
    judges = dict(con.execute("SELECT run_id, any_value(judge) FROM episodes GROUP BY run_id").fetchall())
    rows = [[f"`{run}`", dataset, label(method), f"`{source}`", judge, judges.get(source, "not in these results")]
            for run, source, judge, dataset, method in found]
    return "\n".join([
        "## Re-judged runs",
        "",
        "A re-judged run (`pipelines.rejudge`) scores another run's episodes again with another judge: the same answers, "
        "trajectories, tool use and Cont-Acc, only LLM-Acc may differ. The tables show it as a run of its own (its judge tells "
        "them apart); the tool-use plot counts its episodes once, under the run it re-judges.",
        "",
        *fitted_tables(1, [Topic("", ["run", "dataset", "method", "re-judged from", "judge", "judge of the run it re-judges"], rows, keep=("re-judged from",))]),
    ])
