"""The OpenAI backend lets as many requests through as its limit says, over a real socket, and a call's
wait for one of its slots is not counted as time at the model."""

from __future__ import annotations

import asyncio

import pytest

httpx = pytest.importorskip("httpx", reason="the openai backend needs httpx")

from arag.agent import Agent, AgentConfig  # noqa: E402
from arag.llm.openai import OpenAIBackend  # noqa: E402
from arag.llm.types import Message  # noqa: E402
from arag.methods import load_method  # noqa: E402
from tests.support.model_server import fixed_latency, serve  # noqa: E402

FAST = AgentConfig(max_steps=2, llm_attempts=1)


def test_requests_in_flight_reach_the_limit_past_httpx_default_pool():
    """128 requests at once reach the endpoint: httpx's default pool (100 connections) would hold
    28 of them back whatever the backend's limit."""
    server = fixed_latency(0.0, hold_until=128, hold_timeout_s=60.0)
    with serve(server) as base:
        backend = OpenAIBackend("m", base_url=base, max_concurrency=128)

        async def all_at_once():
            return await asyncio.gather(*(backend.acomplete([Message("user", f"q{i}")]) for i in range(128)))

        replies = asyncio.run(all_at_once())
    assert len(replies) == 128 and server.stats.peak_in_flight == 128


def test_a_large_limit_is_spread_over_clients_of_a_few_connections():
    """httpx's pool costs CPU in proportion to its connections on every request: 256 slots are 16
    clients of 16 connections, each lent to at most 16 requests at once."""
    server = fixed_latency(0.0, hold_until=256, hold_timeout_s=60.0)
    with serve(server) as base:
        backend = OpenAIBackend("m", base_url=base, max_concurrency=256)

        async def all_at_once():
            slots = backend._session()
            return slots, await asyncio.gather(*(backend.acomplete([Message("user", f"q{i}")]) for i in range(256)))

        slots, replies = asyncio.run(all_at_once())
    assert len(replies) == 256 and server.stats.peak_in_flight == 256
    assert len(backend._clients) == 16 and all(c._transport._pool._max_connections == 16 for c in backend._clients)


def test_a_null_limit_is_the_default_eight():
    assert OpenAIBackend("m", max_concurrency=None).max_concurrency == 8 == OpenAIBackend("m").max_concurrency


def test_llm_s_leaves_out_the_wait_for_a_backend_slot():
    answer = {"choices": [{"message": {"role": "assistant", "content": "x"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}
    backend = OpenAIBackend("m", base_url="http://fake/v1", transport=httpx.MockTransport(lambda request: httpx.Response(200, json=answer)), max_concurrency=1)
    agent = Agent(backend, load_method("direct"), protocol="native", config=FAST)

    async def with_the_slot_held():
        slots = backend._session()
        async with slots.take():  # another episode's request holds the only slot
            episode = asyncio.create_task(agent.arun("q?"))
            while not slots._free._getters:  # the episode's first request is waiting for the slot (asyncio.Queue's waiters)
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.3)
        return await episode

    episode = asyncio.run(with_the_slot_held())
    call = episode.model_calls[0]
    assert episode.answer == "x" and call.queued_s >= 0.3
    assert call.latency_s + call.queued_s <= episode.wall_s and call.latency_s <= episode.wall_s - 0.3
