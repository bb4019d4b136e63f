"""Every branch of the A2RAG controller with a scripted model over a tiny graph: the gate's
abstention, each stage's exit (structural and LLM sufficiency), each Triple-Check failure with its
typed rewrite, retry exhaustion, the LLM calls counted by purpose, and relation seeds reaching the
local and bridge stages."""

from __future__ import annotations

import pytest

from arag.agent import Agent
from arag.llm.scripted import ScriptedBackend
from arag.methods import load_method
from arag.methods.a2rag import CHECKS, parse_verdicts
from tests.support.tiny_index import fake_encode

YES, NO = {"verdict": "yes"}, {"verdict": "no"}
PASS = dict.fromkeys(CHECKS, "yes")
QUESTION = "When did Lothair II's mother die?"


def check(failing: str | None = None) -> dict[str, str]:
    """A Triple-Check reply in which `failing` (if any) says no."""
    return {c: "no" if c == failing else "yes" for c in CHECKS}


def run(graph_ctx, script, question: str = QUESTION, method: str = "a2rag", **overrides):
    method = load_method(method, {"gate_threshold": 0.0, **overrides})
    backend = ScriptedBackend(script)
    episode = Agent(backend, method, graph_ctx, protocol="json").run(question, "q1")
    assert episode.status == "answered", episode.failure
    assert len(episode.model_calls) == len(script) == episode.steps  # every scripted reply used, one step each
    assert sum(episode.trace["calls"].values()) == len(episode.model_calls)  # every call has its purpose
    return episode, backend


def test_gate_abstains_without_any_model_call(graph_ctx):
    episode, _ = run(graph_ctx, [], gate_threshold=0.99)
    assert episode.trace["outcome"] == "abstain" and episode.answer == "I don't know"
    assert episode.trace["gate"]["score"] < 0.99 and not episode.tool_calls


def test_the_gate_reads_llm_summaries_by_default_and_extractive_ones_when_switched(graph_ctx):
    """The paper's gate compares the question with per-document summaries precomputed offline (Sec.
    III-B1): by default those the graph build's model wrote; `gate_summaries=extractive` is the CPU
    substitute (title and first sentences), and each run records which it used."""
    import numpy as np
    import pyarrow.parquet as pq

    assert load_method("a2rag").describe()["gate_summaries"] == "llm"
    assert load_method("a2rag", {"gate_summaries": "extractive"}).describe()["gate_summaries"] == "extractive"
    table = pq.read_table(load_method("a2rag").graph_for(graph_ctx).layout.summaries).to_pylist()
    qvec = np.asarray(graph_ctx.encode_query(QUESTION))[0]
    best = {kind: max(float(v @ qvec) for v in fake_encode([r[column] for r in table])) for kind, column in (("llm", "llm_summary"), ("extractive", "summary"))}
    assert round(best["llm"], 4) != round(best["extractive"], 4)
    for settings, kind in (({}, "llm"), ({"gate_summaries": "extractive"}, "extractive")):
        episode, _ = run(graph_ctx, [{"answer": "20 March 851"}, PASS], **settings)
        gate = episode.trace["gate"]
        assert gate["summaries"] == kind and gate["score"] == pytest.approx(round(best[kind], 4), abs=1e-4)
        assert episode.agent["method"]["gate_summaries"] == kind
        # What built the graph is in every episode (the rule extractor here, the summaries by a model).
        assert episode.trace["graph"] == {"extractor": "rules", "summaries": "llm:summary-double"}
    with pytest.raises(ValueError, match="method.gate_summaries must be llm or extractive"):
        load_method("a2rag", {"gate_summaries": "abstractive"})


def test_a_first_attempt_answer_costs_two_calls_as_in_the_paper(graph_ctx):
    """Structural sufficiency (the default) asks no model; the answer and one Triple-Check call remain."""
    episode, backend = run(graph_ctx, [{"answer": "20 March 851"}, PASS])
    trace = episode.trace
    assert trace["calls"] == {"sufficiency": 0, "answer": 1, "triple_check": 1, "rewrite": 0}
    assert trace["outcome"] == "answered" and episode.answer == "20 March 851"
    # One seed (Lothair II): Stage 1 joins it trivially and found chunks, so it suffices.
    assert trace["stage_reached"] == "local" and trace["sufficiency"] == [{"stage": "local", "sufficient": True}]
    assert "lothair ii" in episode.tool_calls[0].arguments["seeds"] and "1#0" in episode.tool_calls[0].chunk_ids
    assert trace["checks"] == [{"attempt": 0, "answer": "20 March 851", **dict.fromkeys(CHECKS, True)}]
    # The one Triple-Check call judges all three validators against the passages and the answer.
    request = backend.requests[1]
    assert set(request.response_schema["required"]) == set(CHECKS)
    assert all(c in request.messages[0].content for c in CHECKS) and "Answer: 20 March 851" in request.messages[-1].content


@pytest.mark.parametrize(
    "question, stage",
    [
        # 11 November 875 and Ermengarde of Tours share no neighbour; Lothair II is within 2 hops of both.
        ("Did Ermengarde of Tours die before 11 November 875?", "bridge"),
        # Chaturbhuj Doshi lies in another component: no bridge either, so PPR.
        ("Was Teutberga older than Chaturbhuj Doshi?", "ppr"),
    ],
)
def test_structural_sufficiency_escalates_when_the_seeds_are_not_joined(graph_ctx, question, stage):
    episode, _ = run(graph_ctx, [{"answer": "yes"}, PASS], question=question, relation_seeds=False, method="a2rag_node_only")
    trace = episode.trace
    assert trace["stage_reached"] == stage and trace["calls"]["sufficiency"] == 0
    assert trace["sufficiency"][0] == {"stage": "local", "sufficient": False}
    assert len(episode.tool_calls[0].arguments["seeds"]) == 2


@pytest.mark.parametrize("sufficiency, stage", [([YES], "local"), ([NO, YES], "bridge"), ([NO, NO], "ppr")])
def test_llm_sufficiency_checks_each_stage(graph_ctx, sufficiency, stage):
    episode, _ = run(graph_ctx, [*sufficiency, {"answer": "20 March 851"}, PASS], sufficiency="llm")
    trace = episode.trace
    assert trace["outcome"] == "answered" and episode.answer == "20 March 851"
    assert trace["stage_reached"] == stage and [s["stage"] for s in trace["stages"]] == ["local", "bridge", "ppr"][: len(trace["stages"])]
    records = {"local": "graph_triples", "bridge": "graph_triples", "ppr": "graph_retrieval"}
    assert [c.name for c in episode.tool_calls] == [records[s["stage"]] for s in trace["stages"]]
    assert trace["calls"] == {"sufficiency": len(sufficiency), "answer": 1, "triple_check": 1, "rewrite": 0}
    assert episode.token_totals()["prompt_tokens"] > 0


def test_relation_seeds_reach_the_local_and_bridge_stages(graph_ctx, monkeypatch):
    method = load_method("a2rag", {"gate_threshold": 0.0, "sufficiency": "llm", "relation_min_score": 0.5})
    graph = method.graph_for(graph_ctx)
    seen: dict[str, object] = {}
    for name in ("local_hoods", "bridges"):
        original = getattr(graph, name)

        def spy(*args, _name=name, _original=original):
            seen[_name] = args[-1]  # the relation seeds are the last argument of both
            return _original(*args)

        monkeypatch.setattr(graph, name, spy)
    episode = Agent(ScriptedBackend([NO, NO, {"answer": "851"}, PASS]), method, graph_ctx, protocol="json").run(QUESTION, "q1")
    relations = set(episode.tool_calls[0].arguments["relations"])
    assert relations and seen["local_hoods"] == relations and seen["bridges"] == relations
    assert [c.arguments["relations"] for c in episode.tool_calls[:2]] == [sorted(relations)] * 2


def test_evidence_relevance_failure_rewrites_and_retrieves_again(graph_ctx):
    script = [{"answer": "851"}, check("evidence_relevance"), {"query": "Ermengarde of Tours death"}, {"answer": "20 March 851"}, PASS]
    episode, backend = run(graph_ctx, script)
    trace = episode.trace
    assert trace["rewrites"] == [{"failure": "evidence_relevance", "query": "Ermengarde of Tours death"}]
    assert trace["checks"][0]["evidence_relevance"] is False
    assert trace["outcome"] == "answered" and episode.answer == "20 March 851"
    assert trace["calls"] == {"sufficiency": 0, "answer": 2, "triple_check": 2, "rewrite": 1}
    second = episode.tool_calls[-1]
    assert second.arguments["query"] == "Ermengarde of Tours death" and "ermengarde of tours" in second.arguments["seeds"]
    assert "off topic" in backend.requests[2].messages[0].content  # the relevance-specific rewrite prompt
    # The off-topic evidence is dropped: the second answer sees only the second retrieval's triples.
    first_only = set(episode.tool_calls[0].text.splitlines()) - set(second.text.splitlines())
    assert first_only and not any(t in backend.requests[3].messages[-1].content for t in first_only)
    assert second.text in backend.requests[3].messages[-1].content


def test_stages_1_and_2_show_triples_and_stage_3_passages(graph_ctx):
    """The paper's retriever state: evidence is triples in Stages 1–2 and provenance text chunks in
    Stage 3 (Sec. III-C); the sufficiency checks and the answer read the triples, not chunk text."""

    episode, backend = run(graph_ctx, [NO, NO, {"answer": "20 March 851"}, PASS], sufficiency="llm")
    local, bridge, ppr = episode.tool_calls
    assert (local.name, bridge.name, ppr.name) == ("graph_triples", "graph_triples", "graph_retrieval")
    texts = dict(graph_ctx.sql("SELECT chunk_id, text FROM chunks"))
    # Stage 1: the seed's triples, each "(subject; relation; object)", from the chunks it records.
    assert local.text and all(line.startswith("(") and line.endswith(")") and line.count("; ") >= 2 for line in local.text.splitlines())
    assert any("Lothair II" in line for line in local.text.splitlines()) and local.chunk_ids
    assert not any(texts[c] in local.text for c in local.chunk_ids)
    first_check = backend.requests[0].messages[-1].content  # Stage 1's sufficiency check
    assert "Facts from the knowledge graph" in first_check and local.text.splitlines()[0] in first_check
    assert "Passages:" not in first_check and not any(texts[c] in first_check for c in texts)
    # Stage 3 maps PPR's nodes back to passages: their whole texts reach the answer, beside the triples.
    answer_prompt = backend.requests[2].messages[-1].content
    assert ppr.chunk_ids and all(texts[c] in answer_prompt for c in ppr.chunk_ids)
    assert "Facts from the knowledge graph" in answer_prompt and "Passages:" in answer_prompt


def test_the_first_failing_validator_names_the_failure():
    verdicts = parse_verdicts('{"evidence_relevance": "yes", "answer_grounding": "no", "query_resolution": "no"}')
    assert verdicts == {"evidence_relevance": True, "answer_grounding": False, "query_resolution": False}
    assert parse_verdicts("evidence_relevance: yes\nanswer_grounding: Yes\nquery_resolution: yes") == dict.fromkeys(CHECKS, True)
    # A missing or unreadable verdict fails.
    assert parse_verdicts('{"evidence_relevance": "yes"}') == {"evidence_relevance": True, "answer_grounding": False, "query_resolution": False}
    assert parse_verdicts("maybe?") == dict.fromkeys(CHECKS, False)


def test_grounding_failure_reanswers_from_the_same_evidence(graph_ctx):
    script = [{"answer": "869"}, check("answer_grounding"), {"query": "Death date of Lothair II's mother"}, {"answer": "20 March 851"}, PASS]
    episode, backend = run(graph_ctx, script)
    assert episode.trace["rewrites"][0]["failure"] == "answer_grounding"
    assert len(episode.tool_calls) == 1  # no new retrieval
    assert "Use only facts stated in the evidence" in backend.requests[3].messages[-1].content
    assert episode.answer == "20 March 851"


def test_query_resolution_failure_rewrites_towards_the_bridge(graph_ctx):
    script = [{"answer": "Lothair II"}, check("query_resolution"), {"query": "Who was the mother of Lothair II?"}, {"answer": "20 March 851"}, PASS]
    episode, backend = run(graph_ctx, script)
    assert episode.trace["rewrites"][0]["failure"] == "query_resolution"
    assert "intermediate question" in backend.requests[2].messages[0].content
    assert episode.trace["outcome"] == "answered" and len(episode.tool_calls) == 2


@pytest.mark.parametrize("exhausted, answer", [("abstain", "I don't know"), ("last", "869")])
def test_retry_exhaustion_ends_in_fail(graph_ctx, exhausted, answer):
    script = [{"answer": "875"}, check("evidence_relevance"), {"query": "q2"}, {"answer": "869"}, check("evidence_relevance")]
    episode, _ = run(graph_ctx, script, max_rewrites=1, exhausted=exhausted)
    assert episode.trace["outcome"] == "fail" and episode.answer == answer
    assert len(episode.trace["checks"]) == 2 and len(episode.trace["rewrites"]) == 1


def test_unreadable_verdict_counts_as_a_failed_check(graph_ctx):
    script = [{"answer": "851"}, "maybe?", {"query": "q2"}, {"answer": "851"}, PASS]
    episode, _ = run(graph_ctx, script)
    assert episode.trace["checks"][0]["evidence_relevance"] is False and episode.trace["outcome"] == "answered"


def test_full_is_the_default_and_node_only_the_ablation():
    full, node_only = load_method("a2rag"), load_method("a2rag_node_only")
    assert full.relation_seeds is True and full.sufficiency == "structural" and node_only.relation_seeds is False
    assert {k for k, v in full.describe().items() if node_only.describe()[k] != v} == {"name", "relation_seeds"}
    with pytest.raises(ValueError, match="a2rag is the A2RAG paper's Full method.*a2rag_node_only"):
        load_method("a2rag", {"relation_seeds": False})
    with pytest.raises(ValueError, match="a2rag_node_only is the A2RAG paper's Node-only ablation"):
        load_method("a2rag_node_only", {"relation_seeds": True})
    with pytest.raises(ValueError, match="unknown method 'a2rag_relation_seeds'; known: .*a2rag_node_only"):
        load_method("a2rag_relation_seeds")


def test_bad_settings_are_named():
    with pytest.raises(ValueError, match="bridge_hops"):
        load_method("a2rag", {"bridge_hops": 1})
    with pytest.raises(ValueError, match="exhausted"):
        load_method("a2rag", {"exhausted": "never"})
    with pytest.raises(ValueError, match="method.sufficiency must be structural or llm"):
        load_method("a2rag", {"sufficiency": "always"})
    with pytest.raises(ValueError, match=r"method\.check_prompts"):  # the three validators are one prompt now
        load_method("a2rag", {"check_prompts": {}})
