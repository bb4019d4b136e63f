"""The vllm backend for real: vLLM's CPU build serving the packaged Qwen2.5-Coder-0.5B (converted from
its GGUF) in a Ray actor, running agent episodes over the tiny index, several at once.

Slow, and only where vLLM is installed (a separate environment made by `cluster/install_vllm.sh cpu`,
as CI does); skipped otherwise. The engine starts once per module (about a minute on 2 cores).
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from arag.agent import ANSWERED, Agent, AgentConfig
from arag.agent.protocols import JsonProtocol, describe_actions, json_action_schema
from arag.llm.types import Message
from arag.methods import load_method

pytest.importorskip("vllm", reason="vLLM is not installed (its own environment: cluster/install_vllm.sh cpu)")

pytestmark = pytest.mark.slow

MODEL = "qwen2.5-coder-0.5b-instruct-q4"
SETTINGS = dict(dtype="float32", max_model_len=4096, kv_cache_gb=1, enforce_eager=True, max_num_seqs=8, max_tokens=96, num_cpus=1)
QUESTIONS = ["When did Lothair II's mother die?", "Who directed Phoolwari?", "Who was Teutberga married to?", "When did Lothair II die?"]


@pytest.fixture(scope="module")
def engine():
    from arag.llm.models import ModelUnavailable
    from arag.llm.vllm import VLLMBackend
    from arag.runtime import vllm_engine  # noqa: F401  (connects the backend to its Ray engine actors)
    from arag.runtime.cluster import init_ray

    init_ray(num_cpus=2)

    try:
        backend = VLLMBackend(MODEL, **SETTINGS)
        backend.model_path()  # converts the GGUF once (cached)
    except ModelUnavailable as exc:
        pytest.skip(str(exc))
    info = backend.start()
    assert info["max_model_len"] == 4096
    yield backend
    backend.close()


def test_structured_action_and_token_counts(engine):
    schemas = load_method("arag_full").tool_schemas()
    completion = engine.complete(
        [Message("system", "Call keyword_search to look up Lothair II.\n" + describe_actions(schemas)), Message("user", "Who was Lothair II?")],
        **JsonProtocol().request(schemas),
    )
    (action,) = JsonProtocol().parse(completion)
    assert completion.prompt_tokens > 100 and 0 < completion.completion_tokens <= 96
    if completion.finish_reason == "length":
        # Guided decoding keeps every token on the action schema, but a reply cut at max_tokens
        # is an unfinished action (the 0.5B model may answer at length instead of calling the tool).
        assert completion.completion_tokens == 96 and completion.text.startswith('{"'), completion.text
    else:
        assert not hasattr(action, "reason"), completion.text  # a finished reply is a valid action


def test_real_episode_json_protocol(engine, agent_ctx):
    agent = Agent(engine, load_method("arag_full"), agent_ctx, protocol="json", config=AgentConfig(max_steps=3, llm_attempts=1))
    ep = agent.run(QUESTIONS[0], question_id="q0")
    assert ep.status == ANSWERED, ep.failure
    assert isinstance(ep.answer, str) and ep.model_calls and all(m.error is None and m.prompt_tokens for m in ep.model_calls)
    assert ep.invalid_replies == 0, [m.raw for m in ep.model_calls]
    assert ep.backend["backend"] == "vllm" and ep.backend["actor"] == engine.actor_name
    json.dumps(ep.to_json())


def test_concurrent_episodes_share_one_actor(engine, agent_ctx):
    """Several episodes in flight on one engine (two backends, one actor): all answer, batched together."""
    import ray

    from arag.llm.vllm import VLLMBackend

    other = VLLMBackend(MODEL, **SETTINGS)  # same settings: the same actor, no second engine
    assert other.start()["pid"] == engine.start()["pid"] and other.actor_name == engine.actor_name
    config = AgentConfig(max_steps=2, llm_attempts=1)
    agents = [Agent(b, load_method("arag_full"), agent_ctx, protocol="json", config=config) for b in (engine, other)]

    t = time.perf_counter()
    sequential = [agents[0].run(q, question_id=f"s{i}") for i, q in enumerate(QUESTIONS)]
    sequential_s = time.perf_counter() - t

    async def together():
        return await asyncio.gather(*(agents[i % 2].arun(q, question_id=f"c{i}") for i, q in enumerate(QUESTIONS)))

    actor = engine.connection().handle
    assert ray.get(actor.stats.remote(reset_peak=True))["peak_inflight"] == 1  # the sequential run: one at a time
    assert ray.get(actor.stats.remote())["peak_inflight"] == 0
    t = time.perf_counter()
    concurrent = asyncio.run(together())
    concurrent_s = time.perf_counter() - t
    stats = ray.get(actor.stats.remote())
    other.close()
    for ep in sequential + concurrent:
        assert ep.status == ANSWERED and ep.invalid_replies == 0, (ep.failure, [m.raw for m in ep.model_calls])
    tokens = lambda eps: sum((m.prompt_tokens or 0) + (m.completion_tokens or 0) for ep in eps for m in ep.model_calls)  # noqa: E731
    print(f"\n{len(QUESTIONS)} episodes: sequential {sequential_s:.1f}s ({tokens(sequential)} tokens), concurrent {concurrent_s:.1f}s ({tokens(concurrent)}), peak {stats['peak_inflight']} requests in flight")
    # The episodes' requests were in the engine together (one batch), not queued one by one; what that
    # saves in wall time is the benchmark's to measure (benchmarks/vllm_actors.py), not a test's.
    assert stats["peak_inflight"] >= 2 and stats["inflight"] == 0


def test_native_tool_calls_go_through_the_hermes_parser(engine):
    tools = load_method("arag_full").tool_schemas()
    completion = engine.complete(
        [Message("system", "You answer questions using the tools."), Message("user", "Search the collection for the keyword 'Lothair II'.")], tools=tools, max_tokens=80
    )
    assert completion.prompt_tokens > 100
    for call in completion.tool_calls:  # a 0.5B model may also just answer; any call must be parsed
        assert call.name and isinstance(json.loads(call.arguments), dict)
    assert completion.tool_calls or completion.text


def test_thinking_budget_two_phases_on_the_real_engine(engine):
    """The two-phase generation the Qwen3 mapping uses, run on the real engine with a tiny budget."""
    import ray

    schema = json_action_schema([])
    req = engine.request([Message("user", "Is 851 before 869? Reply in JSON.")], None, schema, 32)
    req.update(thinking=True, thinking_budget=12)
    reply = ray.get(engine.connection().handle.chat.remote(req), timeout=600)
    assert not reply.get("error"), reply
    assert reply["reasoning"] is not None and 0 < reply["reasoning_tokens"] <= 12 + 8
    assert "answer" in json.loads(reply["text"])  # the answer phase is still schema-constrained
