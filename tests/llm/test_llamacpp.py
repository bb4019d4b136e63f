"""The embedded CPU default (llama-cpp-python + Qwen2.5-Coder-1.5B-Instruct) running real episodes on
the tiny index. Slow: loading the model and decoding on CPU take minutes on 2 cores."""

from __future__ import annotations

import json

import pytest

from arag.agent import ANSWERED, Agent, AgentConfig
from arag.methods import load_method

llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install -e '.[llamacpp]')")

pytestmark = pytest.mark.slow

METHODS = ["direct", "naive_rag", "arag_naive", "arag_full", "arag_no_keyword", "arag_no_semantic", "arag_no_chunk_read"]


@pytest.fixture(scope="module")
def embedded():
    from arag.llm.llamacpp import LlamaCppBackend

    # 400 tokens per reply: room for the longest action the grammar allows in practice (a chunk_read of
    # dozens of ids); a reply cut by the cap is not valid JSON, which the episode tests count as invalid.
    backend = LlamaCppBackend("qwen2.5-coder-1.5b-instruct", n_ctx=4096, max_tokens=400)
    yield backend
    backend.close()


def test_grammar_constrained_action(embedded):
    from arag.agent.protocols import JsonProtocol, ToolAction, describe_actions
    from arag.llm.types import Message

    schemas = load_method("arag_full").tool_schemas()
    protocol = JsonProtocol()
    completion = embedded.complete(
        [Message("system", "Call keyword_search to look up Lothair II.\n" + describe_actions(schemas)), Message("user", "Who was Lothair II?")],
        **protocol.request(schemas),
    )
    (action,) = protocol.parse(completion)
    assert not hasattr(action, "reason"), completion.text  # the grammar makes the reply a valid action
    assert completion.prompt_tokens and completion.completion_tokens
    if isinstance(action, ToolAction):
        assert action.name in ("keyword_search", "semantic_search", "chunk_read") and isinstance(action.arguments, dict)


def test_a_cap_larger_than_the_window_is_the_windows_remainder(embedded):
    """The paper's 16,384-token reply cap (a null max_tokens) in this 4,096-token window: the
    library cuts it to what the window has left after the prompt instead of refusing the call."""
    from arag.llm.base import PAPER_REPLY_TOKENS
    from arag.llm.types import Message

    schema = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 20}}, "required": ["answer"]}
    completion = embedded.complete([Message("user", 'Reply {"answer": "yes"}.')], response_schema=schema, max_tokens=PAPER_REPLY_TOKENS)
    assert PAPER_REPLY_TOKENS > embedded.context_window and json.loads(completion.text)["answer"]
    assert completion.prompt_tokens + completion.completion_tokens <= embedded.context_window


@pytest.mark.parametrize("method", METHODS)
def test_every_method_runs_a_real_episode(embedded, agent_ctx, method):
    agent = Agent(embedded, load_method(method), agent_ctx, protocol="json", config=AgentConfig(max_steps=2, llm_attempts=1))
    ep = agent.run("When did Lothair II's mother die?", question_id=method)
    assert ep.status == ANSWERED, ep.failure
    assert isinstance(ep.answer, str) and ep.model_calls and all(m.error is None for m in ep.model_calls)
    # Every reply was grammar-constrained, so every step is a valid action.
    assert ep.invalid_replies == 0, [m.raw for m in ep.model_calls]
    json.dumps(ep.to_json())
    if method not in ("direct", "naive_rag") and not ep.forced:
        assert ep.steps >= 1


def test_the_tool_step_guard_rail_makes_the_model_search(embedded, agent_ctx):
    """The episodes above pass whether or not the model calls a tool. Here the guard rail
    (`agent.guard_rails.tool_steps=1`) takes the answer branch out of the first step's grammar, so the
    model must call a tool: the tool really ran over the index and its result reached the model."""
    config = AgentConfig.from_dict({"max_steps": 3, "llm_attempts": 1, "guard_rails": {"tool_steps": 1}})
    agent = Agent(embedded, load_method("arag_full"), agent_ctx, protocol="json", config=config)
    ep = agent.run("When did Lothair II's mother die?", question_id="guarded")
    assert ep.status == ANSWERED and ep.guard_rails["tool_steps"] == 1, ep.failure
    first = ep.tool_calls[0] if ep.tool_calls else None
    assert first is not None and first.step == 1, [m.raw for m in ep.model_calls]
    assert first.name in ("keyword_search", "semantic_search", "chunk_read") and first.error is None, first
    assert first.retrieved_tokens > 0 and first.text.strip(), first  # it returned content from the index
    assert ep.model_calls[1].prompt_tokens > ep.model_calls[0].prompt_tokens  # the result went into the next prompt


def test_every_methods_action_grammar_compiles_and_bounds_a_search_query(embedded):
    """llama.cpp's grammar parser recurses once per character of a string's maxLength and crashes the
    process (SIGSEGV) past ~1,000: every tool's bounds must compile, and the search query bound (300)
    must reach the grammar, so a looping query is closed by it."""
    from arag.agent.protocols import JsonProtocol, ToolAction, describe_actions
    from arag.llm.types import Message

    protocol = JsonProtocol()
    for method in ("agenticrag", "arag_full", "arag_naive"):
        schemas = load_method(method).tool_schemas()
        embedded._grammar(protocol.request(schemas)["response_schema"])  # compiles without crashing
    schemas = [s for s in load_method("agenticrag").tool_schemas() if s["function"]["name"] == "search"]
    ask = "Call search with five queries; make each query an extremely long, ever more detailed question about who was doomed to empty Dozmare Pool."
    # search is the one action the grammar leaves (no answer), so the bound is checked on every run
    completion = embedded.complete([Message("system", ask + "\n" + describe_actions(schemas)), Message("user", "Who emptied Dozmare Pool?")], max_tokens=1000, **protocol.request(schemas, allow_answer=False))  # room for five 300-character queries
    (action,) = protocol.parse(completion)
    assert isinstance(action, ToolAction) and action.name == "search", completion.text
    assert action.arguments["queries"] and all(len(q) <= 300 for q in action.arguments["queries"])
