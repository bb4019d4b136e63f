"""An in-process stand-in for OpenAI's chat completions endpoint that enforces OpenAI's documented
request rules per model family, and answers like a (very simple) agent and judge: the stand-ins' one
agent policy (tests/support/agent_policy.py), one tool call and then the answer.

Rules (OpenAI's reasoning-model documentation for the chat completions API):
- reasoning models (GPT-5 family, o-series: o1, o3, o3-mini, o4-mini): the reply cap is
  `max_completion_tokens`; `max_tokens`, `top_p`, `presence_penalty`, `frequency_penalty`,
  `logprobs`, `top_logprobs` and `logit_bias` are refused; `temperature` only at its default (1);
  `reasoning_effort` is minimal/low/medium/high for GPT-5 and low/medium/high for the o-series;
  `parallel_tool_calls` is refused by the o-series and by GPT-5 at effort `minimal`;
- other models (gpt-4o-mini, ...): `max_tokens` and `temperature` (0 to 2) are accepted,
  `reasoning_effort` is refused;
- every model: an argument the API does not know (e.g. vLLM's `chat_template_kwargs`) is refused,
  `parallel_tool_calls` needs `tools`, a `json_schema` response format needs a name.
A refusal is HTTP 400 with OpenAI's error JSON: {"error": {"message", "type", "param", "code"}}.

It is a bare ASGI app: tests reach it through `httpx.ASGITransport` (no socket) or serve it on
127.0.0.1 with uvicorn (`serve`) for subprocesses such as `python -m pipelines.evaluate`.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

from tests.support.agent_policy import AgentPolicy, render_reply
from tests.support.fixed_latency_endpoint import serve as serve_on_loopback

KNOWN_ARGUMENTS = frozenset(
    {
        "model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "n", "stop", "seed", "tools",
        "tool_choice", "parallel_tool_calls", "response_format", "reasoning_effort", "presence_penalty", "frequency_penalty",
        "logprobs", "top_logprobs", "logit_bias", "user", "stream", "stream_options", "verbosity", "metadata", "store",
        "service_tier", "modalities", "prediction", "audio", "prompt_cache_key", "safety_identifier", "web_search_options",
    }
)
REASONING_REFUSED = ("max_tokens", "top_p", "presence_penalty", "frequency_penalty", "logprobs", "top_logprobs", "logit_bias")
EFFORTS = {"gpt-5": ("minimal", "low", "medium", "high"), "o-series": ("low", "medium", "high")}
ANSWER = "It was on 20 March 851, as the records say."


def series(model: str) -> str | None:
    """`gpt-5`, `o-series`, or None for a model without OpenAI's reasoning rules."""
    name = model.lower().rsplit("/", 1)[-1]
    if name.startswith("gpt-5"):
        return "gpt-5"
    if re.match(r"o[134](-|$)", name):
        return "o-series"
    return None


def refusal(body: dict[str, Any]) -> tuple[str | None, str | None, str] | None:
    """(param, code, message) when the API would refuse this request, else None."""
    for key in body:
        if key not in KNOWN_ARGUMENTS:
            return key, None, f"Unrecognized request argument supplied: {key}"
    for key in ("model", "messages"):
        if key not in body:
            return key, None, f"Missing required parameter: '{key}'."
    if "parallel_tool_calls" in body and not body.get("tools"):
        return "parallel_tool_calls", None, "Invalid value for 'parallel_tool_calls': only allowed when 'tools' are specified."
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema" and not (fmt.get("json_schema") or {}).get("name"):
        return "response_format.json_schema.name", None, "Missing required parameter: 'response_format.json_schema.name'."
    kind = series(str(body["model"]))
    if kind is None:
        if "reasoning_effort" in body:
            return "reasoning_effort", "unsupported_parameter", "Unsupported parameter: 'reasoning_effort' is not supported with this model."
        t = body.get("temperature", 1)
        if not isinstance(t, (int, float)) or not 0 <= t <= 2:
            return "temperature", "invalid_value", f"Invalid 'temperature': {t!r}; expected a number from 0 to 2."
        return None
    for key in REASONING_REFUSED:
        if key in body:
            extra = " Use 'max_completion_tokens' instead." if key == "max_tokens" else ""
            return key, "unsupported_parameter", f"Unsupported parameter: '{key}' is not supported with this model.{extra}"
    if "temperature" in body and body["temperature"] != 1:
        return "temperature", "unsupported_value", f"Unsupported value: 'temperature' does not support {body['temperature']} with this model. Only the default (1) value is supported."
    effort = body.get("reasoning_effort")
    if effort is not None and effort not in EFFORTS[kind]:
        return "reasoning_effort", "unsupported_value", f"Unsupported value: 'reasoning_effort' does not support {effort!r} with this model. Supported values are: {', '.join(EFFORTS[kind])}."
    if "parallel_tool_calls" in body and (kind == "o-series" or effort == "minimal"):
        return "parallel_tool_calls", "unsupported_parameter", "Unsupported parameter: 'parallel_tool_calls' is not supported with this model."
    return None


# One search, then the answer (a judge's request gets a verdict).
POLICY = AgentPolicy(max_tool_calls=1, answer=ANSWER)


def reply(body: dict[str, Any]) -> dict[str, Any]:
    reasoning = 64 if series(str(body["model"])) else 0
    return {
        "id": "chatcmpl-mock",
        "object": "chat.completion",
        "model": body["model"],
        "choices": [{"index": 0, **render_reply(POLICY.next_action(body), body)}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20 + reasoning, "completion_tokens_details": {"reasoning_tokens": reasoning}},
    }


class OpenAIMock:
    """The ASGI app. `requests` holds every chat request body received, `refused` the refused ones
    with the parameter named."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.refused: list[tuple[str | None, dict[str, Any]]] = []
        self._lock = threading.Lock()

    def handle(self, method: str, path: str, raw: bytes) -> tuple[int, dict[str, Any]]:
        if method == "GET" and path.endswith("/models"):
            return 200, {"object": "list", "data": [{"id": m, "object": "model"} for m in ("gpt-5-mini", "o4-mini", "gpt-4o-mini")]}
        if method != "POST" or not path.endswith("/chat/completions"):
            return 404, {"error": {"message": f"Invalid URL ({method} {path})", "type": "invalid_request_error", "param": None, "code": None}}
        try:
            body = json.loads(raw)
        except ValueError:
            return 400, {"error": {"message": "We could not parse the JSON body of your request.", "type": "invalid_request_error", "param": None, "code": None}}
        with self._lock:
            self.requests.append(body)
        refused = refusal(body)
        if refused is not None:
            param, code, message = refused
            with self._lock:
                self.refused.append((param, body))
            return 400, {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}
        return 200, reply(body)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        raw, more = b"", True
        while more:
            event = await receive()
            raw += event.get("body", b"")
            more = event.get("more_body", False)
        status, payload = self.handle(scope["method"], scope["path"], raw)
        data = json.dumps(payload).encode()
        await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
        await send({"type": "http.response.body", "body": data})


# Served on 127.0.0.1 like the benchmarks' fixed-latency endpoint, by the same helper.
serve = serve_on_loopback
