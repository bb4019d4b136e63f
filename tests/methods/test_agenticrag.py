"""AgenticRAG through the agent loop (scripted backend): several calls per reply, the 90% warning,
the forced summarize that removes exactly the un-kept results and goes on, citations and their recall."""

from __future__ import annotations

import json

from arag.agent import ANSWERED, Agent, AgentConfig
from arag.agent.context import REMOVED
from arag.agent.episode import Episode
from arag.evaluation.evidence import citation_recall
from arag.llm.scripted import ScriptedBackend
from arag.llm.types import Completion
from arag.methods import load_method

FAST = dict(backoff_initial_s=0.0, backoff_max_s=0.0, backoff_jitter_s=0.0)


def agent(script, ctx, method="agenticrag", protocol="json", overrides=None, **cfg):
    backend = ScriptedBackend(script)
    return Agent(backend, load_method(method, overrides), ctx, protocol=protocol, config=AgentConfig(**{"max_steps": 8, **FAST, **cfg})), backend


def act(action: dict, size: int) -> Completion:
    """A JSON-protocol reply whose backend-reported conversation size is `size` tokens."""
    return Completion(text=json.dumps(action), prompt_tokens=size, completion_tokens=0)


def test_several_calls_per_reply_and_cited_answer(agent_ctx):
    script = [
        [{"tool": "search", "arguments": {"queries": ["Lothair II mother", "Ermengarde"]}}, {"tool": "search", "arguments": {"queries": ["Teutberga"]}}],
        {"tool": "find", "arguments": {"ref_id": "turn1search1", "patterns": ["mother"]}},
        {"answer": "Ermengarde of Tours\nCitations: turn2search1 (0.2), turn1search1 (0.9), turn1search1, turn9search9"},
    ]
    a, _ = agent(script, agent_ctx, protocol="native")
    ep = a.run("Who was the mother of Lothair II?")
    assert ep.status == ANSWERED and ep.answer == "Ermengarde of Tours"
    assert [c.name for c in ep.tool_calls] == ["search", "search", "find"] and ep.refused_calls == 0  # both calls of the reply ran
    assert [c["ref_id"] for c in ep.citations] == ["turn1search1", "turn2search1", "turn9search9"]  # by score, once each
    assert ep.citations[0]["score"] == 0.9 and ep.citations[2]["doc_id"] is None
    # A-RAG keeps one call per step.
    b, _ = agent([[{"tool": "semantic_search", "arguments": {"query": "x"}}, {"tool": "chunk_read", "arguments": {"chunk_ids": ["1#0"]}}], {"answer": "x"}], agent_ctx, "arag_full", "native")
    assert b.run("q").refused_calls == 1


def test_warning_then_forced_summarize_removes_unkept_and_continues(agent_ctx):
    budget = 2000
    script = [
        act({"tool": "search", "arguments": {"queries": ["Lothair II"]}}, 10),
        act({"tool": "find", "arguments": {"ref_id": "turn1search1", "patterns": ["Lothair"]}}, int(0.92 * budget)),  # crosses 90%: warning
        act({"tool": "search", "arguments": {"queries": ["Ermengarde of Tours"]}}, budget),  # reaches 100%: summarize forced
        act({"tool": "summarize", "arguments": {"notes": "Lothair II's mother: Ermengarde of Tours.", "keep_ref_ids": ["turn2search1"]}}, budget),
        act({"answer": "Ermengarde of Tours\nCitations: turn2search1 (1.0)"}, 100),
    ]
    a, backend = agent(script, agent_ctx, overrides={"context_budget": budget})
    ep = a.run("Who was the mother of Lothair II?")
    assert ep.status == ANSWERED and not ep.forced and ep.answer == "Ermengarde of Tours"
    assert ep.context_warnings == 1 and ep.forced_summaries == 1
    assert sum("Context note" in m.content for m in backend.requests[2].messages) == 1
    forced = backend.requests[3]
    assert "Context full" in forced.messages[-1].content
    assert [b["properties"]["tool"]["const"] for b in forced.response_schema.get("oneOf", [forced.response_schema])] == ["summarize"]
    shown = list(dict.fromkeys(r for call in ep.tool_calls[:3] for r in call.ref_ids))
    keep = forced.response_schema["properties"]["arguments"]["properties"]["keep_ref_ids"]
    assert keep["items"]["enum"] == shown and keep["maxItems"] == len(shown)  # only ids in the conversation can be kept
    assert forced.messages[-1].content.endswith(f"in the conversation: {', '.join(shown)}.")
    after = [m.content for m in backend.requests[4].messages]  # the conversation the loop went on with
    searches = [t for t in after if t.startswith("Result of search:")]
    assert searches[0] == f"Result of search:\n{REMOVED}"  # turn1: nothing kept
    assert [t for t in after if t.startswith("Result of find:")] == [f"Result of find:\n{REMOVED}"]
    second = ep.tool_calls[2]
    kept = [b for b in searches[1].split("\n\n") if b.startswith("[turn2search1]")]
    assert kept and kept[0] in second.text  # the kept entry is intact
    for ref in second.ref_ids[1:]:
        assert f"[{ref}] {REMOVED}" in searches[1]
    assert any("Ermengarde of Tours." in t and t.startswith("Result of summarize:") for t in after)  # the notes stay
    assert after[:2] == [m.content for m in backend.requests[0].messages[:2]]  # system prompt and question stay


def test_agent_summarize_compacts_at_once_and_no_summarize_ablation_forces_answer(agent_ctx):
    script = [
        {"tool": "search", "arguments": {"queries": ["Phoolwari"]}},
        {"tool": "summarize", "arguments": {"notes": "nothing yet", "keep_ref_ids": []}},
        {"answer": "unknown"},
    ]
    a, backend = agent(script, agent_ctx)
    ep = a.run("q")
    assert ep.forced_summaries == 0 and f"Result of search:\n{REMOVED}" in [m.content for m in backend.requests[2].messages]
    budget = 1500
    ablation = [act({"tool": "search", "arguments": {"queries": ["Lothair II"]}}, budget), {"answer": "Ermengarde"}]
    b, backend = agent(ablation, agent_ctx, "agenticrag_no_summarize", token_budget=budget)
    ep = b.run("q")
    assert ep.forced and ep.forced_reason == "token_budget" and ep.forced_summaries == 0


def test_citation_recall_ranks_by_score():
    ep = Episode(question="q", method="agenticrag", protocol="json", backend={}, agent={"method": {"cites": True}})
    ep.citations = [{"ref_id": "turn1search2", "doc_id": "a", "title": "A", "score": 0.9}, {"ref_id": "turn1search1", "doc_id": "b", "title": "B", "score": 0.5},
                    {"ref_id": "turn2search1", "doc_id": "a", "title": "A", "score": 0.4}, {"ref_id": "turn2search3", "doc_id": "c", "title": "C", "score": None}]
    assert citation_recall(ep, ["B", "C"]) == {1: 0.0, 3: 1.0}
    assert citation_recall(ep, ["A", "B"]) == {1: 0.5, 3: 1.0}
    assert citation_recall(ep, []) == {1: None, 3: None}
    ep.agent = {"method": {"name": "arag_full"}}
    assert citation_recall(ep, ["A"]) == {1: None, 3: None}  # a method that does not cite
    assert load_method("agenticrag").finish_answer("Paris\ncitations: turn1search1 [0.3] turn1search2: 0.8", None)[1][0]["ref_id"] == "turn1search2"


def test_method_holds_the_document_tool_settings_from_flat_config_keys():
    """conf/method/agenticrag*.yaml keep the tools' settings as keys of the method; the method holds
    them as one DocumentToolSettings, its episodes get it, a misspelled or bad key is an error."""
    import pytest

    from arag.strict_settings import UnknownSettingError
    from arag.tools import DocumentToolSettings
    from pipelines.config_checks import checked_settings
    from tests.config.test_settings import compose_config

    single = load_method("agenticrag_single_query", {"open_window_lines": 40, "semantic_find": False})
    assert single.documents == DocumentToolSettings(max_queries=1, open_window_lines=40, semantic_find=False)
    assert single.new_episode_state().settings is single.documents
    assert {k: single.describe()[k] for k in ("max_queries", "open_window_lines", "semantic_find")} == {"max_queries": 1, "open_window_lines": 40, "semantic_find": False}
    assert not hasattr(single, "max_queries")  # one place for each setting
    with pytest.raises(UnknownSettingError, match=r"method\.max_querys\b.*did you mean method\.max_queries"):
        load_method("agenticrag", {"max_querys": 2})
    with pytest.raises(ValueError, match="method agenticrag: open_window_lines must be a whole number >= 1, got 0"):
        load_method("agenticrag", {"open_window_lines": 0})
    checked_settings(compose_config("evaluate", "model=scripted", "method=agenticrag", "method.max_queries=2", "+corpus=2wikimultihopqa"))
    with pytest.raises(UnknownSettingError, match=r"method\.serch_results\b"):
        checked_settings(compose_config("evaluate", "model=scripted", "method=agenticrag", "+method.serch_results=2", "+corpus=2wikimultihopqa"))

def test_guard_rail_refusal_names_the_methods_own_reading_tools(agent_ctx):
    from arag.agent.loop import GuardRails
    from arag.evaluation.run_settings import model_texts

    rails = GuardRails(require_read_before_answer=True, max_refusals=1)
    a, backend = agent([{"answer": "early"}, {"answer": "late"}], agent_ctx, guard_rails=rails)
    assert a.run("q").answer == "late"
    refusal = backend.requests[1].messages[-1].content
    # open reads a document's lines; find's passages are pieces, like search snippets (its declared evidence)
    assert "documents with open first" in refusal and "find" not in refusal and "chunk_read" not in refusal
    b, backend = agent([{"answer": "early"}, {"answer": "late"}], agent_ctx, "arag_full", guard_rails=rails)
    b.run("q")
    assert "read the relevant chunks with chunk_read first" in backend.requests[1].messages[-1].content
    # The note is a text the model sees: part of the run identity, different per method.
    import yaml

    from arag.methods import METHOD_CONF_DIR

    notes = {m: model_texts(yaml.safe_load((METHOD_CONF_DIR / f"{m}.yaml").read_text()), "json")["notes"] for m in ("agenticrag", "arag_full")}
    assert any("with open first" in n for n in notes["agenticrag"]) and any("with chunk_read" in n for n in notes["arag_full"])


def test_shown_ref_ids_leave_out_removed_results_and_entries():
    from arag.agent.context import ContextManager, Observation
    from arag.llm.types import Message

    manager = ContextManager(budget=100)
    search = "[turn1search1] A\\nline\n\n[turn1search2] B\\nline"
    messages = [Message("user", "q"), Message("tool", search), Message("tool", "opened"), Message("tool", "notes")]
    for i, (tool, refs, text) in enumerate([("search", ["turn1search1", "turn1search2"], search), ("open", ["turn2open1"], "opened"), ("summarize", [], "notes")], start=1):
        manager.observations[i] = Observation(tool, refs, lambda t: Message("tool", t), text)
    assert manager.shown_ref_ids() == ["turn1search1", "turn1search2", "turn2open1"]
    manager.compact(messages, {"turn1search2"})
    assert manager.shown_ref_ids() == ["turn1search2"]
    assert manager.force_request(100, manager.shown_ref_ids()).content.endswith("in the conversation: turn1search2.")


def test_search_schema_and_description_name_the_configured_query_limit():
    """The search tool tells the model the limit its schema enforces: the paper's 5, one for the
    single-query ablation, or whatever method.max_queries says."""

    def search_schema(method):
        return next(s["function"] for s in method.tool_schemas() if s["function"]["name"] == "search")

    for overrides, n, phrase in (({}, 5, "Give up to 5 different phrasings"), ({"max_queries": 3}, 3, "Give up to 3 different phrasings")):
        fn = search_schema(load_method("agenticrag", overrides))
        assert fn["parameters"]["properties"]["queries"]["maxItems"] == n and phrase in fn["description"]
    assert "One to 3 reformulations" in search_schema(load_method("agenticrag", {"max_queries": 3}))["parameters"]["properties"]["queries"]["description"]
    single = search_schema(load_method("agenticrag_single_query"))
    assert single["parameters"]["properties"]["queries"]["maxItems"] == 1 and "Give one phrasing" in single["description"]


def test_search_gives_each_query_its_documents_and_open_keeps_the_token_budget(agent_ctx):
    """The paper's tools: up to `search_results` documents per query (not per call), and an open
    window that ends at `open_max_tokens` (a line is a sentence, so 1,800 lines could be far more)."""
    script = [
        {"tool": "search", "arguments": {"queries": ["Teutberga died 11 November 875", "Phoolwari is a 1946 Indian film"]}},
        {"tool": "open", "arguments": {"ref_id": "turn1search1"}},
        {"answer": "x\nCitations: turn1search1 (1.0)"},
    ]
    a, _ = agent(script, agent_ctx, overrides={"search_results": 1, "open_max_tokens": 1})
    search, opened = a.run("q").tool_calls
    assert search.ref_ids == ["turn1search1", "turn1search2"] and {c.split("#")[0] for c in search.chunk_ids} == {"0", "3"}
    assert "Viewing lines [0–0] of 2" in opened.text and "open with line=1" in opened.text  # one whole line, then the budget
    for name in ("agenticrag", "agenticrag_no_summarize", "agenticrag_no_semantic_find", "agenticrag_single_query"):
        settings = load_method(name).documents
        assert (settings.search_results, settings.open_window_lines, settings.open_max_tokens) == (10, 1800, 11_000), name


def test_find_passages_do_not_satisfy_the_read_before_answer_guard_rail_open_does(agent_ctx):
    """find's passages are pieces of a document (its declared evidence: snippet), as evidence recall
    counts them; the guard rail asks for a whole-text read, which open gives."""
    from arag.agent.loop import GuardRails
    from arag.evaluation.evidence import chunks_seen_and_read

    script = [
        {"tool": "search", "arguments": {"queries": ["Ermengarde of Tours"]}},
        {"tool": "find", "arguments": {"ref_id": "turn1search1", "patterns": ["died"]}},
        {"answer": "too early"},
        {"tool": "open", "arguments": {"ref_id": "turn1search1"}},
        {"answer": "20 March 851"},
    ]
    a, backend = agent(script, agent_ctx, guard_rails=GuardRails(require_read_before_answer=True, max_refusals=2))
    ep = a.run("When did Ermengarde of Tours die?")
    assert ep.answer == "20 March 851" and [c.name for c in ep.tool_calls] == ["search", "find", "open"]
    assert "with open first" in backend.requests[3].messages[-1].content  # the answer after find was refused
    seen, read = chunks_seen_and_read(ep)
    found = next(c for c in ep.tool_calls if c.name == "find")
    assert found.chunk_ids and set(found.chunk_ids) <= seen and read and read == set(next(c for c in ep.tool_calls if c.name == "open").chunk_ids)
