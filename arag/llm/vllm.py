"""`vllm`: open models served by vLLM engines (arag.llm.vllm_server) inside Ray actors, one async
actor call per model call (docs/agents.md, "vLLM backend"). This package imports no Ray:
arag.runtime.vllm_engine runs the actors and, once imported, connects backends to them."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import importlib
import json
import threading
from typing import Any, Callable, Mapping, Protocol

from arag.llm.base import JSON, NATIVE, LLMBackend
from arag.llm.models import MODELS
from arag.llm.reasoning import ReasoningSetting, family_of, resolve
from arag.llm.types import Completion, ConfigurationError, LLMError, Message, ToolCall
from arag.llm.vllm_server import DEFAULT_MAX_NUM_SEQS, EngineSpec

DEFAULT_MAX_INFLIGHT = 256  # the engine actor's calls at once
RUNTIME_MODULE = "arag.runtime.vllm_engine"


def guess_tool_parser(model: str) -> str | None:
    """vLLM's tool-call parser for a model name; None: unknown (JSON protocol only)."""
    m = model.lower()
    if "qwen3" in m and "coder" in m:
        return "qwen3_coder"
    if "qwen" in m or "hermes" in m:
        return "hermes"  # <tool_call>{...}</tool_call>: Qwen2.5 and Qwen3 chat templates
    if "gpt-oss" in m:
        return "openai"
    if "llama-4" in m or "llama4" in m:
        return "llama4_pythonic"
    if "llama" in m:
        return "llama3_json"
    if "mistral" in m or "ministral" in m:
        return "mistral"
    return None


def vllm_reasoning(level: str | None, family: str, on_unsupported: str = "error") -> ReasoningSetting:
    """`resolve` for a self-hosted engine: chat-API request fields (gpt-oss's `reasoning_effort`) go to
    the chat template; hosted-only families are refused."""
    if family == "openai-reasoning":
        raise ConfigurationError("the vllm backend serves open models; the openai-reasoning family is hosted-only (use the openai backend)")
    setting = resolve(level, family, on_unsupported=on_unsupported)
    if not setting.request:
        return setting
    kwargs = {**setting.chat_template_kwargs, **setting.request}
    return dataclasses.replace(setting, request={}, chat_template_kwargs=kwargs, note=setting.note or "via the chat template")


def completion_from_reply(reply: dict[str, Any]) -> Completion:
    """The engine server's reply as a Completion; an error reply raises LLMError."""
    if reply.get("error"):
        raise LLMError(f"vllm: {reply['error']}", retryable=bool(reply.get("retryable")))
    calls = [ToolCall(name=c["name"], arguments=c["arguments"], id=c.get("id") or f"call_{i}") for i, c in enumerate(reply.get("tool_calls") or [])]
    counts = {k: reply.get(k) for k in ("prompt_tokens", "completion_tokens", "reasoning_tokens", "finish_reason", "reasoning")}
    return Completion(text=reply.get("text") or "", tool_calls=calls, **counts)


class EngineConnection(Protocol):
    """A backend's line to an `EngineServer`; `chat` raises LLMError when it cannot be reached in time."""

    name: str  # equal specs share an engine

    def start(self, timeout_s: float) -> dict[str, Any]: ...

    async def chat(self, req: dict[str, Any], timeout_s: float) -> dict[str, Any]: ...

    def close(self) -> None: ...


# (spec, *, name, detached, max_inflight) -> a connection to the engine serving `spec`.
EngineConnector = Callable[..., EngineConnection]
_default_connector: EngineConnector | None = None


def set_engine_connector(connector: EngineConnector | None) -> None:
    """Where backends built without a `connector` run their engines."""
    global _default_connector
    _default_connector = connector


class VLLMBackend(LLMBackend):
    kind = "vllm"
    runtime_keys = frozenset(
        {"num_gpus", "num_cpus", "gpu_memory_utilization", "kv_cache_gb", "max_num_seqs", "enforce_eager", "actor_name", "detached", "max_inflight", "timeout_s", "startup_timeout_s", "env"}
    )

    @classmethod
    def default_concurrency(cls, cfg: Mapping[str, Any]) -> int:
        return int(cfg.get("max_num_seqs") or DEFAULT_MAX_NUM_SEQS)

    @classmethod
    def concurrency_caps(cls, cfg: Mapping[str, Any], in_flight: int, engine_in_flight: int, role: str = "model") -> tuple[dict[str, Any], list[str]]:
        raised: dict[str, Any] = {}
        if int(cfg.get("max_inflight") or DEFAULT_MAX_INFLIGHT) < engine_in_flight:
            raised["max_inflight"] = engine_in_flight  # the engine actor's calls at once: plumbing only
        seqs = int(cfg.get("max_num_seqs") or DEFAULT_MAX_NUM_SEQS)
        if seqs >= engine_in_flight:
            return raised, []
        return raised, [
            f"{role}.max_num_seqs={seqs} is below the {engine_in_flight} episodes in flight per engine: each engine runs at most {seqs} "
            f"sequences at once and the other requests wait in its queue (their llm_s includes that wait)"
        ]

    @classmethod
    def worker_overrides(cls, cfg: Mapping[str, Any], slot: int, engines: int) -> dict[str, Any]:
        """Worker `slot` talks to engine actor `<name>-e<slot mod engines>`: one engine per GPU (or
        tensor-parallel group). The name depends on the engine settings only, so a sweep's runs can
        reuse detached engines."""
        material = {k: cfg.get(k) for k in sorted(EngineSpec.__dataclass_fields__) if k in cfg}
        base = cfg.get("actor_name") or "arag-eval-vllm-" + hashlib.sha1(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()[:12]
        return {"actor_name": f"{base}-e{slot % max(1, engines)}"}

    @classmethod
    def prepare_runtime(cls, cfg: Mapping[str, Any]) -> None:
        # Named, not imported: Ray loads only in processes that build this backend.
        if cfg.get("connector") is None and _default_connector is None:
            importlib.import_module(RUNTIME_MODULE)

    def __init__(self, model: str = "qwen2.5-coder-0.5b-instruct-q4", *, model_path: str | None = None, dtype: str = "bfloat16",
                 max_model_len: int = 8192, tensor_parallel_size: int = 1, num_gpus: float = 0, num_cpus: float = 1,
                 gpu_memory_utilization: float = 0.9, kv_cache_gb: float | None = None, enable_prefix_caching: bool = True,
                 max_num_seqs: int = DEFAULT_MAX_NUM_SEQS, enforce_eager: bool = False, tool_parser: str | None = "auto",
                 max_tokens: int | None = None, temperature: float = 0.0, seed: int | None = 0, reasoning_effort: str | None = None,
                 family: str | None = None, on_unsupported: str = "error", actor_name: str | None = None, detached: bool = False,
                 max_inflight: int = DEFAULT_MAX_INFLIGHT, timeout_s: float = 600.0, startup_timeout_s: float = 1800.0,
                 engine_kwargs: dict[str, Any] | None = None, env: dict[str, Any] | None = None, connector: EngineConnector | None = None):
        family = family or (MODELS[model].chat_family if model in MODELS else family_of(model))
        reasoning = vllm_reasoning(reasoning_effort, family, on_unsupported)
        super().__init__(model, reasoning=reasoning, max_tokens=max_tokens, temperature=temperature)
        if num_gpus and num_gpus < tensor_parallel_size:
            raise ConfigurationError(f"tensor_parallel_size={tensor_parallel_size} needs num_gpus >= {tensor_parallel_size} per actor, got {num_gpus}")
        if tool_parser == "auto":
            tool_parser = guess_tool_parser(model if model_path is None else f"{model} {model_path}")
        self.tool_parser = tool_parser
        self.protocols = (NATIVE, JSON) if tool_parser else (JSON,)
        self.family = family
        self.context_window = max_model_len
        self.seed = seed
        self.timeout_s, self.startup_timeout_s = timeout_s, startup_timeout_s
        self.detached, self.max_inflight = detached, max_inflight
        self._model_path = model_path
        self._spec_args = dict(dtype=dtype, max_model_len=max_model_len, tensor_parallel_size=tensor_parallel_size, num_gpus=num_gpus,
                               num_cpus=num_cpus, gpu_memory_utilization=gpu_memory_utilization, kv_cache_gb=kv_cache_gb,
                               enable_prefix_caching=enable_prefix_caching, max_num_seqs=max_num_seqs, enforce_eager=enforce_eager,
                               seed=seed or 0, tool_parser=tool_parser, engine_kwargs=dict(engine_kwargs or {}),
                               env={k: str(v) for k, v in (env or {}).items()})
        self._requested_name = actor_name
        self._connector = connector
        self._connection: EngineConnection | None = None
        self._connection_lock = threading.Lock()
        self.actor_name: str | None = None
        self._started = False

    @property
    def thinking(self) -> bool:
        """Qwen3 thinks unless its template is told not to (then the two-phase generation applies)."""
        return self.family == "qwen3" and self.reasoning.chat_template_kwargs.get("enable_thinking", True)

    def share_engine_of(self, owner: "VLLMBackend") -> None:
        """A view of `owner` (arag.llm.instrument): its engine connection, its own settings."""
        self.connection = owner.connection  # type: ignore[method-assign]

    def model_path(self) -> str:
        """`model_path`, else a packaged GGUF converted once to an HF folder, else `model` itself."""
        if self._model_path is None:
            if self.model in MODELS:
                from arag.llm.convert import ensure_hf_model

                self._model_path = str(ensure_hf_model(self.model, dtype="float32" if self._spec_args["dtype"] == "float32" else "bfloat16"))
            else:
                self._model_path = self.model
        return self._model_path

    def spec(self) -> EngineSpec:
        return EngineSpec(model=self.model, model_path=self.model_path(), **self._spec_args)

    def describe(self) -> dict[str, Any]:
        s = self._spec_args
        keys = ("dtype", "max_model_len", "tensor_parallel_size", "num_gpus", "enable_prefix_caching", "max_num_seqs", "tool_parser")
        return {**super().describe(), **{k: s[k] for k in keys}, "model_path": self._model_path, "actor": self.actor_name, "seed": self.seed}

    def request(self, messages: list[Message], tools: list[dict[str, Any]] | None, response_schema: dict[str, Any] | None, max_tokens: int | None) -> dict[str, Any]:
        return {"messages": [m.to_openai() for m in messages], "tools": tools or None, "response_schema": response_schema,
                "max_tokens": max_tokens or self.max_tokens, "temperature": self.temperature, "seed": self.seed,
                "chat_template_kwargs": dict(self.reasoning.chat_template_kwargs), "thinking": self.thinking,
                "thinking_budget": self.reasoning.thinking_budget}

    def connection(self) -> EngineConnection:
        with self._connection_lock:  # episodes starting together ask at once: one registration per backend
            if self._connection is None:
                connect = self._connector or _default_connector
                if connect is None:
                    raise ConfigurationError(f"the vllm backend runs its engines as Ray actors: import {RUNTIME_MODULE} first (make_backend does), or pass connector=")
                self._connection = connect(self.spec(), name=self._requested_name, detached=self.detached, max_inflight=self.max_inflight)
                self.actor_name = self._connection.name
            return self._connection

    def start(self, timeout_s: float | None = None) -> dict[str, Any]:
        """Start the engine and wait until it is up (else the first call does)."""
        info = self.connection().start(timeout_s or self.startup_timeout_s)
        self._started = True
        return info

    async def acomplete(self, messages, *, tools=None, response_schema=None, max_tokens=None) -> Completion:
        if tools and not self.tool_parser:
            raise LLMError(f"no tool-call parser is known for {self.model!r}: set tool_parser or use the json protocol", retryable=False)
        req = self.request(messages, tools, response_schema, max_tokens)
        # The first call may convert a model: off the event loop; later calls skip the thread hop.
        connection = self._connection or await asyncio.to_thread(self.connection)
        timeout = self.timeout_s if self._started else self.timeout_s + self.startup_timeout_s
        reply = await connection.chat(req, timeout)
        self._started = True
        return completion_from_reply(reply)

    def close(self) -> None:
        with self._connection_lock:
            connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()
