"""`vllm`: open models served by vLLM engines inside Ray actors.

One Ray actor holds one vLLM `AsyncLLM` engine (continuous batching, prefix caching on by default)
and serves many requests at once: every `acomplete` of every episode is one async actor call, so a
batch of episodes in flight keeps the engine's batch full. Backends with the same engine settings
share one actor: in a process by a handle cache, across processes (or drivers of one cluster) by the
actor's name (`actor_name`, derived from the settings unless given) in the `arag` namespace; set
`detached: true` to keep it alive after the driver exits. The actor asks Ray for `num_gpus` GPUs
(tensor parallel inside the actor over `tensor_parallel_size` of them) and `num_cpus` CPUs.

Prompts are rendered with the model's own chat template (tools included, for the native protocol);
JSON actions are constrained by vLLM's structured output (JSON-schema guided decoding); native tool
calls are read back by vLLM's tool-call parser for the model (`tool_parser`, guessed from the name:
hermes for Qwen2.5/Qwen3, qwen3_coder, llama3_json, mistral, openai for gpt-oss). Without a parser
the backend offers the JSON protocol only.

Reasoning effort (arag.llm.reasoning): Qwen3 thinking is switched by the chat template's
`enable_thinking`; with thinking on, the reply is generated in two phases: thinking (no constraint,
stopped at `</think>` or at the level's budget, where `</think>` is forced) and then the answer
(constrained, `max_tokens`), which is what makes the budget a real cap and keeps the JSON grammar off
the thoughts. gpt-oss gets `reasoning_effort` through its template. Hosted-only families are refused.

This module is plain Python: the request and reply on both sides of the actor boundary, the
backend (`VLLMBackend`), and the class that runs in the actor (`EngineServer`, testable with a fake
engine). The actor itself, and every Ray call, are in arag.runtime.vllm_engine, which connects
backends to their actors (`set_engine_connector`) when imported; `VLLMBackend.prepare_runtime`
imports it by name (this package sits below arag.runtime), in every process that builds a backend.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import itertools
import json
import os
import threading
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol

from arag.llm.base import JSON, NATIVE, LLMBackend
from arag.llm.models import MODELS
from arag.llm.reasoning import ReasoningSetting, family_of, resolve
from arag.llm.types import Completion, ConfigurationError, LLMError, Message, ToolCall

# The engine's batch size (sequences at once) and the engine actor's calls at once, where a config
# leaves them out.
DEFAULT_MAX_NUM_SEQS = 64
DEFAULT_MAX_INFLIGHT = 256
# The module that runs the engines as Ray actors and connects backends to them when imported.
RUNTIME_MODULE = "arag.runtime.vllm_engine"

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
# Appended after the (possibly cut) thoughts; Qwen3's canonical layout is "<think>\n…\n</think>\n\n".
THINK_END = "\n" + THINK_CLOSE + "\n\n"


def guess_tool_parser(model: str) -> str | None:
    """vLLM's tool-call parser for a model name, or None when unknown (then: JSON protocol only)."""
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
    """`resolve`, adapted to what a self-hosted engine can honour: chat-API request fields (gpt-oss's
    `reasoning_effort`) go to the chat template instead; hosted-only families cannot run here."""
    if family == "openai-reasoning":
        raise ConfigurationError("the vllm backend serves open models; the openai-reasoning family is hosted-only (use the openai backend)")
    setting = resolve(level, family, on_unsupported=on_unsupported)
    if setting.request:
        kwargs = {**setting.chat_template_kwargs, **setting.request}
        return ReasoningSetting(setting.requested, setting.family, setting.supported, {}, kwargs, setting.thinking_budget, setting.note or "via the chat template")
    return setting


@dataclass(frozen=True)
class EngineSpec:
    """Everything that decides an engine actor: equal specs share one actor."""

    model: str  # the name requests are served under
    model_path: str  # what vLLM loads (HF folder or hub id)
    dtype: str = "bfloat16"
    max_model_len: int = 8192
    tensor_parallel_size: int = 1
    num_gpus: float = 0
    num_cpus: float = 1
    gpu_memory_utilization: float = 0.9
    kv_cache_gb: float | None = None  # explicit KV cache size (needed on CPU, where the default is a RAM fraction)
    enable_prefix_caching: bool = True
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS
    enforce_eager: bool = False
    seed: int = 0
    tool_parser: str | None = None
    engine_kwargs: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)

    def key(self) -> str:
        return hashlib.sha1(json.dumps(asdict(self), sort_keys=True, default=str).encode()).hexdigest()[:12]

    def actor_name(self) -> str:
        base = "".join(c if c.isalnum() or c in "-_." else "-" for c in Path(self.model).name)[:48]
        return f"arag-vllm-{base}-{self.key()}"

    def engine_args(self) -> dict[str, Any]:
        args: dict[str, Any] = {
            "model": self.model_path,
            "tokenizer": self.model_path,
            "served_model_name": self.model,
            "dtype": self.dtype,
            "max_model_len": self.max_model_len,
            "tensor_parallel_size": self.tensor_parallel_size,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "enable_prefix_caching": self.enable_prefix_caching,
            "max_num_seqs": self.max_num_seqs,
            "enforce_eager": self.enforce_eager,
            "seed": self.seed,
            "disable_log_stats": True,
        }
        if self.kv_cache_gb:
            args["kv_cache_memory_bytes"] = int(self.kv_cache_gb * (1 << 30))
        args.update(self.engine_kwargs)
        return args


# ---- the request, both sides of the actor boundary (plain dicts: they cross Ray) ---------------------


def normalize_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI chat messages as HF chat templates want them: tool-call arguments as objects (templates
    write `arguments | tojson`; a JSON string would be quoted twice). Unparseable arguments stay text."""
    out = []
    for m in messages:
        m = dict(m)
        if m.get("tool_calls"):
            calls = []
            for c in m["tool_calls"]:
                fn = dict(c.get("function") or {})
                if isinstance(fn.get("arguments"), str):
                    try:
                        fn["arguments"] = json.loads(fn["arguments"])
                    except (ValueError, RecursionError):
                        pass
                calls.append({**c, "function": fn})
            m["tool_calls"] = calls
        out.append(m)
    return out


def completion_from_reply(reply: dict[str, Any]) -> Completion:
    """The actor's reply (a dict) as a Completion; an error reply raises LLMError."""
    if reply.get("error"):
        raise LLMError(f"vllm: {reply['error']}", retryable=bool(reply.get("retryable")))
    return Completion(
        text=reply.get("text") or "",
        tool_calls=[ToolCall(name=c["name"], arguments=c["arguments"], id=c.get("id") or f"call_{i}") for i, c in enumerate(reply.get("tool_calls") or [])],
        prompt_tokens=reply.get("prompt_tokens"),
        completion_tokens=reply.get("completion_tokens"),
        reasoning_tokens=reply.get("reasoning_tokens"),
        finish_reason=reply.get("finish_reason"),
        reasoning=reply.get("reasoning"),
    )


class EngineServer:
    """Runs inside the actor (`ray.remote(EngineServer)`): one AsyncLLM engine, many requests at once.

    `chat` never raises for a failed request: it returns {"error", "retryable"} so the backend can
    classify it (a bad request is final; a dead engine is rebuilt and the call may be retried)."""

    def __init__(self, spec: dict[str, Any], engine: Any = None, tokenizer: Any = None):
        self.spec = dict(spec)
        self.max_model_len = int(self.spec["max_model_len"])
        self._engine, self._tokenizer = engine, tokenizer
        self._lock: asyncio.Lock | None = None
        self._tool_parser_cls: Any = None
        self._parse_requests: dict[str, Any] = {}  # the parser's request, per tool set
        # Request ids unique within the engine, without a random draw (a syscall) per request.
        self._id_prefix, self._ids = uuid.uuid4().hex[:12], itertools.count()
        self.requests = self.inflight = self.peak_inflight = 0

    # -- engine ------------------------------------------------------------------------------------
    def _build(self) -> tuple[Any, Any]:
        try:
            from vllm.engine.arg_utils import AsyncEngineArgs
            from vllm.v1.engine.async_llm import AsyncLLM
        except ImportError as exc:
            raise ImportError(
                "the vllm backend needs vLLM in this environment: make one with cluster/install_vllm.sh cpu|gpu (see docs/agents.md)"
            ) from exc

        engine = AsyncLLM.from_engine_args(AsyncEngineArgs(**self.spec["engine_args"]))
        return engine, engine.get_tokenizer()

    async def _ensure(self) -> None:
        if self._engine is not None:
            return
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._engine is None:
                self._engine, self._tokenizer = await asyncio.to_thread(self._build)
                if self.spec.get("tool_parser"):
                    # Its first lookup imports vLLM's request models and parsers (seconds): on the
                    # event loop it would hold every request in flight.
                    await asyncio.to_thread(self.tool_parser_class)

    async def ready(self) -> dict[str, Any]:
        await self._ensure()
        return {"model": self.spec["model"], "max_model_len": self.max_model_len, "pid": os.getpid(), **self.stats()}

    def stats(self, reset_peak: bool = False) -> dict[str, int]:
        """Requests served, in flight now, and the most in flight at once (since the last reset)."""
        out = {"requests": self.requests, "inflight": self.inflight, "peak_inflight": self.peak_inflight}
        if reset_peak:
            self.peak_inflight = self.inflight
        return out

    def shutdown(self) -> None:
        engine, self._engine = self._engine, None
        if engine is not None and hasattr(engine, "shutdown"):
            engine.shutdown()

    # -- pieces (overridable in tests) -------------------------------------------------------------
    def sampling(self, **kwargs: Any) -> Any:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams

        schema = kwargs.pop("json_schema", None)
        if schema is not None:
            kwargs["structured_outputs"] = StructuredOutputsParams(json=schema)
        return SamplingParams(output_kind=RequestOutputKind.FINAL_ONLY, **kwargs)

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, template_kwargs: dict[str, Any]) -> str:
        return self._tokenizer.apply_chat_template(normalize_messages(messages), tools=tools or None, add_generation_prompt=True, tokenize=False, **template_kwargs)

    def encode(self, text: str) -> list[int]:
        return list(self._tokenizer.encode(text, add_special_tokens=False))

    def tool_parser_class(self) -> Any:
        """vLLM's tool-call parser class for `tool_parser` (looked up once)."""
        if self._tool_parser_cls is None:
            from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest  # noqa: F401  (imported here, not on the first request)
            from vllm.tool_parsers import ToolParserManager

            self._tool_parser_cls = ToolParserManager.get_tool_parser(self.spec["tool_parser"])
        return self._tool_parser_cls

    def parse_tool_calls(self, text: str, tools: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        key = json.dumps(tools, sort_keys=True)
        request = self._parse_requests.get(key)
        if request is None:  # validating the tool schemas into vLLM's request model is most of a parse
            from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

            request = ChatCompletionRequest(model=self.spec["model"], messages=[{"role": "user", "content": ""}], tools=tools, tool_choice="auto")
            if len(self._parse_requests) >= 64:
                self._parse_requests.clear()
            self._parse_requests[key] = request
        info = self.tool_parser_class()(self._tokenizer, request.tools).extract_tool_calls(text, request)
        if not info.tools_called:
            return text, []
        calls = [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments} for c in info.tool_calls]
        return info.content or "", calls

    async def _generate(self, ids: list[int], params: Any) -> Any:
        final = None
        async for out in self._engine.generate({"prompt_token_ids": ids}, params, request_id=f"{self._id_prefix}-{next(self._ids)}"):
            final = out
        return final.outputs[0]

    # -- a request ---------------------------------------------------------------------------------
    async def chat(self, req: dict[str, Any]) -> dict[str, Any]:
        self.requests += 1
        self.inflight += 1
        self.peak_inflight = max(self.peak_inflight, self.inflight)
        try:
            await self._ensure()
            return await self._chat(req)
        except Exception as exc:
            return self._error(exc)
        finally:
            self.inflight -= 1

    def _error(self, exc: Exception) -> dict[str, Any]:
        name = type(exc).__name__
        if name == "EngineDeadError":  # rebuilt on the next call; the caller may retry
            try:
                self.shutdown()
            except Exception:
                pass
            return {"error": f"{name}: {exc}", "retryable": True}
        # Bad requests (validation, prompt too long, a schema the grammar compiler rejects) are final.
        return {"error": f"{name}: {str(exc)[:500]}", "retryable": False}

    async def _chat(self, req: dict[str, Any]) -> dict[str, Any]:
        tools = req.get("tools") or None
        prompt = self.render(req["messages"], tools, dict(req.get("chat_template_kwargs") or {}))
        thinking = bool(req.get("thinking"))
        if thinking and not prompt.rstrip().endswith(THINK_OPEN):
            prompt += THINK_OPEN + "\n"
        # Tokenizing a long prompt takes milliseconds in the tokenizer's Rust code, which lets go of the
        # GIL: in a thread, the event loop meanwhile serves the other requests in flight.
        ids = await asyncio.to_thread(self.encode, prompt)
        room = self.max_model_len - len(ids)
        if room <= 1:
            raise ValueError(f"the prompt has {len(ids)} tokens; the context window is {self.max_model_len}")
        max_tokens = int(req.get("max_tokens") or room)  # no cap named: the window's remainder
        common = {"temperature": float(req.get("temperature") or 0.0), "seed": req.get("seed"), "skip_special_tokens": not tools}

        reasoning, answer_ids = None, ids
        if thinking:
            budget = req.get("thinking_budget")
            cap = room - 1 - min(max_tokens, room // 2)  # leave room for the answer
            limit = max(1, min(int(budget), cap) if budget is not None else cap)
            thought = await self._generate(ids, self.sampling(max_tokens=limit, stop=[THINK_CLOSE], **common))
            reasoning = thought.text.strip()
            # Stopped at </think> or cut at the budget: either way the thoughts are closed here.
            answer_ids = ids + self.encode(reasoning + THINK_END)
            room = self.max_model_len - len(answer_ids)
            if room <= 1:
                raise ValueError(f"no room left for the answer after {len(answer_ids) - len(ids)} thinking tokens")
        params = self.sampling(max_tokens=min(max_tokens, room - 1), json_schema=req.get("response_schema"), **common)
        out = await self._generate(answer_ids, params)
        text, calls = out.text, []
        if tools:
            text, calls = self.parse_tool_calls(out.text, tools)
        extra = len(answer_ids) - len(ids)  # thinking tokens (with their closing) count as completion
        return {
            "text": text,
            "tool_calls": calls,
            "prompt_tokens": len(ids),
            "completion_tokens": extra + len(out.token_ids),
            "reasoning_tokens": extra if thinking else None,
            "finish_reason": out.finish_reason,
            "reasoning": reasoning,
        }


# ---- where the engine runs ---------------------------------------------------------------------------


class EngineConnection(Protocol):
    """One backend's line to an `EngineServer` (arag.runtime.vllm_engine: a Ray actor)."""

    name: str  # the engine's name (equal specs share an engine)

    def start(self, timeout_s: float) -> dict[str, Any]:
        """Wait until the engine is up; its `ready()` info."""
        ...

    async def chat(self, req: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """The server's reply to `req`; raises LLMError when the engine cannot be reached in time."""
        ...

    def close(self) -> None: ...


# (spec, *, name, detached, max_inflight) -> a connection to the engine serving `spec`.
EngineConnector = Callable[..., EngineConnection]
_default_connector: EngineConnector | None = None


def set_engine_connector(connector: EngineConnector | None) -> None:
    """Where backends built without a `connector` run their engines (arag.runtime.vllm_engine sets it)."""
    global _default_connector
    _default_connector = connector


class VLLMBackend(LLMBackend):
    kind = "vllm"
    # Engine placement, memory and plumbing.
    runtime_keys = frozenset(
        {"num_gpus", "num_cpus", "gpu_memory_utilization", "kv_cache_gb", "max_num_seqs", "enforce_eager", "actor_name", "detached", "max_inflight", "timeout_s", "startup_timeout_s", "env"}
    )

    @classmethod
    def default_concurrency(cls, cfg: Mapping[str, Any]) -> int:
        # The engine's batch size: a worker per engine keeps its continuous batch full.
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
        """Worker `slot` talks to the engine actor `<name>-e<slot mod engines>`: an evaluation wants one
        engine per GPU (or per tensor-parallel group), each fed by its own workers, where backends
        with equal engine settings would otherwise share one. The name depends on the engine settings
        only (not the run), so the runs of a sweep over agent settings or reasoning effort can reuse
        detached engines (`detached: true`)."""
        material = {k: cfg.get(k) for k in sorted(EngineSpec.__dataclass_fields__) if k in cfg}
        base = cfg.get("actor_name") or "arag-eval-vllm-" + hashlib.sha1(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()[:12]
        return {"actor_name": f"{base}-e{slot % max(1, engines)}"}

    @classmethod
    def prepare_runtime(cls, cfg: Mapping[str, Any]) -> None:
        # Named, not imported: Ray loads only in processes that build this backend.
        if cfg.get("connector") is None and _default_connector is None:
            importlib.import_module(RUNTIME_MODULE)

    def __init__(
        self,
        model: str = "qwen2.5-coder-0.5b-instruct-q4",
        *,
        model_path: str | None = None,
        dtype: str = "bfloat16",
        max_model_len: int = 8192,
        tensor_parallel_size: int = 1,
        num_gpus: float = 0,
        num_cpus: float = 1,
        gpu_memory_utilization: float = 0.9,
        kv_cache_gb: float | None = None,
        enable_prefix_caching: bool = True,
        max_num_seqs: int = DEFAULT_MAX_NUM_SEQS,
        enforce_eager: bool = False,
        tool_parser: str | None = "auto",
        max_tokens: int | None = None,
        temperature: float = 0.0,
        seed: int | None = 0,
        reasoning_effort: str | None = None,
        family: str | None = None,
        on_unsupported: str = "error",
        actor_name: str | None = None,
        detached: bool = False,
        max_inflight: int = DEFAULT_MAX_INFLIGHT,
        timeout_s: float = 600.0,
        startup_timeout_s: float = 1800.0,
        engine_kwargs: dict[str, Any] | None = None,
        env: dict[str, Any] | None = None,
        connector: EngineConnector | None = None,
    ):
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
        # Qwen3 thinks unless its template is told not to; the two-phase generation then applies.
        self.thinking = family == "qwen3" and self.reasoning.chat_template_kwargs.get("enable_thinking", True)
        self.context_window = max_model_len
        self.seed = seed
        self.timeout_s, self.startup_timeout_s = timeout_s, startup_timeout_s
        self.detached, self.max_inflight = detached, max_inflight
        self._model_path = model_path
        self._spec_args = dict(
            dtype=dtype,
            max_model_len=max_model_len,
            tensor_parallel_size=tensor_parallel_size,
            num_gpus=num_gpus,
            num_cpus=num_cpus,
            gpu_memory_utilization=gpu_memory_utilization,
            kv_cache_gb=kv_cache_gb,
            enable_prefix_caching=enable_prefix_caching,
            max_num_seqs=max_num_seqs,
            enforce_eager=enforce_eager,
            seed=seed or 0,
            tool_parser=tool_parser,
            engine_kwargs=dict(engine_kwargs or {}),
            env={k: str(v) for k, v in (env or {}).items()},
        )
        self._requested_name = actor_name
        self._connector = connector
        self._connection: EngineConnection | None = None
        self._connection_lock = threading.Lock()
        self.actor_name: str | None = None
        self._started = False

    def share_engine_of(self, owner: "VLLMBackend") -> None:
        """A view of `owner` (arag.llm.instrument): its engine connection, its own settings."""
        self.thinking = self.family == "qwen3" and self.reasoning.chat_template_kwargs.get("enable_thinking", True)
        self.connection = owner.connection  # type: ignore[method-assign]

    # -- engine settings ---------------------------------------------------------------------------
    def model_path(self) -> str:
        """What the engine loads: `model_path`, else a packaged GGUF model converted to an HF folder
        (arag.llm.convert; once, cached), else `model` itself (a hub id or a folder)."""
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

    # -- requests ----------------------------------------------------------------------------------
    def request(self, messages: list[Message], tools: list[dict[str, Any]] | None, response_schema: dict[str, Any] | None, max_tokens: int | None) -> dict[str, Any]:
        """The plain-dict request the actor's `chat` takes."""
        return {
            "messages": [m.to_openai() for m in messages],
            "tools": tools or None,
            "response_schema": response_schema,
            "max_tokens": max_tokens or self.max_tokens,
            "temperature": self.temperature,
            "seed": self.seed,
            "chat_template_kwargs": dict(self.reasoning.chat_template_kwargs),
            "thinking": self.thinking,
            "thinking_budget": self.reasoning.thinking_budget,
        }

    def connection(self) -> EngineConnection:
        """The connection to this backend's engine (made on first use: equal specs share an engine)."""
        with self._connection_lock:  # episodes starting together ask at once: one registration per backend
            if self._connection is None:
                connect = self._connector or _default_connector
                if connect is None:
                    raise ConfigurationError(f"the vllm backend runs its engines as Ray actors: import {RUNTIME_MODULE} first (make_backend does), or pass connector=")
                self._connection = connect(self.spec(), name=self._requested_name, detached=self.detached, max_inflight=self.max_inflight)
                self.actor_name = self._connection.name
            return self._connection

    def start(self, timeout_s: float | None = None) -> dict[str, Any]:
        """Start the engine and wait until it is up (optional: the first call does it too)."""
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
