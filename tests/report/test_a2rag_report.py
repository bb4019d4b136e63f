"""The report's A2RAG section over real A2RAG episodes (scripted model, tiny graph) stored as result
rows beside A-RAG (Full) and Naive RAG rows: the stage breakdown, verdicts and rewrites come from the
episodes' traces as the controller writes them."""

from __future__ import annotations

import json

import pytest

from arag.agent import Agent
from arag.evaluation.rows import PASSAGE_RECALL_SCHEMA, EpisodeRow
from arag.report.a2rag import OUTCOMES, calls_by_purpose, outcome_of, outcome_shares, paper_calls, rewrite_counts, verdict_counts
from arag.report.build import build_report
from arag.evaluation.results import RunStore
from arag.llm.scripted import ScriptedBackend
from arag.methods import load_method
from arag.methods.a2rag import CHECKS
from tests.support.report_tables import table

YES, NO = {"verdict": "yes"}, {"verdict": "no"}
ANSWER = {"answer": "20 March 851"}
PASS = dict.fromkeys(CHECKS, "yes")
OFF_TOPIC = {**PASS, "evidence_relevance": "no"}
LLM = {"sufficiency": "llm"}
# (script, method settings) → the bucket the episode ends in.
EPISODES = [
    ([ANSWER, PASS], {}, "local"),
    ([ANSWER, PASS], {}, "local"),
    ([NO, YES, ANSWER, PASS], LLM, "bridge"),
    ([NO, NO, ANSWER, PASS], LLM, "ppr"),
    ([{"answer": "875"}, OFF_TOPIC, {"query": "q2"}, {"answer": "869"}, OFF_TOPIC], {}, "fail"),
    ([], {"gate_threshold": 0.99}, "abstain"),
]


def a2rag_row(graph_ctx, i: int, script, settings) -> dict:
    method = load_method("a2rag", {"gate_threshold": 0.0, "max_rewrites": 1, **settings})
    episode = Agent(ScriptedBackend(script), method, graph_ctx, protocol="json").run("When did Lothair II's mother die?", f"q{i}")
    tokens = episode.token_totals()
    return EpisodeRow(
        run_id="a2", dataset="2wikimultihopqa", question_id=f"q{i}", question="?", gold_answers=["20 March 851"], supporting_titles=["T"],
        method="a2rag", model="qwen", backend="scripted", status="ok", prediction=episode.answer, exact_match=float(episode.answer == "20 March 851"),
        f1=float(episode.answer == "20 March 851"), model_calls=len(episode.model_calls), prompt_tokens=tokens["prompt_tokens"],
        completion_tokens=tokens["completion_tokens"], evidence_recall_at_2=0.5, evidence_recall_at_5=1.0, wall_s=2.0 + i, judge_s=1.0,
        trajectory=json.dumps(episode.to_json(), default=str),
    ).to_record()


def baseline_rows(method: str, run_id: str, recall5: float, **fields) -> list[dict]:
    return [
        EpisodeRow(
            run_id=run_id, dataset="2wikimultihopqa", question_id=f"q{i}", question="?", gold_answers=["a"], supporting_titles=["T"], method=method,
            model="qwen", backend="scripted", status="ok", prediction="a", exact_match=float(i < 2), f1=float(i < 2), llm_acc=float(i < 2),
            judge_status="correct", model_calls=4, prompt_tokens=900, completion_tokens=100, evidence_recall_at_2=0.25, evidence_recall_at_5=recall5,
            wall_s=float(i + 1), judge_s=0.0, **fields,
        ).to_record()
        for i in range(4)
    ]


@pytest.fixture
def results(graph_ctx, tmp_path):
    root = tmp_path / "results"
    rows = [a2rag_row(graph_ctx, i, script, settings) for i, (script, settings, _) in enumerate(EPISODES)]
    # An episode that failed before its controller finished (a worker died): no trace.
    rows.append(EpisodeRow(run_id="a2", dataset="2wikimultihopqa", question_id="q9", question="?", gold_answers=["a"], supporting_titles=["T"],
                           method="a2rag", model="qwen", backend="scripted", status="failed", failure="worker died", wall_s=9.0, judge_s=0.0).to_record())
    for run_id, method, recall5, batch in (("a2", "a2rag", None, rows), ("full", "arag_full", 0.75, None), ("naive", "naive_rag", 0.5, None)):
        with RunStore(root, run_id) as store:
            store.write(batch or baseline_rows(method, run_id, recall5))
    return root


def test_the_traces_give_each_episode_one_bucket(graph_ctx, results):
    import duckdb

    traces = duckdb.connect().execute(
        f"""SELECT question_id, json_extract_string(trajectory, '$.trace.outcome'), json_extract_string(trajectory, '$.trace.stage_reached')
            FROM read_parquet('{results}/a2/**/*.parquet') ORDER BY question_id"""
    ).fetchall()
    assert [outcome_of(o, s) for _, o, s in traces] == [b for _, _, b in EPISODES] + ["no outcome"]


QUALITY = ("n", "EM", "F1", "LLM-Acc", "Recall@2", "Recall@5", "older rows")
COST = ("LLM calls / q", "tokens / q", "latency P50 s", "P95 s")


def test_report_a2rag_section(results):
    text = build_report(results).markdown
    quality, cost = table(text, "Accuracy and evidence recall", section="A2RAG"), table(text, "Cost and latency", section="A2RAG")
    # Baselines first (Naive RAG, A-RAG Full), then A2RAG; recall, calls, tokens and latency from the rows.
    assert quality.column("method") == cost.column("method") == ["Naive RAG", "A-RAG (Full)", "A2RAG (Full)"]
    assert quality.constants == {"dataset": "2wikimultihopqa", "model": "qwen", "older rows": "0"}  # the same on every row: stated once above
    naive, full, a2 = ({**q, **c} for q, c in zip(quality.records, cost.records))
    assert [naive[h] for h in (*QUALITY, *COST)] == ["4", "50.0", "50.0", "50.0 [15.0, 85.0] n=4", "25.0", "50.0", "0", "4.0", "1,000", "2.50", "3.85"]  # LLM-Acc with its 95% interval and n
    assert [full[h] for h in ("Recall@2", "Recall@5", *COST, "older rows")] == ["25.0", "75.0", "4.0", "1,000", "2.50", "3.85", "0"]
    assert a2["n"] == "7" and [a2["Recall@2"], a2["Recall@5"]] == ["50.0", "100.0"]  # recall@2/@5 mean over the six ok rows and the failed one (None)
    # latency without the judge: ok rows wall_s 2..7 minus 1 s judge → 1..6, the failed row 9 → P50 of [1..6, 9] = 4.0
    assert a2["latency P50 s"] == "4.00"
    stages = table(text, "Stage breakdown", section="A2RAG")
    calls = table(text, "LLM calls per question", section="A2RAG")
    checks = table(text, "Triple-Check verdicts and rewrites", section="A2RAG")
    assert stages.header == ["dataset", "model", "method", "n", "local %", "bridge %", "PPR %", "fail %", "abstain %", "no outcome %"]
    assert calls.header == ["dataset", "model", "method", "LLM calls / q", "paper", "sufficiency / q", "answer / q", "triple_check / q", "rewrite / q"]
    assert checks.header == ["dataset", "model", "method", "evidence_relevance yes/no", "answer_grounding yes/no", "query_resolution yes/no",
                             "rewrites / q", "rewrites by failure"]
    assert all(len(t.rows) == 1 for t in (stages, calls, checks))  # one A2RAG run: a single row keeps its every column
    shares = [float(c) for c in stages.rows[0][4:]]
    assert shares == [28.6, 14.3, 14.3, 14.3, 14.3, 14.3]
    assert sum(shares) == pytest.approx(100, abs=0.2)
    # Calls over the six episodes whose controller ran (the failed one has no trace): local 2 + 2,
    # bridge 4 and PPR 4 (two LLM sufficiency checks each), fail 5 (two attempts and a rewrite), abstain 0.
    assert calls.rows[0][3:] == ["2.83", "2.3", "0.67", "1.00", "1.00", "0.17"]
    # Triple-Check: one call judges all three; the failing episode fails evidence relevance twice.
    assert checks.rows[0][3:] == ["4/2", "6/0", "6/0", "0.14", "evidence_relevance 1"]


def test_window_level_recall_of_older_rows_is_not_shown_beside_passage_recall(graph_ctx, tmp_path):
    """Rows written before Recall@k counted passages (packed windows then counted as one rank) are
    left out of the Recall@k cells and counted in "older rows"."""
    root = tmp_path / "results"
    with RunStore(root, "a2") as store:
        store.write([a2rag_row(graph_ctx, 0, *EPISODES[0][:2])])
    with RunStore(root, "full") as store:
        store.write(baseline_rows("arag_full", "full", 0.75, schema_version=PASSAGE_RECALL_SCHEMA - 1))
    text = build_report(root).markdown
    assert "first k passages retrieved" in text.split("## A2RAG beside A-RAG (Full) and Naive RAG")[1]
    quality = table(text, "Accuracy and evidence recall", section="A2RAG")
    full, a2 = quality.row(method="A-RAG (Full)"), quality.row(method="A2RAG (Full)")
    assert [full["Recall@2"], full["Recall@5"], full["older rows"]] == ["–", "–", "4"]
    assert [a2["Recall@2"], a2["Recall@5"], a2["older rows"]] == ["50.0", "100.0", "0"]


def test_outcome_shares_sum_to_one_and_name_unknown_buckets():
    shares = outcome_shares(["local", "local", "ppr", "abstain", "no outcome"])
    assert sum(shares.values()) == pytest.approx(1.0) and set(shares) == set(OUTCOMES)
    assert shares["local"] == pytest.approx(0.4) and shares["bridge"] == 0.0
    with pytest.raises(ValueError, match="unknown A2RAG outcome bucket.*PPR"):
        outcome_shares(["PPR"])
    assert outcome_of("answered", None) == "no outcome" and outcome_of(None, None) == "no outcome" and outcome_of("fail", "ppr") == "fail"
    assert verdict_counts([json.dumps([{"evidence_relevance": True, "answer_grounding": False, "query_resolution": None}]), None]) == {
        "evidence_relevance": (1, 0), "answer_grounding": (0, 1), "query_resolution": (0, 0)}
    assert rewrite_counts([json.dumps([{"failure": "answer_grounding"}, {"failure": "answer_grounding"}]), None]) == {"answer_grounding": 2}
    assert calls_by_purpose([json.dumps({"answer": 1, "triple_check": 1}), json.dumps({"answer": 2, "rewrite": 1}), None]) == (
        2, {"sufficiency": 0.0, "answer": 1.5, "triple_check": 0.5, "rewrite": 0.5})
    with pytest.raises(ValueError, match="unknown A2RAG call purpose 'gate'"):
        calls_by_purpose([json.dumps({"gate": 1})])
    assert (paper_calls("2wikimultihopqa-passages"), paper_calls("hotpotqa"), paper_calls("graphrag-bench-novel")) == (2.3, 2.0, None)


def test_no_a2rag_runs_says_so(tmp_path):
    root = tmp_path / "results"
    with RunStore(root, "full") as store:
        store.write(baseline_rows("arag_full", "full", 0.75))
    assert "No A2RAG runs (methods `a2rag*`) in these results." in build_report(root).markdown
