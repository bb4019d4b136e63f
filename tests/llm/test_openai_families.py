"""The openai backend sends each model family the request OpenAI documents for it: checked against an
in-process endpoint that enforces those rules (tests/support/openai_rules.py, applied by the stand-in
model server's openai_endpoint preset, through httpx's ASGI transport), and a refused request fails
naming the refused parameter."""

from __future__ import annotations

import json

import pytest

httpx = pytest.importorskip("httpx", reason="the openai backend needs httpx")

from arag.agent import ANSWERED, EPISODE_FAILED, Agent, AgentConfig  # noqa: E402
from arag.llm.openai import OpenAIBackend, http_failure  # noqa: E402
from arag.llm.types import ConfigurationError, LLMError, Message  # noqa: E402
from arag.methods import load_method  # noqa: E402
from tests.support.engine_model import REASONING_TOKENS  # noqa: E402
from tests.support.model_server import ModelServer, openai_endpoint  # noqa: E402
from tests.support.openai_rules import refusal  # noqa: E402

FAST = AgentConfig(max_steps=4, llm_attempts=3, backoff_initial_s=0, backoff_max_s=0, backoff_jitter_s=0)
TOOL = {"type": "function", "function": {"name": "keyword_search", "parameters": {"type": "object", "properties": {"keywords": {"type": "array", "items": {"type": "string"}}}, "required": ["keywords"]}}}
HI = [Message("system", "Be brief."), Message("user", "Who was Lothair II's mother?")]


def backend(mock: ModelServer, model: str, **kw) -> OpenAIBackend:
    return OpenAIBackend(model, base_url="http://mock/v1", transport=httpx.ASGITransport(app=mock), **kw)


# (model, effort): the GPT-5 family at each of its levels, the o-series at theirs.
REASONING = [("gpt-5-mini", None), ("gpt-5-mini", "minimal"), ("gpt-5-mini", "low"), ("gpt-5", "medium"), ("gpt-5-nano", "high"),
             ("o3-mini", "low"), ("o4-mini", "high"), ("o3", None), ("o1", "medium")]


@pytest.mark.parametrize("model, effort", REASONING)
def test_reasoning_models_get_max_completion_tokens_and_no_sampling_fields(model, effort):
    mock = openai_endpoint()
    b = backend(mock, model, reasoning_effort=effort)
    c = b.complete(HI, tools=[TOOL])
    assert c.tool_calls and c.reasoning_tokens == REASONING_TOKENS[effort] and not mock.refused
    body = mock.requests[0]
    assert body["max_completion_tokens"] == b.max_tokens and "max_tokens" not in body
    assert not {"temperature", "top_p", "presence_penalty", "frequency_penalty", "logprobs", "top_logprobs", "logit_bias"} & set(body)
    assert body.get("reasoning_effort") == effort and body["seed"] == 0 and body["tool_choice"] == "auto"
    # One tool call per step: asked for where the model takes the switch; the o-series and GPT-5 at
    # minimal effort refuse it, so it is left out (the agent loop runs one call per step anyway).
    takes_switch = model.startswith("gpt-5") and effort != "minimal"
    assert body.get("parallel_tool_calls", "absent") == (False if takes_switch else "absent")
    assert b.describe()["request_fields"] == {"cap": "max_completion_tokens", "parallel_tool_calls": False if takes_switch else None}
    # structured output (the JSON protocol and the judge) is accepted too
    assert json.loads(b.complete(HI, response_schema={"type": "object", "properties": {"verdict": {"type": "string"}}}).text) == {"verdict": "correct"}
    assert not mock.refused and mock.requests[-1]["response_format"]["type"] == "json_schema"


@pytest.mark.parametrize("model", ["gpt-4o-mini", "Qwen/Qwen2.5-7B-Instruct", "local"])
def test_other_models_keep_max_tokens_and_greedy_temperature(model):
    mock = openai_endpoint()
    b = backend(mock, model, max_tokens=300)
    b.complete(HI, tools=[TOOL])
    body = mock.requests[0]
    assert not mock.refused and body["max_tokens"] == 300 and body["temperature"] == 0.0 and body["parallel_tool_calls"] is False
    assert "max_completion_tokens" not in body and "reasoning_effort" not in body
    assert b.describe()["temperature"] == 0.0 and b.describe()["request_fields"] == {"cap": "max_tokens", "temperature": 0.0, "parallel_tool_calls": False}


def test_the_mock_refuses_what_openai_documents():
    """The endpoint is strict, so the tests above mean something: today's request is refused."""
    old = {"model": "gpt-5-mini", "messages": [], "max_tokens": 16384, "temperature": 0.0, "seed": 0}
    assert refusal(old)[0] == "max_tokens"
    assert refusal({k: v for k, v in old.items() if k != "max_tokens"})[:2] == ("temperature", "unsupported_value")
    ok = {"model": "gpt-5-mini", "messages": [], "max_completion_tokens": 9}
    assert refusal(ok) is None and refusal({**ok, "temperature": 1}) is None
    assert refusal({**ok, "top_p": 1})[0] == "top_p" and refusal({**ok, "logit_bias": {}})[0] == "logit_bias"
    assert refusal({**ok, "model": "o3-mini", "reasoning_effort": "minimal"})[0] == "reasoning_effort"
    assert refusal({**ok, "model": "o4-mini", "tools": [TOOL], "parallel_tool_calls": False})[0] == "parallel_tool_calls"
    assert refusal({**ok, "reasoning_effort": "minimal", "tools": [TOOL], "parallel_tool_calls": False})[0] == "parallel_tool_calls"
    assert refusal({**ok, "chat_template_kwargs": {}})[0] == "chat_template_kwargs"
    assert refusal({"model": "gpt-4o-mini", "messages": [], "max_tokens": 9, "temperature": 0.0}) is None
    assert refusal({"model": "gpt-4o-mini", "messages": [], "reasoning_effort": "low"})[0] == "reasoning_effort"


def test_a_refused_request_fails_at_once_naming_the_parameter():
    mock = openai_endpoint()
    # family "none" on a GPT-5 model: the backend sends max_tokens, which the endpoint refuses
    b = backend(mock, "gpt-5-mini", family="none")
    with pytest.raises(LLMError) as err:
        b.complete(HI)
    message = str(err.value)
    assert not err.value.retryable and "\n" not in message
    assert message.startswith("HTTP 400: the endpoint refused parameter 'max_tokens' for gpt-5-mini") and "max_completion_tokens" in message
    ep = Agent(backend(openai_endpoint(), "gpt-5-mini", family="none"), load_method("direct"), protocol="native", config=FAST).run("q?")
    assert ep.status == EPISODE_FAILED and ep.model_calls[0].attempts == 1 and "refused parameter 'max_tokens'" in ep.failure


def test_failure_lines_without_openai_error_json():
    assert http_failure(502, "<html>\n bad gateway \n</html>", "m") == "HTTP 502: <html> bad gateway </html>"
    assert http_failure(500, json.dumps({"error": {"message": "boom", "param": None}}), "m") == "HTTP 500: boom"
    assert http_failure(404, json.dumps({"error": {"message": "no such model\nat all", "param": "model", "code": "model_not_found"}}), "m") == (
        "HTTP 404: the endpoint refused parameter 'model' for m (no such model at all, model_not_found)"
    )


def test_settings_a_reasoning_model_refuses_are_errors_before_any_request():
    mock = openai_endpoint()
    with pytest.raises(ConfigurationError, match=r"model.temperature=0.7: gpt-5-mini \(openai-reasoning\) takes only its default"):
        backend(mock, "gpt-5-mini", temperature=0.7)
    with pytest.raises(ConfigurationError, match="model.extra_body sets logprobs, top_p"):
        backend(mock, "o4-mini", extra_body={"top_p": 0.5, "logprobs": True})
    with pytest.raises(ConfigurationError, match="'minimal' is not supported: o3-mini is an o-series model"):
        backend(mock, "o3-mini", reasoning_effort="minimal")
    recorded = backend(mock, "o3-mini", reasoning_effort="minimal", on_unsupported="record")
    assert not recorded.reasoning.supported and "o-series" in recorded.reasoning.note
    recorded.complete(HI)
    assert "reasoning_effort" not in mock.requests[-1] and not mock.refused
    assert backend(mock, "gpt-5-mini", temperature=1.0).request_body(HI, None, None, None)["temperature"] == 1.0  # the default may be named
    assert not mock.refused


def test_a_gpt5_episode_runs_against_the_mock(agent_ctx):
    mock = openai_endpoint()
    ep = Agent(backend(mock, "gpt-5-mini", reasoning_effort="low"), load_method("arag_full"), agent_ctx, protocol="native", config=FAST).run("Who was the mother of Lothair II?")
    assert ep.status == ANSWERED and ep.tool_calls[0].name == "keyword_search" and not mock.refused
    assert len(mock.requests) == 2 and all(r["reasoning_effort"] == "low" and "max_completion_tokens" in r for r in mock.requests)


def test_the_reasoning_line_comes_from_the_model_name():
    from arag.llm.openai import openai_series

    assert [openai_series(m) for m in ("o1", "o3-mini", "o4-mini-2025-04-16", "openai/o3")] == ["o-series"] * 4
    # GPT-5 and any other name configured as family openai-reasoning (a deployment's own name)
    assert [openai_series(m) for m in ("gpt-5-mini", "gpt-5-nano-2025-08-07", "my-reasoning-deployment", "omni")] == ["gpt-5"] * 4
