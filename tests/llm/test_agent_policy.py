"""tests/support/agent_policy.py: the stand-in model server's three presets (simulated_vllm,
fixed_latency, openai_endpoint in tests/support/model_server.py) choose their actions with the one
policy: the same conversation gets the same next action from each where their options agree."""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("starlette", reason="the stand-in servers run on Starlette (the serve extra)")

from tests.support import model_server  # noqa: E402
from tests.support.agent_policy import AgentPolicy  # noqa: E402


def tool(name: str, properties: dict) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": properties, "required": list(properties)}}}


TOOLS = [tool("keyword_search", {"keywords": {"type": "array", "items": {"type": "string"}}}),
         tool("chunk_read", {"chunk_ids": {"type": "array", "items": {"type": "string"}}})]
QUESTION = "Who was the mother of Lothair II?"
SEARCH = {"tool": "keyword_search", "arguments": {"keywords": ["Lothair II", "mother"]}}
FOUND = "Chunk ID: 7#0, Matched keywords in chunk: Lothair II ... <s1> Teutberga ..."
READ = {"tool": "chunk_read", "arguments": {"chunk_ids": ["7#0"]}}


def sim(body: dict) -> dict:
    return asyncio.run(model_server.simulated_vllm(time_scale=1e-6).complete(body))["choices"][0]["message"]


def mock(body: dict) -> dict:
    """Through the HTTP app, so the OpenAI rules apply (a refused request fails the test)."""
    import httpx

    async def post():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=model_server.openai_endpoint()), base_url="http://mock") as client:
            return await client.post("/v1/chat/completions", json=body)

    reply = asyncio.run(post())
    assert reply.status_code == 200, reply.text
    return reply.json()["choices"][0]["message"]


def endpoint(body: dict) -> dict:
    return asyncio.run(model_server.fixed_latency(0.0).complete(body))["choices"][0]["message"]


SERVERS = {"simulated_vllm": sim, "fixed_latency": endpoint, "openai_endpoint": mock}


def action(message: dict) -> dict:
    """The action a reply message carries, in either protocol."""
    if message.get("tool_calls"):
        call = message["tool_calls"][0]["function"]
        return {"tool": call["name"], "arguments": json.loads(call["arguments"])}
    text = message["content"]
    return json.loads(text) if text.startswith("{") else {"answer": text}


def native(*turns: dict) -> dict:
    return {"model": "gpt-4o-mini", "tools": TOOLS, "messages": [{"role": "system", "content": "Use the tools."}, {"role": "user", "content": QUESTION}, *turns]}


def called(step: dict, n: int) -> list[dict]:
    call = {"id": f"c{n}", "type": "function", "function": {"name": step["tool"], "arguments": json.dumps(step["arguments"])}}
    return [{"role": "assistant", "content": None, "tool_calls": [call]}, {"role": "tool", "tool_call_id": f"c{n}", "content": FOUND}]


def test_the_servers_use_the_one_policy_with_their_options():
    assert model_server.simulated_vllm().policy == AgentPolicy()
    assert model_server.fixed_latency().policy == AgentPolicy(plan=("keyword_search", "chunk_read"), answer="20 March 851")
    assert model_server.openai_endpoint().policy == AgentPolicy(max_tool_calls=1, answer=model_server.OPENAI_POLICY.answer)


@pytest.mark.parametrize("server", sorted(SERVERS))
def test_the_same_conversation_gets_the_same_first_action_and_verdict_from_each_server(server):
    ask = SERVERS[server]
    assert action(ask(native())) == SEARCH
    judge = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Is it right?"}],
             "response_format": {"type": "json_schema", "json_schema": {"name": "verdict", "schema": {"type": "object", "properties": {"verdict": {"type": "string"}}}}}}
    assert action(ask(judge)) == {"verdict": "correct"}


def test_the_servers_differ_only_where_their_options_do():
    after_search = native(*called(SEARCH, 1))
    # Both call every planned tool (the simulator's plan is every offered tool, here the same two) ...
    assert action(sim(after_search)) == action(endpoint(after_search)) == READ
    # ... while the mock stops at one tool call, with its own answer text.
    assert action(mock(after_search)) == {"answer": model_server.OPENAI_POLICY.answer}
    after_read = native(*called(SEARCH, 1), *called(READ, 2))
    assert action(endpoint(after_read)) == {"answer": model_server.FIXED_POLICY.answer}
    assert action(sim(after_read)) == {"answer": f"Simulated answer to: {QUESTION}"}


def test_the_plan_orders_and_limits_the_calls():
    policy = AgentPolicy(plan=("chunk_read", "no_such_tool"))
    assert policy.next_action(native())["tool"] == "chunk_read"  # planned first, though offered second
    assert "answer" in policy.next_action(native(*called(READ, 1)))  # keyword_search is not in the plan
    assert "answer" in AgentPolicy(max_tool_calls=0).next_action(native())


def test_the_json_protocol_gets_the_same_actions_as_json_objects():
    branches = [{"type": "object", "properties": {"tool": {"const": t["function"]["name"]}, "arguments": t["function"]["parameters"]}} for t in TOOLS]
    branches.append({"type": "object", "properties": {"answer": {"type": "string"}}})
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": QUESTION}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "action", "schema": {"oneOf": branches}}}}
    for ask in (sim, endpoint, mock):
        message = ask(body)
        assert not message.get("tool_calls") and json.loads(message["content"]) == SEARCH
