"""Every branch of the A2RAG controller with a scripted model over a tiny graph: the gate's
abstention, each stage's exit, each Triple-Check failure with its typed rewrite, retry exhaustion."""

from __future__ import annotations

import pytest

from arag.agent import Agent
from arag.llm.scripted import ScriptedBackend
from arag.methods import load_method

YES, NO = {"verdict": "yes"}, {"verdict": "no"}
QUESTION = "When did Lothair II's mother die?"


def run(graph_ctx, script, **overrides):
    method = load_method("a2rag", {"gate_threshold": 0.0, **overrides})
    backend = ScriptedBackend(script)
    episode = Agent(backend, method, graph_ctx, protocol="json").run(QUESTION, "q1")
    assert episode.status == "answered", episode.failure
    assert len(episode.model_calls) == len(script) == episode.steps  # every scripted reply used, one step each
    return episode, backend


def test_gate_abstains_without_any_model_call(graph_ctx):
    episode, _ = run(graph_ctx, [], gate_threshold=0.99)
    assert episode.trace["outcome"] == "abstain" and episode.answer == "I don't know"
    assert episode.trace["gate"]["score"] < 0.99 and not episode.tool_calls


@pytest.mark.parametrize(
    "sufficiency, stage",
    [([YES], "local"), ([NO, YES], "bridge"), ([NO, NO], "ppr")],
)
def test_each_stage_exits_when_the_evidence_suffices(graph_ctx, sufficiency, stage):
    episode, _ = run(graph_ctx, [*sufficiency, {"answer": "20 March 851"}, YES, YES, YES])
    trace = episode.trace
    assert trace["outcome"] == "answered" and episode.answer == "20 March 851"
    assert trace["stage_reached"] == stage and [s["stage"] for s in trace["stages"]] == ["local", "bridge", "ppr"][: len(trace["stages"])]
    assert [c.name for c in episode.tool_calls] == ["graph_retrieval"] * len(trace["stages"])
    assert trace["checks"] == [{"attempt": 0, "answer": "20 March 851", "evidence_relevance": True, "answer_grounding": True, "query_resolution": True}]
    # The seeds are the question's entity aligned to its node; Stage 1 reads its chunks.
    assert "lothair ii" in episode.tool_calls[0].arguments["seeds"] and "1#0" in episode.tool_calls[0].chunk_ids
    assert episode.token_totals()["prompt_tokens"] > 0


def test_evidence_relevance_failure_rewrites_and_retrieves_again(graph_ctx):
    script = [YES, {"answer": "851"}, NO, {"query": "Ermengarde of Tours death"}, YES, {"answer": "20 March 851"}, YES, YES, YES]
    episode, backend = run(graph_ctx, script)
    trace = episode.trace
    assert trace["rewrites"] == [{"failure": "evidence_relevance", "query": "Ermengarde of Tours death"}]
    assert trace["checks"][0]["evidence_relevance"] is False and trace["checks"][0]["answer_grounding"] is None
    assert trace["outcome"] == "answered" and episode.answer == "20 March 851"
    second = episode.tool_calls[-1]
    assert second.arguments["query"] == "Ermengarde of Tours death" and "ermengarde of tours" in second.arguments["seeds"]
    assert "off topic" in backend.requests[3].messages[0].content  # the relevance-specific rewrite prompt
    # The off-topic evidence is dropped: the second answer sees only the second retrieval's chunks.
    assert backend.requests[5].messages[-1].content.count("\n\n[") + 1 == len(second.chunk_ids)


def test_grounding_failure_reanswers_from_the_same_evidence(graph_ctx):
    script = [YES, {"answer": "869"}, YES, NO, {"query": "Death date of Lothair II's mother"}, {"answer": "20 March 851"}, YES, YES, YES]
    episode, backend = run(graph_ctx, script)
    assert episode.trace["rewrites"][0]["failure"] == "answer_grounding"
    assert len(episode.tool_calls) == 1  # no new retrieval
    assert "Use only facts stated in the passages" in backend.requests[5].messages[-1].content
    assert episode.answer == "20 March 851"


def test_query_resolution_failure_rewrites_towards_the_bridge(graph_ctx):
    script = [YES, {"answer": "Lothair II"}, YES, YES, NO, {"query": "Who was the mother of Lothair II?"}, YES, {"answer": "20 March 851"}, YES, YES, YES]
    episode, backend = run(graph_ctx, script)
    assert episode.trace["rewrites"][0]["failure"] == "query_resolution"
    assert "intermediate question" in backend.requests[5].messages[0].content
    assert episode.trace["outcome"] == "answered" and len(episode.tool_calls) == 2


@pytest.mark.parametrize("exhausted, answer", [("abstain", "I don't know"), ("last", "869")])
def test_retry_exhaustion_ends_in_fail(graph_ctx, exhausted, answer):
    script = [YES, {"answer": "875"}, NO, {"query": "q2"}, YES, {"answer": "869"}, NO]
    episode, _ = run(graph_ctx, script, max_rewrites=1, exhausted=exhausted)
    assert episode.trace["outcome"] == "fail" and episode.answer == answer
    assert len(episode.trace["checks"]) == 2 and len(episode.trace["rewrites"]) == 1


def test_unreadable_verdict_counts_as_a_failed_check(graph_ctx):
    script = [YES, {"answer": "851"}, "maybe?", {"query": "q2"}, YES, {"answer": "851"}, YES, YES, YES]
    episode, _ = run(graph_ctx, script)
    assert episode.trace["checks"][0]["evidence_relevance"] is False and episode.trace["outcome"] == "answered"


def test_relation_seeds_filter_stage_one(graph_ctx):
    episode, _ = run(graph_ctx, [YES, {"answer": "x"}, YES, YES, YES], relation_seeds=True, relation_min_score=0.99)
    assert "relations" in episode.tool_calls[0].arguments


def test_bad_settings_are_named():
    with pytest.raises(ValueError, match="bridge_hops"):
        load_method("a2rag", {"bridge_hops": 1})
    with pytest.raises(ValueError, match="exhausted"):
        load_method("a2rag", {"exhausted": "never"})
