"""The report's tables with a row per run cell: details, cost, tool use, and AgenticRAG beside A-RAG
(Full) and Naive RAG."""

from __future__ import annotations

from typing import Any, Sequence

import duckdb

from arag.config.files import method_declarations
from arag.tools.failures import FAILURE_KINDS
from arag.report.episodes import AGENTIC_COMPARISON, SETTING_HEADERS, method_label, method_order, setting_keys, token_unit, tool_columns, varying_settings
from arag.report.format import ANSWERED, FAILED, OF_ANSWERED, OF_ATTEMPTED, accuracy_sql, failures_sql, setting_text
from arag.report.format import format_value as _fmt
from arag.report.intervals import LEGEND, failures_text
from arag.report.intervals import cell as accuracy_cell
from arag.report.tables import Topic, fitted_tables

AGENTIC_METHOD = "agenticrag"


def key_header(cols: Sequence[str]) -> list[str]:
    return [SETTING_HEADERS.get(c, c) for c in cols]


def key_cells(cols: Sequence[str], values: Sequence[Any]) -> list[str]:
    """A per-run table's key cells: the method by its label (conf/method/<name>.yaml), "—" for unset."""
    return [method_label(v) if c == "method" else setting_text(v) for c, v in zip(cols, values)]


def per_run(con: duckdb.DuckDBPyConnection, aggregates: str) -> tuple[list[str], list[tuple]]:
    """The key columns and `aggregates` per run cell, by dataset, model, method order and settings."""
    cols = ["dataset", "model", "method", *varying_settings(con)]
    data = con.execute(f"SELECT {', '.join(cols)}, {aggregates} FROM episodes GROUP BY ALL ORDER BY ALL").fetchall()
    n = len(cols)
    order = {m: i for i, m in enumerate(method_order(sorted({r[2] for r in data})))}
    data.sort(key=lambda r: (str(r[0]), str(r[1]), order[r[2]], *setting_keys(cols[3:], r[3:n])))
    return cols, data


def details_table(con: duckdb.DuckDBPyConnection) -> str:
    """Questions, failures and accuracy of the completed; accuracy of the answered, EM, F1 and evidence recall."""
    cols, data = per_run(con, f"""count(DISTINCT run_id), count(*), count(*) FILTER ({ANSWERED}),
                   count(*) FILTER (status = 'failed'), count(*) FILTER (forced),
                   {accuracy_sql('contain_acc')}, {accuracy_sql('llm_acc')}, {accuracy_sql('contain_acc', answered=True)}, {accuracy_sql('llm_acc', answered=True)},
                   count(*) FILTER (judge_status = 'failed'), avg(exact_match) FILTER (NOT ({FAILED})), avg(f1) FILTER (NOT ({FAILED})),
                   avg(evidence_recall_read), avg(evidence_recall_seen), {failures_sql()}""")
    n = len(cols)
    keys = key_header(cols)
    counted = [*keys, "runs", "questions", "answered", "failed", "forced", "judge failed", f"Cont-Acc {OF_ATTEMPTED}", f"LLM-Acc {OF_ATTEMPTED}"]
    scored = [*keys, f"Cont-Acc {OF_ANSWERED}", f"LLM-Acc {OF_ANSWERED}", "EM", "F1", "evidence read", "evidence seen"]
    counted_rows, scored_rows = [], []
    for r in data:
        accuracies = [accuracy_cell(r[i], r[i + 1]) for i in range(n + 5, n + 13, 2)]
        key = key_cells(cols, r[:n])
        failed = failures_text(r[-2], r[-1], noun="") or "0"
        counted_rows.append([*key, *(_fmt(v, "int") for v in r[n : n + 3]), failed, _fmt(r[n + 4], "int"), _fmt(r[n + 13], "int"), *accuracies[:2]])
        scored_rows.append([*key, *accuracies[2:], *(_fmt(v) for v in r[n + 14 : n + 18])])
    return "\n".join([
        "## Details per run",
        "",
        f"{LEGEND} {OF_ATTEMPTED}: over the completed episodes (an empty answer scores 0), our default; {OF_ANSWERED}: over the answered "
        "ones only (a non-empty prediction), the denominator of the A-RAG paper's evaluation code. Both leave out questions whose judge gave no "
        "verdict ('judge failed'), and failed episodes (an outage, a timeout: 'failed', with their most frequent cause), which have no result "
        "to score. EM, F1: means in % over the completed episodes. "
        "Evidence recall: share of the supporting documents whose chunks the agent read in full / saw in any tool result.",
        "",
        *fitted_tables(n, [Topic("Questions and accuracy over the attempted ones", counted, counted_rows),
                           Topic("Accuracy over the answered ones, EM, F1 and evidence recall", scored, scored_rows)]),
    ])


def cost_table(con: duckdb.DuckDBPyConnection) -> str:
    """Means per episode: the tokens of its context and its model calls; its steps and time."""
    cols, data = per_run(con, """avg(retrieved_tokens), avg(prompt_tokens), avg(completion_tokens), avg(reasoning_tokens),
                   avg(steps), avg(tool_calls), avg(wall_s), avg(llm_s), avg(tool_s)""")
    n = len(cols)
    keys = key_header(cols)
    tokens = [*keys, "retrieved tokens", "prompt tokens", "completion tokens", "reasoning tokens"]
    time = [*keys, "steps", "tool calls", "wall s", "LLM s", "tools s"]
    token_rows = [[*key_cells(cols, r[:n]), *(_fmt(v, "int") for v in r[n : n + 4])] for r in data]
    time_rows = [[*key_cells(cols, r[:n]), _fmt(r[n + 4], "f1"), _fmt(r[n + 5], "f1"), *(_fmt(v, "f2") for v in r[n + 6 :])] for r in data]
    return "\n".join(["## Retrieved tokens and cost per episode", "", f"Means per episode (retrieved tokens: {token_unit(con)}).", "",
                      *fitted_tables(n, [Topic("Tokens", tokens, token_rows), Topic("Steps and time", time, time_rows)])])


def tool_table(con: duckdb.DuckDBPyConnection) -> str:
    """Mean calls per tool; tool errors, repeated calls, invalid replies, forced answers; tool errors by kind."""
    tools = tool_columns(con)
    failures = failure_columns()
    cols, data = per_run(con, f"""{', '.join(f'avg(calls_{t})' for t in tools)}, {_counted('avg(tool_errors)')}, avg(invalid_replies),
                   avg(CAST(forced AS INTEGER)), sum(tool_calls), {', '.join(sql for _, sql in failures)}""")
    n, t = len(cols), len(tools)
    keys = key_header(cols)
    calls = [*keys, *tools]
    call_rows = [[*key_cells(cols, r[:n]), *(_fmt(v, "f2") for v in r[n : n + t])] for r in data]
    f = n + t + 4  # the first failure column; the calls in all before it

    def known(v: Any, kind: str) -> str:
        return "n/a" if v is None else _fmt(v, kind)

    errors = [*keys, "tool errors", "invalid replies", "forced answers %", failures[0][0], failures[-1][0]]
    error_rows = [[*key_cells(cols, r[:n]), known(r[n + t], "f2"), _fmt(r[n + t + 1], "f2"), _fmt(r[n + t + 2]), calls_share(r[f], r[f - 1]), calls_share(r[-1], r[f - 1])]
                  for r in data]
    kinds = [*keys, *(label for label, _ in failures[1:-1])]
    kind_rows = [[*key_cells(cols, r[:n]), *(known(v, "int") for v in r[f + 1 : -1])] for r in data]
    return "\n".join(["## Tool use", "",
                      "Calls per tool, tool errors and invalid replies: means per episode (naive_rag's one retrieval counts as a "
                      "naive_embedding_search call). A tool error is a call whose result the model could not use (refused arguments, an "
                      "unknown tool, only unknown ids, a search that found nothing, only chunks already read, a failed tool); a repeated call "
                      "is identical to an earlier call of the episode (docs/evaluation.md). Unusable and repeated calls, and the tool errors "
                      "by kind: calls in all, of all the run's calls. Every count is taken from the episodes' trajectories, the same count the "
                      "viewer shows, for runs stored before these were recorded too; \"n/a\": rows stored without a trajectory.", "",
                      *fitted_tables(n, [Topic("Calls per tool", calls, call_rows),
                                         Topic("Tool errors, repeated calls and forced answers", errors, error_rows),
                                         Topic("Tool errors by kind (calls)", kinds, kind_rows)])])


def _counted(aggregate: str) -> str:
    """`aggregate` where every row of the cell has its facts counted (a trajectory), else NULL."""
    return f"CASE WHEN count(tool_errors) = count(*) THEN {aggregate} END"


def calls_share(count: Any, calls: Any) -> str:
    """ "370 of 409 (90.5%)": calls of a kind among all calls; "n/a" where not counted."""
    if count is None:
        return "n/a"
    share = f" ({100 * count / calls:.1f}%)" if calls else ""
    return f"{int(count)} of {int(calls or 0)}{share}"


def failure_columns() -> list[tuple[str, str]]:
    """(header, SQL aggregate) per tool-failure column; NULL ("n/a") for a cell with a row without a trajectory."""
    kinds = [(kind.replace("_", " "), _counted(f"sum(tool_errors_{kind})")) for kind in FAILURE_KINDS]
    return [("unusable calls", _counted("sum(tool_errors)")), *kinds, ("repeated calls", _counted("sum(repeated_calls)"))]


def agentic_table(con: duckdb.DuckDBPyConnection) -> str:
    """AgenticRAG and its ablations beside A-RAG (Full) and Naive RAG: accuracy and citations, cost, tool use."""
    listed = ", ".join(f"'{m}'" for m in AGENTIC_COMPARISON)
    cols = ["dataset", "model", "method", *varying_settings(con)]
    tools = method_declarations()[AGENTIC_METHOD]["tools"]
    data = con.execute(
        f"""SELECT {', '.join(cols)}, count(*), {accuracy_sql('llm_acc')}, {accuracy_sql('contain_acc')},
                   avg(citation_recall_at_1), avg(citation_recall_at_3), avg(prompt_tokens + completion_tokens), avg(retrieved_tokens),
                   {''.join(f'avg(calls_{t}), ' for t in tools)}avg(forced_summaries), avg(CAST(forced AS INTEGER)), {failures_sql()}
            FROM episodes WHERE method IN ({listed}) GROUP BY ALL ORDER BY ALL"""
    ).fetchall()
    if not any(r[2].startswith("agenticrag") for r in data):
        return "## AgenticRAG\n\nNo AgenticRAG runs (methods `agenticrag*`) in these results.\n"
    n, t = len(cols), len(tools)
    accuracy = [*key_header(cols), "n", "LLM-Acc", "Cont-Acc", "cited R@1", "cited R@3"]
    cost = [*key_header(cols), "tokens / question", "retrieved tokens", "forced summarizes", "forced answers %"]
    calls = [*key_header(cols), *tools]
    order = {m: i for i, m in enumerate(AGENTIC_COMPARISON)}
    accuracy_rows, cost_rows, call_rows = [], [], []
    for r in sorted(data, key=lambda r: (r[0], r[1], *setting_keys(cols[3:], r[3:n]), order[r[2]])):
        key = key_cells(cols, r[:n])
        accuracy_rows.append([*key, _fmt(r[n], "int"), accuracy_cell(r[n + 1], r[n + 2], r[-2], r[-1]), accuracy_cell(r[n + 3], r[n + 4], r[-2], r[-1]),
                              *(_fmt(v) for v in r[n + 5 : n + 7])])
        cost_rows.append([*key, *(_fmt(v, "int") for v in r[n + 7 : n + 9]), _fmt(r[n + 9 + t], "f2"), _fmt(r[n + 10 + t])])
        call_rows.append([*key, *(_fmt(v, "f2") for v in r[n + 9 : n + 9 + t])])
    return "\n".join([
        "## AgenticRAG beside A-RAG (Full) and Naive RAG",
        "",
        f"{LEGEND} Cited R@k: share of the supporting documents among the first k documents the answer cites, ranked by "
        "their relevance scores (AgenticRAG only); tokens / question: prompt + completion tokens of all model calls; tool "
        "columns: mean calls per question.",
        "",
        *fitted_tables(n, [Topic("Accuracy and citations", accuracy, accuracy_rows), Topic("Cost and forced steps", cost, cost_rows),
                           Topic("Calls per tool", calls, call_rows)]),
    ])
