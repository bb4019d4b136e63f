"""`openai`: any OpenAI-compatible chat endpoint (vLLM's server, llama.cpp's server, hosted APIs) over HTTP.

Base URL and model from config, the key from an environment variable (never from config files).
Each call has a timeout; at most `max_concurrency` requests are in flight per backend. Failures are
classified for the agent loop's retry (tenacity, with backoff): timeouts, connection errors, 408, 409,
429 and 5xx are retryable; other 4xx (a bad request will not get better) end the episode.

JSON actions use structured output: `json_mode: json_schema` sends OpenAI's
{"type": "json_schema", "json_schema": {...}} (hosted APIs, vLLM); `json_mode: json_object` sends
{"type": "json_object", "schema": ...} (llama.cpp's server).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from arag.llm.base import JSON, NATIVE, LLMBackend
from arag.llm.reasoning import family_of, resolve
from arag.llm.types import Completion, ConfigurationError, LLMError, ToolCall

RETRYABLE_STATUS = {408, 409, 429}


class OpenAIBackend(LLMBackend):
    kind = "openai"
    protocols = (NATIVE, JSON)

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "http://127.0.0.1:8000/v1",
        api_key_env: str | None = "OPENAI_API_KEY",
        timeout_s: float = 120.0,
        connect_timeout_s: float = 10.0,
        max_concurrency: int = 8,
        max_tokens: int | None = None,
        temperature: float = 0.0,
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
        reasoning = resolve(reasoning_effort, family, on_unsupported=on_unsupported)
        if reasoning.thinking_budget is not None:
            # The chat API has no standard field for a thinking-token cap: refuse instead of ignoring it.
            raise ConfigurationError(f"the openai backend cannot enforce a thinking budget ({family} at {reasoning_effort!r}); use 'minimal' or null")
        super().__init__(model, reasoning=reasoning, max_tokens=max_tokens, temperature=temperature)
        if json_mode not in ("json_schema", "json_object"):
            raise ConfigurationError(f"json_mode must be json_schema or json_object, got {json_mode!r}")
        try:
            import httpx
        except ImportError as exc:
            raise ImportError("the openai backend needs httpx: pip install httpx==0.28.1") from exc
        self._httpx = httpx
        self.base_url = base_url.rstrip("/")
        self.api_key_env = api_key_env
        self.timeout = httpx.Timeout(timeout_s, connect=connect_timeout_s)
        self.max_concurrency = max_concurrency
        self.seed = seed
        self.json_mode = json_mode
        self.context_window = context_window
        self.extra_body = dict(extra_body or {})
        self.parallel_tool_calls = parallel_tool_calls
        self.transport = transport
        self._loop: Any = None
        self._client: Any = None
        self._semaphore: asyncio.Semaphore | None = None

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "base_url": self.base_url, "json_mode": self.json_mode, "max_concurrency": self.max_concurrency}

    def _session(self) -> tuple[Any, asyncio.Semaphore]:
        # httpx clients and asyncio semaphores belong to one event loop; `Agent.run` starts a new loop
        # per episode, so the pair is rebuilt whenever the running loop changes.
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            headers = {}
            key = os.environ.get(self.api_key_env) if self.api_key_env else None
            if key:
                headers["Authorization"] = f"Bearer {key}"
            self._client = self._httpx.AsyncClient(base_url=self.base_url, timeout=self.timeout, headers=headers, transport=self.transport)
            self._semaphore = asyncio.Semaphore(self.max_concurrency)
            self._loop = loop
        return self._client, self._semaphore

    def request_body(self, messages, tools, response_schema, max_tokens) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [m.to_openai() for m in messages],
            "max_tokens": max_tokens or self.max_tokens,
            "temperature": self.temperature,
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
            if self.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = self.parallel_tool_calls
        if response_schema is not None:
            if self.json_mode == "json_schema":
                body["response_format"] = {"type": "json_schema", "json_schema": {"name": "action", "schema": response_schema}}
            else:
                body["response_format"] = {"type": "json_object", "schema": response_schema}
        return body

    async def acomplete(self, messages, *, tools=None, response_schema=None, max_tokens=None) -> Completion:
        httpx = self._httpx
        client, semaphore = self._session()
        body = self.request_body(messages, tools, response_schema, max_tokens)
        async with semaphore:
            try:
                response = await client.post("/chat/completions", json=body)
            except httpx.TimeoutException as exc:
                raise LLMError(f"timeout: {exc!r}") from exc
            except httpx.TransportError as exc:
                raise LLMError(f"connection error: {exc!r}") from exc
        if response.status_code != 200:
            retryable = response.status_code in RETRYABLE_STATUS or response.status_code >= 500
            raise LLMError(f"HTTP {response.status_code}: {response.text[:500]}", retryable=retryable)
        try:
            return parse_response(response.json())
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise LLMError(f"malformed response: {exc!r}: {response.text[:300]}") from exc

    def close(self) -> None:
        client, self._client, self._loop = self._client, None, None
        if client is not None:
            try:
                asyncio.run(client.aclose())
            except Exception:
                pass  # inside a running loop, or its loop is gone: the connections close with the process


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
