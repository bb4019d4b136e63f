"""tests/support/model_server.py with the simulated vLLM engine (tests/support/engine_model.py): its
latency model, and real agent episodes through the openai backend against it over HTTP (every
offered tool called, then an answer)."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
from omegaconf import OmegaConf

pytest.importorskip("starlette", reason="the simulator runs on Starlette + uvicorn (the serve extra)")
pytest.importorskip("uvicorn", reason="the simulator runs on Starlette + uvicorn (the serve extra)")

from arag.agent import ANSWERED, Agent, AgentConfig  # noqa: E402
from arag.config.files import conf_dir  # noqa: E402
from arag.llm.factory import make_backend  # noqa: E402
from arag.methods import load_method  # noqa: E402
from tests.support.agent_policy import AgentPolicy, keywords_of  # noqa: E402
from tests.support.engine_model import EngineModel  # noqa: E402
from tests.support.model_server import ModelServer, serve  # noqa: E402

next_action = AgentPolicy().next_action

FAST = AgentConfig(max_steps=8, llm_attempts=2, backoff_initial_s=0, backoff_max_s=0, backoff_jitter_s=0)
QUESTIONS = ["Who was the mother of Lothair II?", "When did Teutberga die?", "Who directed Phoolwari?"]


def test_latency_model_follows_batch_size_and_prefix_hits():
    m = EngineModel()
    assert m.decode_s(100, running=200) > m.decode_s(100, running=20) > m.decode_s(100, running=1)
    assert m.decode_s(100, running=10_000) == m.decode_s(100, running=m.max_num_seqs)  # no more than max_num_seqs run at once
    assert m.prefill_s(4000, cached_tokens=3000) < m.prefill_s(4000, cached_tokens=0)
    assert m.prefill_s(4000, cached_tokens=4000) == 0
    assert m.cached(47) == 32  # whole 16-token blocks only
    # Ideal throughput: grows with episodes in flight up to the slots, then stays at the slot bound.
    ideal = [m.ideal_episodes_per_min(n, 4, 50, 60) for n in (16, 128, 256, 1024)]
    assert ideal[0] < ideal[1] < ideal[2] == ideal[3]
    # The prefill bound: huge uncached prompts cap it at prefill_tps / tokens per episode.
    assert m.ideal_episodes_per_min(256, 4, 100_000, 60) == pytest.approx(60 * m.prefill_tps / (4 * 100_000))


def _body(messages, tools=None):
    body = {"model": "sim", "messages": messages}
    if tools:
        body["tools"] = tools
    return body


def test_an_episode_next_request_hits_the_prefix_cache():
    engine = ModelServer(EngineModel(max_num_seqs=4), time_scale=1e-6)
    tools = [{"type": "function", "function": {"name": "keyword_search", "parameters": {"type": "object", "properties": {"keywords": {"type": "array", "items": {"type": "string"}}}}}}]
    first = [{"role": "system", "content": "You answer questions. " * 200}, {"role": "user", "content": "Who was the mother of Lothair II?"}]

    async def go():
        r1 = await engine.complete(_body(first, tools))
        reply = r1["choices"][0]["message"]
        assert reply["tool_calls"][0]["function"]["name"] == "keyword_search"
        # The client sends the reply back (content "" instead of null) with the tool result.
        second = first + [{**reply, "content": ""}, {"role": "tool", "tool_call_id": reply["tool_calls"][0]["id"], "content": "[1] chunk_id: 1#0 | score 1"}]
        r2 = await engine.complete(_body(second, tools))
        return r1["usage"], r2

    u1, r2 = asyncio.run(go())
    assert u1["prompt_tokens_details"]["cached_tokens"] == 0
    cached = r2["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert cached >= u1["prompt_tokens"] - engine.latency.block_tokens  # the whole first request (in whole blocks) and its reply
    assert r2["choices"][0]["message"]["content"].startswith("Simulated answer")  # every tool called: it answers
    s = engine.snapshot(episodes_in_flight=8)
    assert s["requests"] == 2 and s["episodes_started"] == 1 and s["episodes_answered"] == 1 and s["tool_calls"] == {"keyword_search": 1}
    assert s["ideal"]["calls_per_episode"] == 2 and s["ideal"]["episodes_per_min"] > 0


def test_json_protocol_actions_come_from_the_response_schema():
    schema = {"oneOf": [
        {"type": "object", "properties": {"tool": {"const": "search"}, "arguments": {"type": "object", "properties": {"queries": {"type": "array"}}}}},
        {"type": "object", "properties": {"tool": {"const": "open"}, "arguments": {"type": "object"}}},
        {"type": "object", "properties": {"answer": {"type": "string"}}},
    ]}
    body = {"messages": [{"role": "user", "content": "Who directed Phoolwari?"}], "response_format": {"type": "json_schema", "json_schema": {"name": "action", "schema": schema}}}
    assert next_action(body) == {"tool": "search", "arguments": {"queries": ["Who directed Phoolwari?"]}}
    body["messages"] += [{"role": "assistant", "content": json.dumps(next_action(body))}, {"role": "user", "content": "Result of search:\n[turn1search1] Phoolwari | document: 3 | lines 0-2"}]
    assert next_action(body) == {"tool": "open", "arguments": {"ref_id": "turn1search1", "line": 0}}
    body["messages"] += [{"role": "assistant", "content": json.dumps(next_action(body))}, {"role": "user", "content": "Result of open:\n0: Phoolwari"}]
    assert next_action(body)["answer"].endswith("Citations: turn1search1 (0.9)")
    schema["oneOf"].pop()  # a tool-only step (guard_rails.tool_steps): no answer branch
    assert next_action(body)["tool"] == "search"


def openai_backend(base_url: str):
    """`model=openai` as Hydra composes it, pointed at the simulator."""
    cfg = OmegaConf.to_container(OmegaConf.load(conf_dir() / "model" / "openai.yaml"))
    cfg.update(base_url=base_url, model="simulated", api_key_env=None)
    cfg.pop("protocol")
    return make_backend(cfg)


@pytest.mark.parametrize("method, protocol, tools", [
    ("arag_full", "native", {"keyword_search", "semantic_search", "chunk_read"}),
    ("arag_full", "json", {"keyword_search", "semantic_search", "chunk_read"}),
    ("agenticrag", "native", {"search", "find", "open", "summarize"}),
])
def test_real_episodes_call_every_tool_then_answer(agent_ctx, method, protocol, tools):
    with serve(ModelServer(time_scale=0.001)) as base_url:
        backend = openai_backend(base_url)
        agent = Agent(backend, load_method(method), agent_ctx, protocol=protocol, config=FAST)

        async def episodes():
            return await asyncio.gather(*(agent.arun(q) for q in QUESTIONS))

        eps = asyncio.run(episodes())
        backend.close()
        stats = httpx.get(base_url.removesuffix("/v1") + "/stats", params={"episodes_in_flight": 3}).json()
    for ep in eps:
        assert ep.status == ANSWERED and ep.answer.startswith("Simulated answer"), ep.failure
        assert {c.name for c in ep.tool_calls} == tools
        assert all(not c.error for c in ep.tool_calls), [c.error for c in ep.tool_calls]  # ids taken from earlier results are real
        assert sum(c.retrieved_tokens for c in ep.tool_calls) > 0
    calls = sum(len(ep.model_calls) for ep in eps)
    assert stats["requests"] == calls == len(QUESTIONS) * (len(tools) + 1)
    assert stats["episodes_started"] == stats["episodes_answered"] == len(QUESTIONS)
    assert stats["tool_calls"] == {t: len(QUESTIONS) for t in tools}
    assert 1 <= stats["peak_in_flight"] <= len(QUESTIONS) and stats["in_flight"] == 0
    assert stats["cached_tokens"] > 0  # later steps reuse the conversation's prefix
    assert stats["ideal"]["calls_per_episode"] == len(tools) + 1


def test_keywords_are_names_titles_and_a_relation_as_the_tool_description_asks():
    assert keywords_of("Who was the mother of Lothair II?") == ["Lothair II", "mother"]
    assert keywords_of("Are both films, Interview With A Vampire and The Last Coupon, from the same country?") == ["Interview With A", "The Last Coupon", "country"]
    assert keywords_of("Which film came out first, Blood Street or Phoolwari?") == ["Blood Street", "Phoolwari"]
    # No lone short word (scored on every chunk) unless the question has nothing else.
    for question in ("When did the director of film Me And Bobby die?", "Where was the performer of It born?"):
        keywords = keywords_of(question)
        assert keywords and all(len(k) >= 3 for k in keywords), keywords
    assert keywords_of("why?") == ["why"]


def test_a_request_whose_client_gave_up_is_aborted():
    """As vLLM aborts a disconnected request: it leaves the engine (no slot held, no reply counted),
    so clients' timeouts and retries do not fill the engine with calls no episode reads."""
    engine = ModelServer(EngineModel(max_num_seqs=1), time_scale=1.0)  # engine seconds are wall seconds
    body = {"model": "m", "messages": [{"role": "user", "content": "Who directed Lothair II? " + "x" * 400_000}]}  # ~100k tokens: seconds of prefill
    with serve(engine) as base_url:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(base_url + "/chat/completions", json=body, timeout=httpx.Timeout(0.5, connect=5))
        stats_url = base_url.removesuffix("/v1") + "/stats"
        deadline = time.monotonic() + 10
        while (stats := httpx.get(stats_url).json())["in_flight"] and time.monotonic() < deadline:
            time.sleep(0.05)
    assert stats["aborted"] == 1 and stats["in_flight"] == 0 and stats["running"] == 0
    assert stats["requests"] == 1 and stats["episodes_answered"] == 0 and stats["completion_tokens"] == 0


def test_every_preset_answers_over_the_same_http_surface():
    """One server whatever its latency: OpenAI's error JSON for an unknown path or a refused request,
    the same statistics, a fixed latency's service time its seconds."""
    from tests.support.model_server import FixedLatency, fixed_latency, openai_endpoint

    async def talk(server):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=server), base_url="http://stand-in") as client:
            missing = await client.get("/v1/nothing")
            refused = await client.post("/v1/chat/completions", json={"model": "gpt-5-mini", "messages": [], "max_tokens": 5})
            answered = await client.post("/v1/chat/completions", json={"model": "gpt-5-mini", "messages": [{"role": "user", "content": "Who?"}]})
            return missing, refused, answered, (await client.get("/stats")).json()

    missing, refused, answered, stats = asyncio.run(talk(server := openai_endpoint()))
    assert missing.status_code == 404 and missing.json()["error"]["message"] == "Invalid URL (GET /v1/nothing)"
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "max_tokens" and [p for p, _ in server.refused] == ["max_tokens"]
    assert answered.status_code == 200 and answered.json()["choices"][0]["message"]["content"].startswith("It was on 20 March 851")
    assert stats["requests"] == 2 and stats["refused"] == 1 and stats["episodes_answered"] == 1 and len(server.requests) == 2
    fixed = fixed_latency(0.01)
    asyncio.run(fixed.complete({"messages": [{"role": "user", "content": "Who?"}]}))
    s = fixed.snapshot(episodes_in_flight=1)
    assert s["latency"] == {"kind": "FixedLatency", "seconds": 0.01} and s["service_s"] == 0.01 and "ideal" not in s
    assert s["first_at"] is not None and s["prompt_tokens"] > 0 and isinstance(fixed.latency, FixedLatency)
