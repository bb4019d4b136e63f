"""The OpenAI-compatible backend against an in-process fake endpoint (httpx.MockTransport)."""

from __future__ import annotations

import json

import pytest

httpx = pytest.importorskip("httpx", reason="the openai backend needs httpx")

from arag.agent import ANSWERED, EPISODE_FAILED, Agent, AgentConfig  # noqa: E402
from arag.llm.openai import OpenAIBackend  # noqa: E402
from arag.llm.types import ConfigurationError, LLMError, Message  # noqa: E402
from arag.methods import load_method  # noqa: E402

FAST = AgentConfig(max_steps=4, llm_attempts=3, backoff_initial_s=0, backoff_max_s=0, backoff_jitter_s=0)


def reply(content=None, tool_calls=None, usage=(10, 5)):
    message = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [{"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": a}} for i, (n, a) in enumerate(tool_calls)]
    return {"choices": [{"message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}], "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "completion_tokens_details": {"reasoning_tokens": 3}}}


def backend(responses, seen, **kw):
    queue = list(responses)

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append((request, json.loads(request.content)))
        item = queue.pop(0)
        if isinstance(item, Exception):
            raise item
        if isinstance(item, int):
            return httpx.Response(item, text="overloaded")
        return httpx.Response(200, json=item)

    return OpenAIBackend("my-model", base_url="http://fake/v1", transport=httpx.MockTransport(handle), **kw)


def test_native_episode_and_request_shape(agent_ctx, monkeypatch):
    monkeypatch.setenv("MY_KEY", "sk-test")
    seen = []
    b = backend([reply(tool_calls=[("keyword_search", '{"keywords": ["Lothair II"]}')]), reply("Ermengarde of Tours")], seen, api_key_env="MY_KEY")
    ep = Agent(b, load_method("arag_full"), agent_ctx, protocol="native", config=FAST).run("Who was the mother of Lothair II?")
    assert ep.status == ANSWERED and ep.answer == "Ermengarde of Tours" and ep.tool_calls[0].retrieved_tokens > 0
    assert ep.model_calls[0].reasoning_tokens == 3 and ep.model_calls[0].prompt_tokens == 10
    request, body = seen[0]
    assert request.url.path == "/v1/chat/completions" and request.headers["authorization"] == "Bearer sk-test"
    assert body["model"] == "my-model" and [t["function"]["name"] for t in body["tools"]] == ["keyword_search", "semantic_search", "chunk_read"]
    second = seen[1][1]["messages"]
    assert second[-2]["tool_calls"][0]["id"] == "c0" and second[-1] == {"role": "tool", "content": second[-1]["content"], "tool_call_id": "c0", "name": "keyword_search"}


@pytest.mark.parametrize("mode", ["json_schema", "json_object"])
def test_json_protocol_sends_the_schema(mode):
    seen = []
    b = backend([reply('{"answer": "x"}')], seen, json_mode=mode)
    ep = Agent(b, load_method("direct"), protocol="json", config=FAST).run("q?")
    assert ep.answer == "x"
    fmt = seen[0][1]["response_format"]
    schema = fmt["json_schema"]["schema"] if mode == "json_schema" else fmt["schema"]
    assert fmt["type"] == mode and schema["required"] == ["answer"]


def test_retryable_errors_are_retried_then_fail():
    seen = []
    b = backend([503, httpx.ConnectTimeout("slow"), reply("ok")], seen)
    ep = Agent(b, load_method("direct"), protocol="native", config=FAST).run("q?")
    assert ep.status == ANSWERED and ep.model_calls[0].attempts == 3
    b = backend([429, 500, 502], [])
    ep = Agent(b, load_method("direct"), protocol="native", config=FAST).run("q?")
    assert ep.status == EPISODE_FAILED and "HTTP 502" in ep.failure


def test_client_errors_are_not_retried():
    b = backend([400, reply("never")], [])
    ep = Agent(b, load_method("direct"), protocol="native", config=FAST).run("q?")
    assert ep.status == EPISODE_FAILED and ep.model_calls[0].attempts == 1


def test_malformed_response_is_an_llm_error():
    b = backend([{"nothing": 1}], [])
    with pytest.raises(LLMError, match="malformed"):
        b.complete([Message("user", "hi")])


def test_reasoning_mapping_in_the_request():
    seen = []
    backend([reply("a")], seen, reasoning_effort="high", family="gpt-oss").complete([Message("user", "hi")])
    assert seen[0][1]["reasoning_effort"] == "high"
    seen = []
    backend([reply("a")], seen, reasoning_effort="minimal", family="qwen3").complete([Message("user", "hi")])
    assert seen[0][1]["chat_template_kwargs"] == {"enable_thinking": False}
    with pytest.raises(ConfigurationError, match="thinking budget"):
        backend([], [], reasoning_effort="low", family="qwen3")
    with pytest.raises(ConfigurationError, match="not supported"):
        backend([], [], reasoning_effort="low", family="none")
