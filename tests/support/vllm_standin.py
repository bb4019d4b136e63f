"""A stand-in for vLLM's engine inside the real `EngineServer` actor (arag/llm/vllm_server.py), so that
`pipelines.evaluate model=vllm` runs with thousands of episodes in flight on a machine without a GPU.

Only the engine's arithmetic is simulated: `StandInServer` is `EngineServer` with `_build` giving a
`StandInEngine` beside the model's real tokenizer (vLLM's own `get_tokenizer`), so the chat template
rendering, the tokenizing, vLLM's sampling parameters and its tool-call parser all run for real, on
the actor's event loop as they do with a real engine. The engine chooses each reply with the stand-ins'
agent policy (tests/support/agent_policy.py), writes it as the model would (a Hermes `<tool_call>`
block for a native tool call, a JSON action under the JSON protocol, the answer as text) and answers
after the time one vLLM engine would take (`EngineModel` of tests/support/engine_model.py: batch
slots, serial prefill, decode steps growing with the batch), with vLLM's prefix cache over the real
prompt's token ids in 16-token blocks (LRU within the KV cache).

The server also measures what the issue asks of the actor: thread CPU seconds spent rendering,
tokenizing and parsing, and the lag of its event loop (a task that sleeps `LAG_TICK_S` and records how
late it wakes). `standin_stats()` returns them with the engine's counts and the timestamps of episode
starts and answers (for a steady-window rate).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import OrderedDict
from contextvars import ContextVar
from dataclasses import asdict
from types import SimpleNamespace
from typing import Any

from arag.llm.vllm_server import EngineServer
from tests.support.agent_policy import AgentPolicy
from tests.support.engine_model import EngineModel

# The request being served, for the engine (which vLLM hands token ids only) to choose its reply.
_REQUEST: ContextVar[dict[str, Any] | None] = ContextVar("standin_request", default=None)
DECODE_CHUNK_TOKENS = 16  # tokens decoded between two re-readings of the batch size
LAG_TICK_S = 0.05


def request_body(req: dict[str, Any]) -> dict[str, Any]:
    """The EngineServer request as the OpenAI-style body the agent policy reads."""
    body: dict[str, Any] = {"messages": req.get("messages") or [], "tools": req.get("tools") or None}
    if req.get("response_schema"):
        body["response_format"] = {"type": "json_schema", "json_schema": {"schema": req["response_schema"]}}
    return body


def reply_text(action: dict[str, Any], native: bool) -> str:
    """What the model writes for `action`: a Hermes tool-call block (Qwen2.5/Qwen3 templates, the
    hermes parser), the answer's text, or under the JSON protocol the action as JSON."""
    if not native:
        return json.dumps(action)
    if "tool" in action:
        return "<tool_call>\n" + json.dumps({"name": action["tool"], "arguments": action["arguments"]}) + "\n</tool_call>"
    return action.get("answer") or json.dumps(action)


class CpuSampler:
    """Thread CPU seconds per call of named steps, timed on one call in `every` of each (reading a
    thread's CPU clock is a system call, dearer than some of the steps on a loaded machine)."""

    def __init__(self, every: int = 8):
        self.every = every
        self.calls: dict[str, int] = {}
        self.timed: dict[str, list[float]] = {}  # name -> [calls timed, seconds]

    def measure(self, name: str, fn: Any, *args: Any) -> Any:
        n = self.calls[name] = self.calls.get(name, 0) + 1
        if n % self.every:
            return fn(*args)
        t = time.thread_time()
        try:
            return fn(*args)
        finally:
            entry = self.timed.setdefault(name, [0, 0.0])
            entry[0] += 1
            entry[1] += time.thread_time() - t

    def per_call_s(self) -> dict[str, float]:
        return {name: seconds / n for name, (n, seconds) in self.timed.items() if n}

    def total_s(self) -> dict[str, float]:
        """Estimated seconds over every call: the timed calls' mean x calls."""
        return {name: self.calls[name] * mean for name, mean in self.per_call_s().items()}


class BlockCache:
    """vLLM's automatic prefix cache: full 16-token blocks keyed by a hash chain over the token ids,
    least recently used evicted when the cache and the running sequences exceed the KV cache."""

    def __init__(self, model: EngineModel):
        self.model = model
        self.blocks: OrderedDict[int, None] = OrderedDict()

    def keys(self, ids: list[int]) -> list[int]:
        size, h, out = self.model.block_tokens, 0, []
        for i in range(0, len(ids) - size + 1, size):
            h = hash((h, tuple(ids[i : i + size])))
            out.append(h)
        return out

    def hit_tokens(self, keys: list[int]) -> int:
        hit = 0
        for key in keys:
            if key not in self.blocks:
                break
            self.blocks.move_to_end(key)
            hit += 1
        return hit * self.model.block_tokens

    def insert(self, keys: list[int], running_tokens: int) -> None:
        for key in keys:
            self.blocks[key] = None
            self.blocks.move_to_end(key)
        room = max(0, self.model.kv_cache_tokens - running_tokens) // self.model.block_tokens
        while len(self.blocks) > room:
            self.blocks.popitem(last=False)


class StandInEngine:
    """`generate` as vLLM's AsyncLLM offers it (one final output), timed by `EngineModel`."""

    def __init__(self, tokenizer: Any, model: EngineModel, time_scale: float, policy: AgentPolicy = AgentPolicy()):
        self.tokenizer, self.model, self.time_scale, self.policy = tokenizer, model, float(time_scale), policy
        self.cache = BlockCache(model)
        self._slots: asyncio.Semaphore | None = None
        self._prefill_free_at = 0.0
        self.running = self.running_tokens = 0
        self.reset()

    def reset(self) -> None:
        self.counts = {"requests": 0, "in_flight": 0, "peak_in_flight": 0, "peak_running": 0, "prompt_tokens": 0, "cached_tokens": 0, "completion_tokens": 0, "episodes_started": 0, "episodes_answered": 0}
        self.started_at: list[float] = []  # wall time of each episode's first request
        self.answered_at: list[float] = []  # wall time of each answer
        self.cpu = CpuSampler()  # the stand-in's own work (policy, reply tokens, cache keys): not the path's

    async def generate(self, prompt: dict[str, Any], params: Any, request_id: str):
        c = self.counts
        c["requests"] += 1
        c["in_flight"] += 1
        c["peak_in_flight"] = max(c["peak_in_flight"], c["in_flight"])
        try:
            yield await self._generate(list(prompt["prompt_token_ids"]), params)
        finally:
            c["in_flight"] -= 1

    async def _generate(self, ids: list[int], params: Any) -> Any:
        c, loop = self.counts, asyncio.get_running_loop()
        req = _REQUEST.get() or {}
        body = request_body(req)
        if not any(m.get("role") == "assistant" for m in body["messages"]):
            c["episodes_started"] += 1
            self.started_at.append(time.time())
        action, text, out_ids, finish, keys = self.cpu.measure("reply", self._reply, body, ids, params)
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.model.max_num_seqs)
        async with self._slots:
            self.running += 1
            c["peak_running"] = max(c["peak_running"], self.running)
            size = len(ids) + len(out_ids)
            self.running_tokens += size
            try:
                cached = min(self.cache.hit_tokens(keys), len(ids))
                begin = max(loop.time(), self._prefill_free_at)
                self._prefill_free_at = begin + self.model.prefill_s(len(ids), cached) * self.time_scale
                await asyncio.sleep(max(0.0, self._prefill_free_at - loop.time()))
                left = len(out_ids)
                while left > 0:  # the step time follows the batch as it is now
                    n = min(left, DECODE_CHUNK_TOKENS)
                    await asyncio.sleep(self.model.decode_s(n, self.running) * self.time_scale)
                    left -= n
                self.cpu.measure("cache", lambda: self.cache.insert(self.cache.keys(ids + out_ids), self.running_tokens))
            finally:
                self.running -= 1
                self.running_tokens -= size
        c["prompt_tokens"] += len(ids)
        c["cached_tokens"] += cached
        c["completion_tokens"] += len(out_ids)
        if "tool" not in action:
            c["episodes_answered"] += 1
            self.answered_at.append(time.time())
        return SimpleNamespace(outputs=[SimpleNamespace(text=text, token_ids=out_ids, finish_reason=finish)], finished=True)

    def _reply(self, body: dict[str, Any], ids: list[int], params: Any) -> tuple[dict[str, Any], str, list[int], str, list[int]]:
        action = self.policy.next_action(body)
        text = reply_text(action, native=bool(body["tools"]))
        out_ids = list(self.tokenizer.encode(text, add_special_tokens=False))
        finish = "stop"
        if params.max_tokens is not None and len(out_ids) > params.max_tokens:
            out_ids, finish = out_ids[: params.max_tokens], "length"
            text = self.tokenizer.decode(out_ids)
        return action, text, out_ids, finish, self.cache.keys(ids)


class LagMonitor:
    """How late the event loop wakes a task that sleeps `tick` seconds: a loop busy with synchronous
    work (rendering, tokenizing, parsing) delays every reply and every request it holds."""

    def __init__(self, tick: float = LAG_TICK_S):
        self.tick = tick
        self.lags: list[float] = []
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            t = loop.time()
            await asyncio.sleep(self.tick)
            self.lags.append(max(0.0, loop.time() - t - self.tick))

    def summary(self) -> dict[str, float]:
        lags = sorted(self.lags)
        if not lags:
            return {"samples": 0}
        pick = lambda q: lags[min(len(lags) - 1, int(q * len(lags)))]  # noqa: E731
        return {"samples": len(lags), "mean_ms": 1e3 * sum(lags) / len(lags), "p50_ms": 1e3 * pick(0.5), "p99_ms": 1e3 * pick(0.99), "max_ms": 1e3 * lags[-1]}


class StandInServer(EngineServer):
    """The real EngineServer with a stand-in engine and the model's real tokenizer (`tokenizer_path`:
    an HF folder, read offline). `engine`: EngineModel's fields; `time_scale` multiplies every
    simulated duration."""

    def __init__(self, spec: dict[str, Any], tokenizer_path: str, engine: dict[str, Any] | None = None, time_scale: float = 1.0, tokenizer: Any = None):
        super().__init__(spec, tokenizer=tokenizer)
        self.tokenizer_path = tokenizer_path
        self.engine_model = EngineModel(**(engine or {}))
        self.time_scale = time_scale
        self.cpu = CpuSampler()
        self.lag = LagMonitor()
        self._process_cpu = time.process_time()
        if tokenizer is not None:
            self._engine = StandInEngine(tokenizer, self.engine_model, time_scale)

    def _build(self) -> tuple[Any, Any]:
        from vllm.tokenizers import get_tokenizer

        tokenizer = get_tokenizer(self.tokenizer_path)
        return StandInEngine(tokenizer, self.engine_model, self.time_scale), tokenizer

    async def chat(self, req: dict[str, Any]) -> dict[str, Any]:
        self.lag.start()
        token = _REQUEST.set(req)
        try:
            return await super().chat(req)
        finally:
            _REQUEST.reset(token)

    def render(self, messages, tools, template_kwargs):
        return self.cpu.measure("render", super().render, messages, tools, template_kwargs)

    def encode(self, text):
        return self.cpu.measure("encode", super().encode, text)

    def parse_tool_calls(self, text, tools):
        return self.cpu.measure("parse", super().parse_tool_calls, text, tools)

    async def standin_stats(self, reset: bool = False) -> dict[str, Any]:
        engine = self._engine
        out = {
            "server": self.stats(),
            "engine": dict(engine.counts) if engine else {},
            "engine_model": asdict(self.engine_model),
            "time_scale": self.time_scale,
            # estimated seconds of each step over all its calls, the stand-in engine's own ("standin"), and
            # the actor process's CPU since the last reset (every thread: Ray's included)
            "cpu_s": {**self.cpu.total_s(), "standin": sum(engine.cpu.total_s().values()) if engine else 0.0, "process": time.process_time() - self._process_cpu},
            "cpu_calls": dict(self.cpu.calls),
            "loop_lag": self.lag.summary(),
            "started_at": list(engine.started_at) if engine else [],
            "answered_at": list(engine.answered_at) if engine else [],
        }
        if reset:
            self.cpu = CpuSampler()
            self._process_cpu = time.process_time()
            self.lag.lags = []
            self.requests = 0
            self.stats(reset_peak=True)
            if engine:
                engine.reset()
        return out


# ---- the figures of a run over one or more stand-in actors (standin_stats of each) -----------------


def steady_rate(started: list[float], answered: list[float], in_flight: int) -> dict[str, Any]:
    """Episodes/min from the first wave's answers to the last episode's first request (every slot busy
    throughout), else over the whole run (first start to last answer)."""
    started, answered = sorted(started), sorted(answered)
    if not answered:
        return {"basis": "none", "episodes_per_min": 0.0}
    if len(answered) >= in_flight and started:
        t0, t1 = answered[in_flight - 1], started[-1]
        inside = sum(t0 < t <= t1 for t in answered)
        if t1 > t0 and inside >= in_flight:
            return {"basis": "steady", "episodes": inside, "window_s": round(t1 - t0, 1), "episodes_per_min": 60 * inside / (t1 - t0)}
    span = answered[-1] - started[0] if started else 0
    return {"basis": "whole", "episodes": len(answered), "window_s": round(span, 1), "episodes_per_min": 60 * len(answered) / span if span > 0 else 0.0}


def ideal_per_min(stats: list[dict[str, Any]], in_flight_per_engine: int) -> dict[str, Any]:
    """The sum over engines of the simulator's ideal for this run's mean call, in wall-clock minutes."""
    total, parts = 0.0, []
    for s in stats:
        e = s["engine"]
        if not e.get("episodes_answered") or not e.get("requests"):
            continue
        calls = e["requests"] / e["episodes_answered"]
        uncached = (e["prompt_tokens"] - e["cached_tokens"]) / e["requests"]
        completion = e["completion_tokens"] / e["requests"]
        ideal = EngineModel(**s["engine_model"]).ideal_episodes_per_min(in_flight_per_engine, calls, uncached, completion) / s["time_scale"]
        parts.append({"calls_per_episode": round(calls, 2), "uncached_prompt_tokens": round(uncached, 1), "completion_tokens": round(completion, 1), "episodes_per_min": round(ideal, 1)})
        total += ideal
    return {"episodes_per_min": total, "engines": parts}
