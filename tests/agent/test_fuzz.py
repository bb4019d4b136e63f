"""A fuzzed stream of malformed model outputs never crashes the loop: every episode ends answered or
failed, with a JSON-able record."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arag.agent import ANSWERED, EPISODE_FAILED, Agent, AgentConfig
from arag.llm.scripted import ScriptedBackend
from arag.llm.types import Completion, LLMError, ToolCall
from arag.methods import load_method

TOOL_NAMES = ["keyword_search", "semantic_search", "chunk_read", "naive_embedding_search", "", "web_search", "chunk_read\x00", "ключ"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
arguments = st.one_of(
    st.fixed_dictionaries({"keywords": json_values}),
    st.fixed_dictionaries({"query": json_values, "top_k": json_values}),
    st.fixed_dictionaries({"chunk_ids": st.lists(st.sampled_from(["0#0", "1#1", "9#9", "", "0#-1"]) | st.text(max_size=10), max_size=4)}),
    st.dictionaries(st.text(max_size=8), json_values, max_size=3),
    json_values,
)
actions = st.one_of(
    st.fixed_dictionaries({"tool": st.sampled_from(TOOL_NAMES) | st.text(max_size=12), "arguments": arguments}),
    st.fixed_dictionaries({"answer": json_values}),
    st.dictionaries(st.sampled_from(["tool", "arguments", "answer", "thought"]), json_values, max_size=3),
)
raw_text = st.one_of(
    st.text(max_size=80),
    actions.map(lambda a: json.dumps(a)),
    actions.map(lambda a: json.dumps(a)[: len(json.dumps(a)) // 2]),  # truncated JSON
    st.just("[" * 2000),  # deep nesting
    st.just('{"answer": "\\ud800"}'),
    st.sampled_from(["", "   ", "null", "```json\n{}\n```", '{"answer": 5}', '{"tool": "chunk_read"}']),
)
completions = st.builds(
    Completion,
    text=st.text(max_size=40) | st.none(),
    tool_calls=st.lists(
        st.builds(ToolCall, name=st.sampled_from(TOOL_NAMES) | st.text(max_size=10), arguments=raw_text, id=st.text(max_size=5)),
        max_size=3,
    ),
    prompt_tokens=st.none() | st.integers(0, 10**6),
    completion_tokens=st.none() | st.integers(0, 10**6),
)
errors = st.sampled_from([LLMError("timeout"), LLMError("fatal", retryable=False), ValueError("bug")])
script_items = st.one_of(raw_text, actions, st.lists(actions, max_size=3), completions, errors)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    script=st.lists(script_items, max_size=6),
    protocol=st.sampled_from(["json", "native"]),
    method=st.sampled_from(["arag_full", "arag_no_chunk_read", "arag_naive", "direct"]),
)
def test_malformed_outputs_never_crash(agent_ctx, script, protocol, method):
    config = AgentConfig(max_steps=3, token_budget=4000, llm_attempts=2, backoff_initial_s=0, backoff_max_s=0, backoff_jitter_s=0)
    agent = Agent(ScriptedBackend(script), load_method(method), agent_ctx, protocol=protocol, config=config)
    ep = agent.run("Who was the mother of Lothair II?")
    assert ep.status in (ANSWERED, EPISODE_FAILED)
    if ep.status == ANSWERED:
        assert isinstance(ep.answer, str)
    else:
        assert ep.answer is None and ep.failure
    assert ep.steps <= 3 and len(ep.model_calls) <= 4
    json.dumps(ep.to_json(), default=str)
    ep.to_row()
