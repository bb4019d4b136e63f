"""The vLLM engine server run inside an engine actor: one `AsyncLLM` engine, plain-dict requests and
replies (they cross Ray). With Qwen3 thinking on, a reply is generated in two phases, the thoughts
(unconstrained, stopped at `</think>` or the budget) then the constrained answer: the budget is a
real cap and the JSON grammar stays off the thoughts."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import json
import os
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_MAX_NUM_SEQS = 64  # the engine's batch size

# EngineSpec fields that vLLM's engine takes as they are.
ENGINE_ARG_FIELDS = ("dtype", "max_model_len", "tensor_parallel_size", "gpu_memory_utilization", "enable_prefix_caching", "max_num_seqs", "enforce_eager", "seed")

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
# Appended after the (possibly cut) thoughts; Qwen3's canonical layout is "<think>\n…\n</think>\n\n".
THINK_END = "\n" + THINK_CLOSE + "\n\n"


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
        args: dict[str, Any] = {"model": self.model_path, "tokenizer": self.model_path, "served_model_name": self.model, "disable_log_stats": True}
        args.update({name: getattr(self, name) for name in ENGINE_ARG_FIELDS})
        if self.kv_cache_gb:
            args["kv_cache_memory_bytes"] = int(self.kv_cache_gb * (1 << 30))
        args.update(self.engine_kwargs)
        return args


def normalize_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool-call arguments as objects (HF templates write `arguments | tojson`; a string would be
    quoted twice); unparseable arguments stay text."""
    out = [dict(m) for m in messages]
    for m in out:
        if m.get("tool_calls"):
            m["tool_calls"] = [{**c, "function": dict(c.get("function") or {})} for c in m["tool_calls"]]
            for function in (c["function"] for c in m["tool_calls"]):
                if isinstance(function.get("arguments"), str):
                    with contextlib.suppress(ValueError, RecursionError):
                        function["arguments"] = json.loads(function["arguments"])
    return out


class EngineServer:
    """`chat` never raises for a failed request: it returns {"error", "retryable"} (a bad request is
    final; a dead engine is rebuilt and the call may be retried)."""

    def __init__(self, spec: dict[str, Any], engine: Any = None, tokenizer: Any = None):
        self.spec = dict(spec)
        self.max_model_len = int(self.spec["max_model_len"])
        self._engine, self._tokenizer = engine, tokenizer
        self._lock = asyncio.Lock()
        self._tool_parser_cls: Any = None
        self._parse_requests: dict[str, Any] = {}  # the parser's request, per tool set
        # Request ids unique within the engine, without a random draw (a syscall) per request.
        self._id_prefix, self._ids = uuid.uuid4().hex[:12], itertools.count()
        self.requests = self.inflight = self.peak_inflight = 0

    def _build(self) -> tuple[Any, Any]:
        try:
            from vllm.engine.arg_utils import AsyncEngineArgs
            from vllm.v1.engine.async_llm import AsyncLLM
        except ImportError as exc:
            raise ImportError("the vllm backend needs vLLM in this environment: make one with cluster/install_vllm.sh cpu|gpu (see docs/agents.md)") from exc

        engine = AsyncLLM.from_engine_args(AsyncEngineArgs(**self.spec["engine_args"]))
        return engine, engine.get_tokenizer()

    async def _ensure(self) -> None:
        if self._engine is not None:
            return
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
        out = {"requests": self.requests, "inflight": self.inflight, "peak_inflight": self.peak_inflight}
        if reset_peak:
            self.peak_inflight = self.inflight
        return out

    def shutdown(self) -> None:
        engine, self._engine = self._engine, None
        if engine is not None and hasattr(engine, "shutdown"):
            engine.shutdown()

    # The pieces below are overridden by the tests' fake server.
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
            with contextlib.suppress(Exception):
                self.shutdown()
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
