"""The agent loop (Algorithm 1) with the scripted backend: every method, both protocols, edge cases."""

from __future__ import annotations

import json

import pytest

from arag.agent import ANSWERED, EPISODE_FAILED, Agent, AgentConfig, GuardRails
from arag.llm.scripted import ScriptedBackend
from arag.llm.types import Completion, LLMError, ToolCall
from arag.methods import available_methods, load_method

FAST = dict(backoff_initial_s=0.0, backoff_max_s=0.0, backoff_jitter_s=0.0)

ARGS = {
    "keyword_search": {"keywords": ["Lothair II"]},
    "semantic_search": {"query": "mother of Lothair II"},
    "naive_embedding_search": {"query": "mother of Lothair II"},
    "chunk_read": {"chunk_ids": ["1#0"]},
}


def agent(script, method="arag_full", ctx=None, protocol="json", **cfg):
    backend = ScriptedBackend(script)
    config = AgentConfig(**{"max_steps": 6, **FAST, **cfg})
    return Agent(backend, load_method(method), ctx, protocol=protocol, config=config), backend


def test_all_methods_are_configured():
    assert set(available_methods()) >= {"direct", "naive_rag", "arag_naive", "arag_full", "arag_no_keyword", "arag_no_semantic", "arag_no_chunk_read"}


@pytest.mark.parametrize("protocol", ["json", "native"])
@pytest.mark.parametrize("method", ["direct", "naive_rag", "arag_naive", "arag_full", "arag_no_keyword", "arag_no_semantic", "arag_no_chunk_read"])
def test_every_method_runs(method, protocol, agent_ctx):
    m = load_method(method)
    script = [{"tool": t, "arguments": ARGS[t]} for t in m.tools] + [{"answer": "Ermengarde of Tours"}]
    a, backend = agent(script, method, agent_ctx, protocol)
    ep = a.run("Who was the mother of Lothair II?", question_id="q1")
    assert ep.status == ANSWERED and ep.answer == "Ermengarde of Tours" and not ep.forced
    assert ep.steps == len(m.tools) + 1 and ep.question_id == "q1" and ep.method == method
    assert [c.name for c in ep.tool_calls if c.step > 0] == list(m.tools)
    assert all(c.error is None for c in ep.tool_calls)
    json.dumps(ep.to_json())
    first = backend.requests[0]
    assert first.messages[0].role == "system" and "Lothair II" in first.messages[1].content
    if protocol == "native":
        assert first.response_schema is None
        assert [t["function"]["name"] for t in first.tools or []] == list(m.tools)
    else:
        assert first.tools is None
        branches = first.response_schema.get("oneOf", [first.response_schema])
        assert [b["properties"]["tool"]["const"] for b in branches if "tool" in b["properties"]] == list(m.tools)
    if method == "naive_rag":
        assert ep.tool_calls[0].step == 0 and ep.tool_calls[0].name == "naive_embedding_search"
        assert "Ermengarde of Tours" in first.messages[1].content and ep.retrieved_tokens > 0
    if method == "direct":
        assert ep.tool_calls == [] and ep.retrieved_tokens == 0
    if method == "arag_no_chunk_read":
        # No snippet level: searches return whole chunks.
        assert "His mother was Ermengarde of Tours." in ep.tool_calls[0].text and "Lothair II was the king" in ep.tool_calls[0].text
    if m.tools:
        assert ep.retrieved_tokens > 0


def test_max_steps_forces_an_answer_without_tools(agent_ctx):
    script = [{"tool": "keyword_search", "arguments": {"keywords": [f"k{i}"]}} for i in range(3)] + [{"answer": "forced one"}]
    a, backend = agent(script, ctx=agent_ctx, max_steps=3)
    ep = a.run("q?")
    assert ep.status == ANSWERED and ep.forced and ep.forced_reason == "max_steps" and ep.answer == "forced one"
    assert ep.steps == 3 and len(ep.model_calls) == 4 and ep.model_calls[-1].final
    final = backend.requests[-1]
    assert final.response_schema == {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"], "additionalProperties": False}
    assert final.messages[-1].role == "user" and "final answer" in final.messages[-1].content


def test_max_steps_native_final_call_offers_no_tools(agent_ctx):
    script = [{"tool": "keyword_search", "arguments": {"keywords": ["x"]}}] * 2 + ["plain text answer"]
    a, backend = agent(script, ctx=agent_ctx, protocol="native", max_steps=2)
    ep = a.run("q?")
    assert ep.forced and ep.answer == "plain text answer" and backend.requests[-1].tools is None


def test_token_budget_forces_an_answer(agent_ctx):
    from arag.agent.loop import estimate_tokens

    read = {"tool": "chunk_read", "arguments": {"chunk_ids": ["1#0", "0#0"]}}
    probe, backend = agent([{"answer": "x"}], ctx=agent_ctx)
    probe.run("q?")
    start = sum(estimate_tokens(m) for m in backend.requests[0].messages)
    # The system prompt and question fit; after the first read the conversation is over the budget.
    a, backend = agent([read, {"answer": "a"}], ctx=agent_ctx, token_budget=start + 40)
    ep = a.run("q?")
    assert ep.forced and ep.forced_reason == "token_budget" and ep.steps == 1 and ep.answer == "a"
    assert backend.requests[-1].response_schema["required"] == ["answer"]
    a, _ = agent([{"answer": "direct"}], ctx=agent_ctx, token_budget=10)
    ep = a.run("q?")
    assert ep.forced and ep.forced_reason == "token_budget" and ep.steps == 0 and ep.answer == "direct"


def test_token_budget_fits_the_context_window():
    backend = ScriptedBackend([], max_tokens=256)
    backend.context_window = 8192
    a = Agent(backend, load_method("direct"), config=AgentConfig(token_budget=None))
    assert a.config.token_budget == 8192 - 256 - 1536  # room for one reply and the margin
    a = Agent(backend, load_method("direct"), config=AgentConfig(token_budget=1000))
    assert a.config.token_budget == 1000
    assert Agent(ScriptedBackend([]), load_method("direct"), config=AgentConfig(token_budget=None)).config.token_budget is None


def test_unknown_tool_is_an_observation(agent_ctx):
    a, backend = agent([{"tool": "web_search", "arguments": {"q": "x"}}, {"answer": "ok"}], ctx=agent_ctx)
    ep = a.run("q?")
    assert ep.status == ANSWERED and ep.answer == "ok"
    assert ep.tool_calls[0].error == "unknown tool" and "keyword_search" in ep.tool_calls[0].text
    assert "no tool named 'web_search'" in backend.requests[1].messages[-1].content


def test_tool_outside_the_method_set_is_unknown(agent_ctx):
    a, _ = agent([{"tool": "chunk_read", "arguments": {"chunk_ids": ["1#0"]}}, {"answer": "ok"}], method="arag_no_chunk_read", ctx=agent_ctx)
    ep = a.run("q?")
    assert ep.tool_calls[0].error == "unknown tool" and ep.retrieved_tokens == 0


def test_malformed_json_arguments_native(agent_ctx):
    bad = Completion(tool_calls=[ToolCall("keyword_search", '{"keywords": ["Lothair', "c1")])
    a, backend = agent([bad, {"answer": "ok"}], ctx=agent_ctx, protocol="native")
    ep = a.run("q?")
    assert ep.status == ANSWERED and ep.tool_calls[0].error and "not valid JSON" in ep.tool_calls[0].text
    assert ep.tool_calls[0].arguments == '{"keywords": ["Lothair'
    obs = backend.requests[1].messages[-1]
    assert obs.role == "tool" and obs.tool_call_id == "c1"


def test_tool_error_is_an_observation(agent_ctx):
    script = [{"tool": "keyword_search", "arguments": {"keywords": "Lothair"}}, {"tool": "chunk_read", "arguments": {"chunk_ids": ["nope#9"]}}, {"answer": "ok"}]
    a, _ = agent(script, ctx=agent_ctx)
    ep = a.run("q?")
    assert ep.status == ANSWERED and ep.tool_calls[0].error and "list of strings" in ep.tool_calls[0].text
    assert "nope#9" in ep.tool_calls[1].text


def test_invalid_reply_gets_feedback(agent_ctx):
    a, backend = agent(["this is not json", '{"tool": 3}', "```json\n{\"answer\": \"fenced\"}\n```"], ctx=agent_ctx)
    ep = a.run("q?")
    assert ep.status == ANSWERED and ep.answer == "fenced" and ep.invalid_replies == 2
    assert "could not be used" in backend.requests[1].messages[-1].content


def test_llm_errors_are_retried(agent_ctx):
    a, _ = agent([LLMError("timeout"), LLMError("503"), {"answer": "ok"}], ctx=agent_ctx, llm_attempts=3)
    ep = a.run("q?")
    assert ep.status == ANSWERED and ep.model_calls[0].attempts == 3


def test_llm_errors_exhausted_fail_the_episode(agent_ctx):
    a, _ = agent([{"tool": "keyword_search", "arguments": {"keywords": ["x"]}}] + [LLMError("timeout")] * 5, ctx=agent_ctx, llm_attempts=3)
    ep = a.run("q?")
    assert ep.status == EPISODE_FAILED and ep.answer is None and "3 attempt(s)" in ep.failure and "timeout" in ep.failure
    assert ep.model_calls[-1].error and ep.model_calls[-1].attempts == 3
    assert len(ep.tool_calls) == 1 and ep.messages  # what happened before the failure is kept


def test_non_retryable_error_fails_at_once(agent_ctx):
    a, _ = agent([LLMError("context too long", retryable=False), {"answer": "never"}], ctx=agent_ctx, llm_attempts=5)
    ep = a.run("q?")
    assert ep.status == EPISODE_FAILED and ep.model_calls[0].attempts == 1


def test_backend_bug_fails_the_episode(agent_ctx):
    a, _ = agent([RuntimeError("boom")], ctx=agent_ctx)
    ep = a.run("q?")
    assert ep.status == EPISODE_FAILED and "boom" in ep.failure


def test_unparseable_forced_answer_fails(agent_ctx):
    a, _ = agent([{"tool": "keyword_search", "arguments": {"keywords": ["x"]}}, "garbage"], ctx=agent_ctx, max_steps=1)
    ep = a.run("q?")
    assert ep.status == EPISODE_FAILED and ep.forced and ep.answer is None


def test_an_answer_cut_off_at_the_reply_limit_is_the_answer_as_far_as_it_went(agent_ctx):
    """A 1.5B model repeating itself in a free-form answer hits max_tokens mid-string; at temperature 0
    it writes the same reply again, so refusing it as invalid JSON failed the episode (GraphRAG-Bench
    Novel). The cut-off answer is kept and marked; a cut-off tool call is still refused, with a reason
    that says why."""
    looping = '{"answer": "The figure was Tregeagle. He was a steward. The figure was Tregeagle. He was a st'
    cut_tool = '{"tool": "keyword_search", "arguments": {"keywords": ["Dozmare Pool", "Tregea'
    a, backend = agent([Completion(text=cut_tool, finish_reason="length"), Completion(text=looping, finish_reason="length")], ctx=agent_ctx)
    ep = a.run("Who was doomed to empty Dozmare Pool?")
    assert ep.status == ANSWERED and not ep.forced and ep.answer_cut_off and ep.invalid_replies == 1
    assert ep.answer == "The figure was Tregeagle. He was a steward. The figure was Tregeagle. He was a st"
    assert "cut off at the reply-length limit" in backend.requests[1].messages[-1].content
    assert ep.to_json()["answer_cut_off"] is True
    # The same text that stopped for another reason is invalid JSON, as before.
    a, _ = agent([Completion(text=looping, finish_reason="stop"), {"answer": "Tregeagle"}], ctx=agent_ctx)
    ep = a.run("q?")
    assert ep.answer == "Tregeagle" and ep.invalid_replies == 1 and not ep.answer_cut_off


def test_a_forced_answer_cut_off_at_the_reply_limit_is_not_a_failure(agent_ctx):
    a, _ = agent([{"tool": "keyword_search", "arguments": {"keywords": ["x"]}}, Completion(text='{"answer": "Tregeagle, a steward wh', finish_reason="length")],
                 ctx=agent_ctx, max_steps=1)
    ep = a.run("q?")
    assert ep.status == ANSWERED and ep.forced and ep.answer == "Tregeagle, a steward wh" and ep.answer_cut_off


@pytest.mark.parametrize("text, answer", [
    ('{"answer": "Tregea', "Tregea"),
    ('```json\n{"answer": "Tregea', "Tregea"),
    ('{"answer": "a \\"quoted\\" wo', 'a "quoted" wo'),
    ('{"answer": "ends in an escape \\', "ends in an escape"),
    ('{"answer": "half a \\u00', "half a"),
    ('{"answer": "line one\nline tw', "line one\nline tw"),
    ('{"answer": "closed", "cit', "closed"),
    ('{"answer": "   ', None),
    ('{"tool": "open", "arguments": {"ref_id": "turn1', None),
    ("plain words", None),
])
def test_cut_off_answer_recovers_the_string_as_far_as_it_went(text, answer):
    from arag.agent.protocols import cut_off_answer

    assert cut_off_answer(text) == answer


def test_one_tool_call_per_step_native(agent_ctx):
    """The paper's setting: only the first call of a reply runs; the others get a note, each answering its call id."""
    reply = [{"tool": "keyword_search", "arguments": {"keywords": ["Teutberga"]}}, {"tool": "chunk_read", "arguments": {"chunk_ids": ["0#0"]}}, {"tool": "chunk_read", "arguments": {"chunk_ids": ["1#0"]}}]
    a, backend = agent([reply, {"answer": "ok"}], ctx=agent_ctx, protocol="native")
    ep = a.run("q?")
    assert [c.name for c in ep.tool_calls] == ["keyword_search"] and ep.steps == 2 and ep.refused_calls == 2
    msgs = backend.requests[1].messages
    assert [m.role for m in msgs[-4:]] == ["assistant", "tool", "tool", "tool"]
    assert [m.tool_call_id for m in msgs[-3:]] == [c.id for c in msgs[-4].tool_calls]
    assert all("only one tool call" in m.content for m in msgs[-2:]) and "Teutberga" in msgs[-3].content


def test_one_tool_call_per_step_json(agent_ctx):
    """The JSON protocol's schema is one object: one tool or the answer, never a list of calls."""
    a, backend = agent([{"tool": "keyword_search", "arguments": {"keywords": ["Teutberga"]}}, {"answer": "ok"}], ctx=agent_ctx)
    ep = a.run("q?")
    schema = backend.requests[0].response_schema
    assert all(b["type"] == "object" for b in schema["oneOf"]) and len(ep.tool_calls) == 1
    ep = a.protocol.parse(Completion(text=json.dumps([{"tool": "chunk_read", "arguments": {"chunk_ids": ["0#0"]}}] * 2)))
    assert type(ep[0]).__name__ == "InvalidAction"


def test_openai_backend_asks_for_one_tool_call_per_reply():
    from arag.llm.openai import OpenAIBackend

    body = OpenAIBackend("m").request_body([], [{"type": "function", "function": {"name": "t", "parameters": {}}}], None, None)
    assert body["parallel_tool_calls"] is False
    assert "parallel_tool_calls" not in OpenAIBackend("m", parallel_tool_calls=None).request_body([], [{"type": "function"}], None, None)


@pytest.mark.parametrize("protocol", ["json", "native"])
def test_oversized_read_ends_in_a_forced_answer(agent_ctx, protocol, monkeypatch):
    """A read larger than the window left is cut with a note; the forced answer still happens and fits."""
    from arag.agent import loop

    monkeypatch.setattr(loop, "CONTEXT_MARGIN_TOKENS", 100)  # the test chunks are tiny: a small margin makes a read overflow
    read = {"tool": "chunk_read", "arguments": {"chunk_ids": ["0#0", "1#0", "1#1", "2#0", "3#0"]}}
    probe = Agent(ScriptedBackend([read, {"answer": "x"}]), load_method("arag_full"), agent_ctx, protocol=protocol, config=AgentConfig(max_steps=1, **FAST))
    probe.run("q?")
    start = probe.backend.requests and sum(len(m.content) // 4 + 4 for m in probe.backend.requests[0].messages)  # the scripted backend's count
    backend = ScriptedBackend([read, {"answer": "20 March 851"}], max_tokens=64)
    backend.context_window = window = start + 64 + 100 + 100  # room for part of the read
    a = Agent(backend, load_method("arag_full"), agent_ctx, protocol=protocol, config=AgentConfig(max_steps=5, **FAST))
    ep = a.run("q?")
    assert ep.status == ANSWERED and ep.forced and ep.forced_reason == "token_budget" and ep.answer == "20 March 851"
    assert ep.truncated_observations == 1 and "cut" in ep.guard_rail_events[0]
    # Retrieved tokens count what entered the context: the kept share of the read, not all of it.
    whole = agent_ctx.call("chunk_read", read["arguments"])
    record = ep.tool_calls[-1]
    assert 0 < record.retrieved_tokens < whole.retrieved_tokens and ep.retrieved_tokens == record.retrieved_tokens
    assert record.text.endswith(loop.TRUNCATION_NOTE) and len(record.text) < len(whole.text)
    # Evidence counts the chunks the model was shown: those whose header survived the cut, in order.
    shown = [c for c in read["arguments"]["chunk_ids"] if f"[chunk_id: {c} " in record.text]
    assert shown and record.chunk_ids == shown and len(shown) < len(read["arguments"]["chunk_ids"])
    final = backend.requests[-1]
    # the prompt of the forced call, as the backend counts it, leaves room for its reply
    assert len(backend.requests) == 2 and ep.model_calls[-1].final and ep.model_calls[-1].prompt_tokens + 64 <= window
    assert "did not fit" in final.messages[-2].content


def test_a_result_cut_at_the_budget_forces_the_answer_next(agent_ctx, monkeypatch):
    """A result cut because it would cross the budget ends the tool steps, as a result past the
    budget does in the authors' loop: the next step is the forced answer, though the cut (kept short
    of the ceiling for tokenizer slack) left the conversation a little under the budget."""
    from arag.agent import loop

    monkeypatch.setattr(loop, "CONTEXT_MARGIN_TOKENS", 0)  # the ceiling is the budget itself
    read = {"tool": "chunk_read", "arguments": {"chunk_ids": ["0#0", "1#0", "1#1", "2#0", "3#0"]}}
    probe = Agent(ScriptedBackend([read, {"answer": "x"}]), load_method("arag_full"), agent_ctx, protocol="native", config=AgentConfig(max_steps=1, **FAST))
    probe.run("q?")
    after_call = sum(len(m.content) // 4 + 4 for m in probe.backend.requests[0].messages) + 64  # the scripted backend's count, a reply's room
    whole = agent_ctx.call("chunk_read", read["arguments"]).text
    a = Agent(ScriptedBackend([read, {"answer": "x"}, {"answer": "y"}]), load_method("arag_full"), agent_ctx, protocol="native",
              config=AgentConfig(max_steps=5, token_budget=after_call + len(whole) // 8 + 100, **FAST))
    ep = a.run("q?")
    assert ep.truncated_observations == 1 and len(ep.tool_calls) == 1
    assert ep.forced and ep.forced_reason == "token_budget" and ep.steps == 1 and ep.answer == "x"


def test_tracker_is_per_episode(agent_ctx):
    read = {"tool": "chunk_read", "arguments": {"chunk_ids": ["0#0"]}}
    a, _ = agent([read, {"answer": "1"}, read, {"answer": "2"}], ctx=agent_ctx)
    first, second = a.run("q?"), a.run("q?")
    assert first.tool_calls[0].retrieved_tokens == second.tool_calls[0].retrieved_tokens > 0


def test_guard_rail_off_by_default_and_recorded(agent_ctx):
    a, _ = agent([{"answer": "early"}], ctx=agent_ctx)
    ep = a.run("q?")
    assert ep.answer == "early" and ep.guard_rails == {"require_read_before_answer": False, "max_refusals": 2, "tool_steps": 0, "shown_chunk_ids_only": False}


def test_guard_rail_refuses_answer_before_reading(agent_ctx):
    # a search's snippets are not a read: the answer is refused until chunk_read put a whole chunk in view
    search = {"tool": "keyword_search", "arguments": {"keywords": ["Teutberga"]}}
    script = [{"answer": "early"}, search, {"answer": "after search"}, {"tool": "chunk_read", "arguments": {"chunk_ids": ["0#0"]}}, {"answer": "late"}]
    a, _ = agent(script, ctx=agent_ctx, guard_rails=GuardRails(require_read_before_answer=True, max_refusals=3))
    ep = a.run("q?")
    assert ep.answer == "late" and len(ep.guard_rail_events) == 2 and ep.guard_rails["require_read_before_answer"]
    a, _ = agent([{"answer": "a1"}, {"answer": "a2"}], ctx=agent_ctx, guard_rails=GuardRails(require_read_before_answer=True, max_refusals=1))
    ep = a.run("q?")
    assert ep.answer == "a2" and len(ep.guard_rail_events) == 1


def test_script_exhausted_fails():
    a, _ = agent([], method="direct")
    ep = a.run("q?")
    assert ep.status == EPISODE_FAILED and "no more replies" in ep.failure


def test_episode_row_is_flat(agent_ctx):
    a, _ = agent([{"tool": "keyword_search", "arguments": {"keywords": ["Teutberga"]}}, {"answer": "ok"}], ctx=agent_ctx)
    row = a.run("q?").to_row()
    assert all(isinstance(v, (str, int, float, bool, type(None))) for v in row.values())
    assert json.loads(row["tool_calls"])[0]["name"] == "keyword_search" and row["prompt_tokens"] > 0


def test_method_needing_an_index_without_one():
    with pytest.raises(ValueError, match="needs an index"):
        agent([], method="arag_full")


def test_guard_rail_tool_steps_drops_the_answer_branch(agent_ctx):
    script = [{"tool": "keyword_search", "arguments": {"keywords": ["Teutberga"]}}, {"answer": "ok"}]
    a, backend = agent(script, ctx=agent_ctx, guard_rails=GuardRails(tool_steps=1))
    ep = a.run("q?")
    assert ep.answer == "ok" and ep.guard_rails["tool_steps"] == 1
    first, second = (r.response_schema["oneOf"] for r in backend.requests)
    assert all("tool" in b["properties"] for b in first) and any("answer" in b["properties"] for b in second)
    with pytest.raises(ValueError, match="json protocol"):
        agent([], ctx=agent_ctx, protocol="native", guard_rails=GuardRails(tool_steps=1))


def test_tool_calls_run_on_the_contexts_pool(agent_ctx):
    """The loop calls tools through ToolContext.acall (its bounded pool), not a thread each; a
    method with its own call_tool still gets it called."""
    import threading

    threads: list[str] = []
    real = agent_ctx.call

    def spy(*args, **kwargs):
        threads.append(threading.current_thread().name)
        return real(*args, **kwargs)

    agent_ctx.call = spy
    try:
        a, _ = agent([{"tool": "keyword_search", "arguments": ARGS["keyword_search"]}, {"answer": "x"}], ctx=agent_ctx)
        ep = a.run("q?")
        assert ep.status == ANSWERED and ep.tool_calls[0].error is None and "Lothair II" in ep.tool_calls[0].text
        assert threads and all(t.startswith("arag-tools") for t in threads)

        class OwnCall(type(load_method("arag_full"))):
            def call_tool(self, ctx, name, arguments, tracker):
                return ctx.call(name, {"keywords": ["Ermengarde"]}, tracker=tracker)

        method = load_method("arag_full")
        method.__class__ = OwnCall
        threads.clear()
        backend = ScriptedBackend([{"tool": "keyword_search", "arguments": ARGS["keyword_search"]}, {"answer": "x"}])
        ep = Agent(backend, method, agent_ctx, protocol="json", config=AgentConfig(max_steps=6, **FAST)).run("q?")
        assert "Ermengarde" in ep.tool_calls[0].text and threads and not threads[0].startswith("arag-tools")
    finally:
        del agent_ctx.call


def test_chunk_ids_shown_keeps_headers_inside_the_cut():
    from arag.agent.loop import chunk_ids_shown

    text = "[chunk_id: a#1 | previous: a#10 | next: none]\nalpha\n\n[chunk_id: a#10 | previous: a#1 | next: none]\nbeta"
    cut_at = text.index("beta")  # the second header is in view, its text is not: it was still shown
    assert chunk_ids_shown(["a#1", "a#10"], text, cut_at) == ["a#1", "a#10"]
    second = text.index("[chunk_id: a#10")
    # 'a#1' must not match inside 'a#10', nor a#10 inside the first header's 'previous: a#10'
    assert chunk_ids_shown(["a#1", "a#10"], text, second) == ["a#1"]
    assert chunk_ids_shown(["doc-line-chunk"], text, 0) == ["doc-line-chunk"]  # no header: kept
