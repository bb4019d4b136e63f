"""The report's A2RAG section, from the rows `pipelines.evaluate` writes (nothing is recomputed):
A2RAG beside A-RAG (Full) and Naive RAG, and per A2RAG run what its controller did (docs/evaluation.md,
"A2RAG")."""

from __future__ import annotations

import json
from collections import Counter
from typing import Iterable, Sequence

import duckdb

from arag.evaluation.rows import PASSAGE_RECALL_SCHEMA
from arag.methods.a2rag import CALL_PURPOSES, CHECKS, STAGES
from arag.report.format import accuracy_sql, failures_sql
from arag.report.format import format_value as _fmt
from arag.report.intervals import cell as accuracy_cell
from arag.report.run_tables import key_cells
from arag.report.tables import Topic, fitted_tables

BASELINES = ("naive_rag", "arag_full")
OUTCOMES = (*STAGES, "fail", "abstain", "no outcome")
STAGE_LABELS = {"local": "local", "bridge": "bridge", "ppr": "PPR", "fail": "fail", "abstain": "abstain", "no outcome": "no outcome"}
A2RAG_ROWS = "method LIKE 'a2rag%'"
# Rows whose Recall@k counts passages (older ones counted chunks: packed windows of ~10 passages).
PASSAGE_ROWS = f"coalesce(schema_version, 0) >= {PASSAGE_RECALL_SCHEMA}"
# The paper's LLM calls per question (gpt-4o-mini, its multi-hop subsets: Tables II and III), by dataset name prefix.
PAPER_CALLS_PER_QUESTION = {"hotpotqa": 2.0, "2wikimultihopqa": 2.3}


def paper_calls(dataset: str | None) -> float | None:
    return next((v for k, v in PAPER_CALLS_PER_QUESTION.items() if str(dataset or "").startswith(k)), None)


def calls_by_purpose(calls_json: Iterable[str | None]) -> tuple[int, dict[str, float]]:
    """(episodes with a call record, mean calls per question by purpose over them)."""
    totals: Counter = Counter()
    n = 0
    for text in calls_json:
        if not text:
            continue
        n += 1
        for purpose, count in json.loads(text).items():
            if purpose not in CALL_PURPOSES:
                raise ValueError(f"unknown A2RAG call purpose {purpose!r}; known: {', '.join(CALL_PURPOSES)}")
            totals[purpose] += count
    return n, {p: (totals[p] / n if n else 0.0) for p in CALL_PURPOSES}


def outcome_of(outcome: str | None, stage_reached: str | None) -> str:
    """The stage-breakdown bucket of one episode, from its trace's outcome and stage reached."""
    if outcome == "answered" and stage_reached in STAGES:
        return stage_reached
    if outcome in ("fail", "abstain"):
        return outcome
    return "no outcome"


def outcome_shares(buckets: Iterable[str]) -> dict[str, float]:
    """Share of the episodes in each bucket of OUTCOMES (zero where none); sums to 1 over ≥ 1 episode."""
    counts = Counter(buckets)
    unknown = set(counts) - set(OUTCOMES)
    if unknown:
        raise ValueError(f"unknown A2RAG outcome bucket(s): {', '.join(sorted(unknown))}; known: {', '.join(OUTCOMES)}")
    total = sum(counts.values())
    return {b: (counts[b] / total if total else 0.0) for b in OUTCOMES}


def verdict_counts(checks_json: Iterable[str | None]) -> dict[str, tuple[int, int]]:
    """(yes, no) per Triple-Check validator over every attempt of every episode."""
    attempts = [attempt for text in checks_json for attempt in (json.loads(text) if text else [])]
    verdicts = Counter((check, attempt.get(check)) for attempt in attempts for check in CHECKS)
    return {c: (verdicts[c, True], verdicts[c, False]) for c in CHECKS}


def rewrite_counts(rewrites_json: Iterable[str | None]) -> Counter:
    return Counter(rewrite.get("failure") or "unknown" for text in rewrites_json for rewrite in (json.loads(text) if text else []))


def comparison_table(con: duckdb.DuckDBPyConnection, shown_settings: Sequence[str]) -> str:
    cols = ["dataset", "model", "method", *shown_settings]
    baselines = ", ".join(f"'{m}'" for m in BASELINES)
    data = con.execute(
        f"""SELECT {', '.join(cols)}, count(*), avg(exact_match), avg(f1), {accuracy_sql('llm_acc')},
                   avg(evidence_recall_at_2) FILTER ({PASSAGE_ROWS}), avg(evidence_recall_at_5) FILTER ({PASSAGE_ROWS}), avg(model_calls), avg(prompt_tokens + completion_tokens),
                   quantile_cont(wall_s - judge_s, 0.5), quantile_cont(wall_s - judge_s, 0.95),
                   count(*) FILTER (WHERE NOT ({PASSAGE_ROWS})), {failures_sql()}
            FROM episodes WHERE {A2RAG_ROWS} OR method IN ({baselines}) GROUP BY ALL ORDER BY ALL"""
    ).fetchall()
    n = len(cols)
    order = {m: i for i, m in enumerate(BASELINES)}
    data.sort(key=lambda r: (*[str(v) for v in r[:2]], order.get(r[2], len(order)), r[2], *[str(v) for v in r[3:n]]))
    keys = [key_cells(cols, r[:n]) for r in data]
    quality = [*cols, "n", "EM", "F1", "LLM-Acc", "Recall@2", "Recall@5", "older rows"]
    quality_rows = [[*key, _fmt(r[n], "int"), _fmt(r[n + 1]), _fmt(r[n + 2]), accuracy_cell(r[n + 3], r[n + 4], r[-2], r[-1]), *(_fmt(v) for v in r[n + 5 : n + 7]), _fmt(r[n + 11], "int")]
                    for key, r in zip(keys, data)]
    cost = [*cols, "LLM calls / q", "tokens / q", "latency P50 s", "P95 s"]
    cost_rows = [[*key, _fmt(r[n + 7], "f1"), _fmt(r[n + 8], "int"), _fmt(r[n + 9], "f2"), _fmt(r[n + 10], "f2")] for key, r in zip(keys, data)]
    return "\n".join(fitted_tables(n, [Topic("Accuracy and evidence recall", quality, quality_rows), Topic("Cost and latency", cost, cost_rows)]))


def controller_table(con: duckdb.DuckDBPyConnection, shown_settings: Sequence[str]) -> str:
    cols = ["dataset", "model", "method", *shown_settings]
    data = con.execute(
        f"""SELECT {', '.join(cols)}, list(struct_pack(
                       outcome := json_extract_string(trajectory, '$.trace.outcome'), stage := json_extract_string(trajectory, '$.trace.stage_reached'),
                       checks := CAST(json_extract(trajectory, '$.trace.checks') AS VARCHAR), rewrites := CAST(json_extract(trajectory, '$.trace.rewrites') AS VARCHAR),
                       calls := CAST(json_extract(trajectory, '$.trace.calls') AS VARCHAR)))
            FROM episodes WHERE {A2RAG_ROWS} GROUP BY ALL ORDER BY ALL"""
    ).fetchall()
    n = len(cols)
    stages = [*cols, "n", *(f"{STAGE_LABELS[b]} %" for b in OUTCOMES)]
    calls = [*cols, "LLM calls / q", "paper", *(f"{p} / q" for p in CALL_PURPOSES)]
    checks = [*cols, *(f"{c} yes/no" for c in CHECKS), "rewrites / q", "rewrites by failure"]
    stage_rows, call_rows, check_rows = [], [], []
    for r in data:
        traces = r[n]  # one per episode
        shares = outcome_shares(outcome_of(t["outcome"], t["stage"]) for t in traces)
        verdicts = verdict_counts(t["checks"] for t in traces)
        by_type = rewrite_counts(t["rewrites"] for t in traces)
        counted, per_purpose = calls_by_purpose(t["calls"] for t in traces)
        total = len(traces)
        key = key_cells(cols, r[:n])
        stage_rows.append([*key, _fmt(total, "int"), *(_fmt(shares[b]) for b in OUTCOMES)])
        call_rows.append([*key, _fmt(sum(per_purpose.values()) if counted else None, "f2"), _fmt(paper_calls(r[0]), "f1"),
                          *(_fmt(per_purpose[p] if counted else None, "f2") for p in CALL_PURPOSES)])
        check_rows.append([*key, *(f"{verdicts[c][0]}/{verdicts[c][1]}" for c in CHECKS), _fmt(sum(by_type.values()) / total, "f2"),
                           ", ".join(f"{k} {v}" for k, v in sorted(by_type.items())) or "none"])
    return "\n".join(fitted_tables(n, [Topic("Stage breakdown", stages, stage_rows), Topic("LLM calls per question", calls, call_rows),
                                        Topic("Triple-Check verdicts and rewrites", checks, check_rows, ["l"] * n + ["r"] * (len(checks) - n - 1) + ["l"])]))


def a2rag_section(con: duckdb.DuckDBPyConnection, shown_settings: Sequence[str]) -> str:
    title = "## A2RAG beside A-RAG (Full) and Naive RAG"
    (runs,) = con.execute(f"SELECT count(*) FROM episodes WHERE {A2RAG_ROWS}").fetchone()
    if not runs:
        return f"{title}\n\nNo A2RAG runs (methods `a2rag*`) in these results.\n"
    return "\n".join([
        title,
        "",
        "EM, F1 and recall in %; LLM-Acc in % with its 95% Wilson interval [low, high] and n, the questions it averages over; Recall@k: supporting titles among the first k passages retrieved, in retrieval order, "
        "for every method alike (a packed window counts as the passages it covers, so it is the paper's passage-level "
        "recall on any chunking); older rows: rows written before Recall@k counted passages, left out of Recall@k; "
        "tokens: prompt + completion tokens of all model calls; latency: seconds per episode without the judge.",
        "",
        comparison_table(con, shown_settings),
        "",
        "**A2RAG controller** — stage breakdown (share of episodes answered after the local / bridge / PPR stage, failed "
        "after the last rewrite, abstained at the gate, or with no outcome: the episode failed); LLM calls per question "
        "(episodes whose controller recorded its calls) beside the paper's (gpt-4o-mini on its multi-hop subsets: 2.0 "
        "HotpotQA, 2.3 2WikiMultiHopQA) and by purpose: a question answered at its first attempt costs 2 (answer, "
        "Triple-Check), each rewrite round 3 more (rewrite, answer, Triple-Check), sufficiency calls only with "
        "`method.sufficiency=llm`; the gate and seed extraction make none. Then the Triple-Check verdicts over every "
        "attempt and the rewrites by failure type.",
        "",
        controller_table(con, shown_settings),
        "",
    ])
