"""`openai`: any OpenAI-compatible chat endpoint over HTTP; the API key comes from an environment
variable, never from config files. Requests per family, retry classes and json_mode: docs/agents.md,
"Backends" and "Model backends: internals"."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import re
from typing import Any, Mapping

import httpx

from arag.llm.base import JSON, NATIVE, LLMBackend
from arag.llm.reasoning import ReasoningSetting, family_of, resolve
from arag.llm.slots import Slots
from arag.llm.types import Completion, ConfigurationError, LLMError, ToolCall

RETRYABLE_STATUS = {408, 409, 429}
DEFAULT_MAX_CONCURRENCY = 8
# Connections per httpx client: a larger limit is spread over several clients. httpx's pool does
# work proportional to its connections (times its queued requests) on every request and reply, so
# one pool of 256 connections spent most of a worker's CPU on its own bookkeeping.
CONNECTIONS_PER_CLIENT = 16

REASONING_FAMILY = "openai-reasoning"
# OpenAI's reasoning models on the chat completions API, as OpenAI documents them: the reply cap is
# `max_completion_tokens` (it counts the hidden reasoning tokens too) and these fields are refused
# (`temperature` except at its default, 1). `seed`, tools, `tool_choice`, structured output and
# `reasoning_effort` are accepted; `parallel_tool_calls` is refused by the o-series, and by GPT-5 at
# reasoning effort `minimal` (a level only GPT-5 has).
REASONING_REFUSED = ("max_tokens", "temperature", "top_p", "presence_penalty", "frequency_penalty", "logprobs", "top_logprobs", "logit_bias")
REASONING_DEFAULT_TEMPERATURE = 1.0


def openai_series(model: str) -> str:
    """`o-series` (o1, o3, o4-mini, ...) or `gpt-5` (GPT-5 and any other `openai-reasoning` name)."""
    return "o-series" if re.match(r"o[134](-|$)", model.lower().rsplit("/", 1)[-1]) else "gpt-5"


def reasoning_rules(model: str, reasoning: ReasoningSetting, on_unsupported: str) -> ReasoningSetting:
    """The o-series has no `minimal` effort: refused, or (on_unsupported=record) run at the model's default."""
    if reasoning.family != REASONING_FAMILY or reasoning.requested != "minimal" or openai_series(model) != "o-series":
        return reasoning
    why = f"{model} is an o-series model: its reasoning efforts are low, medium and high ('minimal' is GPT-5's)"
    if on_unsupported == "error":
        raise ConfigurationError(f"reasoning effort 'minimal' is not supported: {why}")
    return dataclasses.replace(reasoning, supported=False, request={}, note=f"unsupported, running at the model default: {why}")


class OpenAIBackend(LLMBackend):
    kind = "openai"
    protocols = (NATIVE, JSON)
    runtime_keys = frozenset({"base_url", "api_key_env", "timeout_s", "max_concurrency"})

    @classmethod
    def default_concurrency(cls, cfg: Mapping[str, Any]) -> int:
        return int(cfg.get("max_concurrency") or DEFAULT_MAX_CONCURRENCY)

    @classmethod
    def concurrency_caps(cls, cfg: Mapping[str, Any], in_flight: int, engine_in_flight: int, role: str = "model") -> tuple[dict[str, Any], list[str]]:
        cap = cfg.get("max_concurrency")
        if cap is None:
            return {"max_concurrency": in_flight}, []  # one slot per episode in flight: none waits for another's
        if int(cap) >= in_flight:
            return {}, []
        return {}, [
            f"{role}.max_concurrency={cap} is below the {in_flight} episodes in flight per worker (runtime.concurrency): at most {cap} "
            f"requests per worker reach the endpoint at once and the others wait for a slot (not counted in llm_s); "
            f"set {role}.max_concurrency=null to follow runtime.concurrency"
        ]

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "http://127.0.0.1:8000/v1",
        api_key_env: str | None = "OPENAI_API_KEY",
        timeout_s: float = 120.0,
        connect_timeout_s: float = 10.0,
        max_concurrency: int | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,  # None: 0.0 (greedy); OpenAI's reasoning models: their own default
        seed: int | None = 0,
        json_mode: str = "json_schema",
        reasoning_effort: str | None = None,
        family: str | None = None,
        on_unsupported: str = "error",
        context_window: int | None = None,
        extra_body: dict[str, Any] | None = None,
        parallel_tool_calls: bool | None = False,  # False: ask for one tool call per reply (the paper's setting); None: leave it out (endpoints that reject the field)
        transport: Any = None,  # an httpx transport (tests)
    ):
        family = family or family_of(model)
        reasoning = reasoning_rules(model, resolve(reasoning_effort, family, on_unsupported=on_unsupported), on_unsupported)
        if reasoning.thinking_budget is not None:
            # The chat API has no standard field for a thinking-token cap: refuse instead of ignoring it.
            raise ConfigurationError(f"the openai backend cannot enforce a thinking budget ({family} at {reasoning_effort!r}); use 'minimal' or null")
        if family == REASONING_FAMILY:
            if temperature not in (None, REASONING_DEFAULT_TEMPERATURE):
                raise ConfigurationError(f"model.temperature={temperature}: {model} ({family}) takes only its default temperature (1); set model.temperature=null")
            refused = sorted(set(extra_body or {}) & set(REASONING_REFUSED))
            if refused:
                raise ConfigurationError(f"model.extra_body sets {', '.join(refused)}, which {model} ({family}) refuses")
        elif temperature is None:
            temperature = 0.0
        super().__init__(model, reasoning=reasoning, max_tokens=max_tokens, temperature=temperature)
        if json_mode not in ("json_schema", "json_object"):
            raise ConfigurationError(f"json_mode must be json_schema or json_object, got {json_mode!r}")
        self.base_url = base_url.rstrip("/")
        self.api_key_env = api_key_env
        self.timeout = httpx.Timeout(timeout_s, connect=connect_timeout_s)
        self.max_concurrency = int(max_concurrency or DEFAULT_MAX_CONCURRENCY)
        self.seed = seed
        self.json_mode = json_mode
        self.context_window = context_window
        self.extra_body = dict(extra_body or {})
        self.parallel_tool_calls = parallel_tool_calls
        self.transport = transport
        self._loop: Any = None
        self._clients: list[httpx.AsyncClient] = []
        self._slots: Slots | None = None

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "base_url": self.base_url, "json_mode": self.json_mode, "max_concurrency": self.max_concurrency, "request_fields": self.request_fields()}

    @property
    def openai_reasoning(self) -> bool:
        return self.reasoning.family == REASONING_FAMILY

    def request_fields(self) -> dict[str, Any]:
        """The reply cap's field, sampling and tool-call switch of every request (recorded per episode);
        a field the family refuses is left out, never sent."""
        cap = "max_completion_tokens" if self.openai_reasoning else "max_tokens"
        sampling = {} if self.temperature is None else {"temperature": self.temperature}
        parallel = self.parallel_tool_calls
        if self.openai_reasoning and (openai_series(self.model) == "o-series" or self.reasoning.request.get("reasoning_effort") == "minimal"):
            parallel = None  # refused there; the agent loop still runs one call per step and notes the rest
        return {"cap": cap, **sampling, "parallel_tool_calls": parallel}

    def share_engine_of(self, owner: "OpenAIBackend") -> None:
        """A view of `owner` (arag.llm.instrument): its clients and slots, its own settings."""
        if self.temperature is None and not self.openai_reasoning:
            self.temperature = 0.0
        self._session = owner._session  # type: ignore[method-assign]

    def _session(self) -> Slots:
        # httpx clients and asyncio queues belong to one event loop; `Agent.run` starts a new loop per
        # episode, so they are rebuilt whenever the running loop changes.
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            key = os.environ.get(self.api_key_env) if self.api_key_env else None
            headers = {"Authorization": f"Bearer {key}"} if key else {}
            # httpx's default pool (100 connections, 20 kept alive) would cap requests in flight below
            # a larger limit and reconnect for most of them.
            n_clients = -(-self.max_concurrency // CONNECTIONS_PER_CLIENT)
            per_client = -(-self.max_concurrency // n_clients)
            limits = httpx.Limits(max_connections=per_client, max_keepalive_connections=per_client)
            self._clients = [
                httpx.AsyncClient(base_url=self.base_url, timeout=self.timeout, headers=headers, transport=self.transport, limits=limits) for _ in range(n_clients)
            ]
            self._slots = Slots(self._clients, self.max_concurrency)
            self._loop = loop
        return self._slots

    def request_body(self, messages, tools, response_schema, max_tokens) -> dict[str, Any]:
        fields = self.request_fields()
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [m.to_openai() for m in messages],
            fields["cap"]: max_tokens or self.max_tokens,
            **({"temperature": fields["temperature"]} if "temperature" in fields else {}),
            **self.reasoning.request,
            **self.extra_body,
        }
        if self.seed is not None:
            body["seed"] = self.seed
        if self.reasoning.chat_template_kwargs:
            body["chat_template_kwargs"] = dict(self.reasoning.chat_template_kwargs)
        if tools:
            body["tools"] = tools
            body["tool_choice"] = "auto"
            if fields["parallel_tool_calls"] is not None:
                body["parallel_tool_calls"] = fields["parallel_tool_calls"]
        if response_schema is not None:
            if self.json_mode == "json_schema":
                body["response_format"] = {"type": "json_schema", "json_schema": {"name": "action", "schema": response_schema}}
            else:
                body["response_format"] = {"type": "json_object", "schema": response_schema}
        return body

    async def acomplete(self, messages, *, tools=None, response_schema=None, max_tokens=None) -> Completion:
        slots = self._session()
        body = self.request_body(messages, tools, response_schema, max_tokens)
        async with slots.take() as client:
            try:
                response = await client.post("/chat/completions", json=body)
            except httpx.TimeoutException as exc:
                raise LLMError(f"timeout: {exc!r}") from exc
            except httpx.TransportError as exc:
                raise LLMError(f"connection error: {exc!r}") from exc
        if response.status_code != 200:
            retryable = response.status_code in RETRYABLE_STATUS or response.status_code >= 500
            raise LLMError(http_failure(response.status_code, response.text, self.model), retryable=retryable)
        try:
            return parse_response(response.json())
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise LLMError(f"malformed response: {exc!r}: {response.text[:300]}") from exc

    def close(self) -> None:
        clients, self._clients, self._slots, self._loop = self._clients, [], None, None

        async def close_all() -> None:
            await asyncio.gather(*(client.aclose() for client in clients))

        # Inside a running loop, or with its loop gone, this fails: the connections close with the process.
        if clients:
            with contextlib.suppress(Exception):
                asyncio.run(close_all())


def http_failure(status: int, text: str, model: str) -> str:
    """One line for a refused request: the parameter OpenAI's error JSON names, else the reply's start."""
    try:
        error = json.loads(text).get("error")
    except (ValueError, AttributeError):
        error = None
    if isinstance(error, dict) and error.get("message"):
        message = " ".join(str(error["message"]).split())[:300]
        if error.get("param") and 400 <= status < 500:
            code = f", {error['code']}" if error.get("code") else ""
            return f"HTTP {status}: the endpoint refused parameter {error['param']!r} for {model} ({message}{code})"
        return f"HTTP {status}: {message}"
    return f"HTTP {status}: {' '.join(text.split())[:500]}"


def parse_response(data: dict[str, Any]) -> Completion:
    choice = data["choices"][0]
    message = choice.get("message") or {}
    calls = [
        ToolCall(name=str(c["function"].get("name") or ""), arguments=c["function"].get("arguments") or "", id=str(c.get("id") or f"call_{i}"))
        for i, c in enumerate(message.get("tool_calls") or [])
    ]
    usage = data.get("usage") or {}
    details = usage.get("completion_tokens_details") or {}
    return Completion(
        text=message.get("content") or "",
        tool_calls=calls,
        prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=usage.get("completion_tokens"),
        reasoning_tokens=details.get("reasoning_tokens"),
        finish_reason=choice.get("finish_reason"),
        reasoning=message.get("reasoning_content") or message.get("reasoning"),
    )
