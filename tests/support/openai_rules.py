"""OpenAI's documented request rules for the chat completions API, per model family: `refusal(body)`
says what OpenAI would refuse. The stand-in model server (tests/support/model_server.py) applies them
as `rules` in its OpenAI preset (`openai_endpoint()`), answering a refused request with HTTP 400 and
OpenAI's error JSON: {"error": {"message", "type", "param", "code"}}.

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
"""

from __future__ import annotations

import re
from typing import Any

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
