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

    backend = LlamaCppBackend("qwen2.5-coder-1.5b-instruct", n_ctx=4096, max_tokens=96)
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
