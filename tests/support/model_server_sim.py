"""A simulated GPU model server: an OpenAI-compatible `/v1/chat/completions` endpoint that answers with
valid agent actions after the time one vLLM engine would take, so the evaluation harness can be run at
thousands of episodes in flight on a machine without a GPU (everything is real except the model's
arithmetic).

    python -m tests.support.model_server_sim [--host 127.0.0.1] [--port 8000] [--max-num-seqs 256]
        [--time-scale 1.0] [--prefill-tps 24000] [--decode-base-ms 6.5] [--decode-per-seq-ms 0.055]
        [--kv-cache-tokens 400000]

    python -m pipelines.evaluate model=openai model.base_url=http://127.0.0.1:8000/v1 ...
    curl 'http://127.0.0.1:8000/stats?episodes_in_flight=256'

Replies come from the stand-ins' one agent policy (tests/support/agent_policy.py): every offered tool
once, in the order offered, one call per reply, then the answer.

The engine model (one vLLM engine serving Llama-3.1-8B-Instruct in BF16 on one H100 SXM 80GB; each
figure says whether it is published or derived, and from what):

* Batch slots: at most `max_num_seqs` = 256 sequences run at once (vLLM's default `--max-num-seqs`,
  docs.vllm.ai "Engine Arguments"); later requests wait in FIFO order for a slot.
* Decode: each engine step emits one token for every running sequence and takes
  `decode_base + decode_per_seq * running` seconds.
  - decode_base = 6.5 ms (~155 tokens/s for a lone sequence): derived. One request at a time runs at
    ~75 tokens/s on an A100 40GB, ~77% of its memory-bandwidth roofline (J. Musgrave, "vLLM
    throughput-latency sweep on NVIDIA A100", Llama-3.1-8B-Instruct BF16, vLLM 0.23); decode at
    batch 1 is bound by reading the weights, so it scales with memory bandwidth: x 3.35/1.56 TB/s
    for the H100 SXM.
  - decode_per_seq = 0.055 ms: derived from the published saturated rate, ~12,500 output tokens/s for
    Llama 3.1 8B BF16 on one H100 80GB with vLLM (FlashInfer, gpu_memory_utilization 0.8; the table
    of third-party results at morphllm.com/vllm-benchmarks): 256 sequences / 12,500 tokens/s =
    20.5 ms per step at 256 running, so (20.5 - 6.5) / 255 ms per extra sequence.
* Prefill: 24,000 prompt tokens/s for the whole engine, one prompt after another (a request's prefill
  waits for the ones ahead of it): derived, 2 x 8.0e9 FLOP per token at ~40% of the H100 SXM's
  989 TFLOP/s dense BF16. Prefill does not slow the decode steps running beside it (vLLM's chunked
  prefill mixes both into one step; ignored here).
* Prefix cache (vLLM's automatic prefix caching): the longest prefix of the conversation that an
  earlier request left in the cache, in whole 16-token blocks (vLLM's default block size), is not
  prefilled again. Prefixes end at message boundaries: an episode's next request finds its previous
  request and the reply to it. The tools and system prompt are one shared prefix of every episode of a
  method. Cached blocks are evicted least recently used first when the cache plus the running
  sequences' own blocks exceed the KV cache: 400,000 tokens, derived (80 GB x 0.9 default
  gpu_memory_utilization, less 16 GB of weights and ~4 GB of activations, at 128 KiB per token:
  32 layers x 8 KV heads x 128 dims x K and V x 2 bytes).
* Tokens: 4 characters per token (a rule of thumb for English), counted over the messages and the
  tool schemas; a reply's tokens are its text (or tool call) plus the reasoning tokens of its
  `reasoning_effort` (none/minimal 0, low 256, medium 1,024, high 4,096: an assumption, reported as
  reasoning_tokens).

`time_scale` multiplies every simulated duration (0.01: a hundred times faster than the engine, for
tests); the statistics are in engine seconds.

GET /stats: requests in flight now and at peak (arrived, not yet answered, queued ones included),
running sequences now and at peak, requests, episodes started (requests with no assistant turn) and
answered, tool calls per tool, prompt / cached / completion tokens, mean queue and service time,
requests aborted (the client disconnected first: dropped from the queue or the batch), and,
with `?episodes_in_flight=N`, the ideal episodes/min for N episodes in flight with this run's mean
episode (`ideal_episodes_per_min`). POST /stats/reset zeroes the counts (peaks too).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import time
from collections import Counter, OrderedDict
from dataclasses import asdict, dataclass, field
from typing import Any

from tests.support.agent_policy import AgentPolicy, render_reply, text_of

CHARS_PER_TOKEN = 4
REASONING_TOKENS = {None: 0, "none": 0, "minimal": 0, "low": 256, "medium": 1024, "high": 4096}
# Tokens decoded between two re-readings of the batch size (the step time follows the running count).
DECODE_CHUNK_TOKENS = 16


@dataclass(frozen=True)
class EngineModel:
    """One vLLM engine's timing (see the module doc for where each default comes from)."""

    max_num_seqs: int = 256
    prefill_tps: float = 24_000.0
    decode_base_s: float = 0.0065
    decode_per_seq_s: float = 0.000055
    kv_cache_tokens: int = 400_000
    block_tokens: int = 16

    def step_s(self, running: int) -> float:
        """One decode step with `running` sequences in the batch."""
        return self.decode_base_s + self.decode_per_seq_s * max(1, min(running, self.max_num_seqs))

    def decode_s(self, tokens: int, running: int) -> float:
        return tokens * self.step_s(running)

    def prefill_s(self, prompt_tokens: int, cached_tokens: int = 0) -> float:
        return max(0, prompt_tokens - cached_tokens) / self.prefill_tps

    def cached(self, prefix_tokens: int) -> int:
        """The part of a cached prefix that is reused: whole blocks only."""
        return prefix_tokens // self.block_tokens * self.block_tokens

    def ideal_episodes_per_min(self, episodes_in_flight: int, calls_per_episode: float, uncached_prompt_tokens: float, completion_tokens: float) -> float:
        """Episodes/min with `episodes_in_flight` episodes each making `calls_per_episode` model calls
        in a chain, with no time outside the model (tools, harness): the least of the latency bound
        (each episode waits for its own calls, at the batch its load makes) and the prefill bound
        (the engine prefills one prompt at a time). Above `max_num_seqs` the extra episodes only
        queue: the slots bound."""
        if episodes_in_flight <= 0 or calls_per_episode <= 0:
            return 0.0
        running = min(episodes_in_flight, self.max_num_seqs)
        call_s = self.prefill_s(round(uncached_prompt_tokens)) + self.decode_s(round(completion_tokens), running)
        per_s = running / (calls_per_episode * call_s) if call_s > 0 else float("inf")
        if uncached_prompt_tokens > 0:
            per_s = min(per_s, self.prefill_tps / (calls_per_episode * uncached_prompt_tokens))
        return 60.0 * per_s


def tokens_of(text: str) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


class PrefixCache:
    """Cached conversation prefixes, each ending at a message boundary and keyed by a hash chain over
    the messages up to there; each entry holds the tokens it adds to its parent prefix, and the
    total stays within the KV cache left beside the running sequences (LRU eviction)."""

    def __init__(self, model: EngineModel):
        self.model = model
        self.entries: OrderedDict[str, int] = OrderedDict()
        self.tokens = 0

    @staticmethod
    def keys(pieces: list[str]) -> list[str]:
        keys, h = [], hashlib.blake2b(digest_size=16)
        for piece in pieces:
            h.update(piece.encode("utf-8", "surrogatepass"))
            h.update(b"\x00")
            keys.append(h.copy().hexdigest())
        return keys

    def lookup(self, keys: list[str], sizes: list[int]) -> int:
        """Tokens of the longest cached prefix (whole blocks); the entries found become most recent."""
        hit = 0
        for key, size in zip(keys, sizes):
            if key not in self.entries:
                break
            self.entries.move_to_end(key)
            hit += size
        return self.model.cached(hit)

    def insert(self, keys: list[str], sizes: list[int], running_tokens: int) -> None:
        for key, size in zip(keys, sizes):
            if key in self.entries:
                self.entries.move_to_end(key)
            else:
                self.entries[key] = size
                self.tokens += size
        room = max(0, self.model.kv_cache_tokens - running_tokens)
        while self.tokens > room and self.entries:
            _, size = self.entries.popitem(last=False)
            self.tokens -= size


def canonical(message: dict[str, Any]) -> str:
    """What a message puts into the prompt, the same whichever way a client spells it (a null or
    empty content, extra fields): role, text and tool calls."""
    calls = ";".join(f"{c['function']['name']}({c['function'].get('arguments') or ''})" for c in message.get("tool_calls") or [])
    return f"{message.get('role')}\x1f{text_of(message.get('content'))}\x1f{calls}"


# -- the engine ----------------------------------------------------------------------------------


@dataclass
class Stats:
    in_flight: int = 0
    peak_in_flight: int = 0
    running: int = 0
    peak_running: int = 0
    requests: int = 0
    episodes_started: int = 0
    episodes_answered: int = 0
    tool_calls: Counter = field(default_factory=Counter)
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    queue_s: float = 0.0  # engine seconds waiting for a slot, summed
    aborted: int = 0  # requests whose client disconnected before the reply: dropped, as vLLM aborts them
    service_s: float = 0.0  # engine seconds from a slot to the reply (prefill wait, prefill, decode), summed


class SimulatedEngine:
    def __init__(self, model: EngineModel = EngineModel(), time_scale: float = 1.0, policy: AgentPolicy = AgentPolicy()):
        if not time_scale > 0:
            raise ValueError(f"time_scale must be positive, got {time_scale}")
        self.model = model
        self.time_scale = float(time_scale)
        self.policy = policy
        self.cache = PrefixCache(model)
        self.stats = Stats()
        self._slots: asyncio.Semaphore | None = None
        self._prefill_free_at = 0.0  # loop time at which the prefill lane is free
        self._running_tokens = 0
        self._serial = 0

    def reset(self) -> None:
        self.stats = Stats(in_flight=self.stats.in_flight, running=self.stats.running)
        self.stats.peak_in_flight, self.stats.peak_running = self.stats.in_flight, self.stats.running

    async def _sleep(self, engine_s: float) -> None:
        if engine_s > 0:
            await asyncio.sleep(engine_s * self.time_scale)

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        stats = self.stats
        stats.requests += 1
        stats.in_flight += 1
        stats.peak_in_flight = max(stats.peak_in_flight, stats.in_flight)
        try:
            return await self._complete(body, stats)
        finally:
            stats.in_flight -= 1

    async def _complete(self, body: dict[str, Any], stats: Stats) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.model.max_num_seqs)
        messages = body.get("messages") or []
        if not any(m.get("role") == "assistant" for m in messages):
            stats.episodes_started += 1
        action = self.policy.next_action(body)
        self._serial += 1
        reply = render_reply(action, body, self._serial)
        # The prompt as the engine sees it: the tool schemas (chat templates render them into the
        # system turn; a JSON action schema only steers decoding) and each message, in order.
        tools = json.dumps(body.get("tools") or [], sort_keys=True)
        pieces = [tools] + [canonical(m) for m in messages]
        sizes = [tokens_of(tools)] + [tokens_of(json.dumps(m)) for m in messages]
        prompt = sum(sizes)
        reply_text = json.dumps(reply["message"])
        reasoning = REASONING_TOKENS.get(body.get("reasoning_effort"), 0)
        completion = tokens_of(reply_text) + reasoning
        arrived = loop.time()
        async with self._slots:
            started = loop.time()
            stats.queue_s += (started - arrived) / self.time_scale
            stats.running += 1
            stats.peak_running = max(stats.peak_running, stats.running)
            self._running_tokens += prompt + completion
            try:
                keys = self.cache.keys(pieces)
                cached = min(self.cache.lookup(keys, sizes), prompt)
                begin = max(loop.time(), self._prefill_free_at)
                self._prefill_free_at = begin + self.model.prefill_s(prompt, cached) * self.time_scale
                await asyncio.sleep(max(0.0, self._prefill_free_at - loop.time()))
                left = completion
                while left > 0:  # the step time follows the batch as it is now
                    n = min(left, DECODE_CHUNK_TOKENS)
                    await self._sleep(self.model.decode_s(n, stats.running))
                    left -= n
                # The reply joins the conversation's cached prefix, for the episode's next request.
                reply_key = self.cache.keys(pieces + [canonical(reply["message"])])[-1]
                self.cache.insert(keys + [reply_key], sizes + [tokens_of(reply_text)], self._running_tokens)
            finally:
                stats.running -= 1
                self._running_tokens -= prompt + completion
            stats.service_s += (loop.time() - started) / self.time_scale
        stats.prompt_tokens += prompt
        stats.cached_tokens += cached
        stats.completion_tokens += completion
        if "tool" in action:
            stats.tool_calls[action["tool"]] += 1
        else:
            stats.episodes_answered += 1
        usage = {"prompt_tokens": prompt, "completion_tokens": completion,
                 "prompt_tokens_details": {"cached_tokens": cached}, "completion_tokens_details": {"reasoning_tokens": reasoning}}
        return {"id": f"chatcmpl-sim-{self._serial}", "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model", "simulated"), "choices": [{"index": 0, **reply}], "usage": usage}

    def snapshot(self, episodes_in_flight: int | None = None) -> dict[str, Any]:
        s = self.stats
        done = s.requests - s.in_flight - s.aborted  # answered requests: an abandoned one is no call of any episode
        out = {k: v for k, v in asdict(s).items() if k != "tool_calls"}
        out["tool_calls"] = dict(s.tool_calls)
        out["mean_queue_s"] = s.queue_s / done if done else 0.0
        out["mean_service_s"] = s.service_s / done if done else 0.0
        out["engine"] = asdict(self.model)
        out["time_scale"] = self.time_scale
        if episodes_in_flight is not None and s.episodes_answered and done:
            calls = done / s.episodes_answered
            uncached = (s.prompt_tokens - s.cached_tokens) / done
            out["ideal"] = {
                "episodes_in_flight": episodes_in_flight,
                "calls_per_episode": calls,
                "uncached_prompt_tokens": uncached,
                "completion_tokens": s.completion_tokens / done,
                # per minute of engine time; divide by time_scale for wall-clock minutes
                "episodes_per_min": self.model.ideal_episodes_per_min(episodes_in_flight, calls, uncached, s.completion_tokens / done),
            }
        return out


def create_app(engine: SimulatedEngine):
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response

    from arag.serve.http_api import CLIENT_GONE, ClientGone, unless_disconnected
    from starlette.routing import Route

    async def chat(request: Request) -> JSONResponse:
        try:
            body = await request.json()
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                raise ValueError("the body needs a list of messages")
        except ValueError as exc:
            return JSONResponse({"error": {"message": f"bad request: {exc}", "type": "invalid_request_error"}}, status_code=400)
        try:
            # A client that gave up (its timeout) is gone: the request leaves the queue or the batch,
            # as vLLM aborts a disconnected request, instead of taking a slot no one reads.
            reply = await unless_disconnected(request, engine.complete(body))
        except ClientGone:
            engine.stats.aborted += 1
            return Response(status_code=CLIENT_GONE)
        return JSONResponse(reply)

    async def stats(request: Request) -> JSONResponse:
        n = request.query_params.get("episodes_in_flight")
        return JSONResponse(engine.snapshot(int(n) if n else None))

    async def reset(request: Request) -> JSONResponse:
        engine.reset()
        return JSONResponse({"reset": True})

    async def models(request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": "simulated", "object": "model"}]})

    return Starlette(routes=[
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/stats", stats, methods=["GET"]),
        Route("/stats/reset", reset, methods=["POST"]),
    ])


class ServerThread:
    """The simulator on a background thread of this process (tests, benchmarks): `with
    ServerThread(engine) as server:` ... `server.base_url` ('http://127.0.0.1:<port>/v1')."""

    def __init__(self, engine: SimulatedEngine, host: str = "127.0.0.1", port: int = 0):
        import threading

        import uvicorn

        config = uvicorn.Config(create_app(engine), host=host, port=port, log_level="warning", lifespan="off", backlog=4096)
        self.engine = engine
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="model-server-sim", daemon=True)

    def __enter__(self) -> "ServerThread":
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the simulated model server did not start")
            time.sleep(0.02)
        host, port = self.server.servers[0].sockets[0].getsockname()[:2]
        self.base_url = f"http://{host}:{port}/v1"
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    defaults = EngineModel()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--max-num-seqs", type=int, default=defaults.max_num_seqs)
    p.add_argument("--prefill-tps", type=float, default=defaults.prefill_tps)
    p.add_argument("--decode-base-ms", type=float, default=defaults.decode_base_s * 1e3)
    p.add_argument("--decode-per-seq-ms", type=float, default=defaults.decode_per_seq_s * 1e3)
    p.add_argument("--kv-cache-tokens", type=int, default=defaults.kv_cache_tokens)
    p.add_argument("--time-scale", type=float, default=1.0, help="multiplies every simulated duration (0.01: 100x faster)")
    args = p.parse_args(argv)
    for name in ("max_num_seqs", "prefill_tps", "time_scale", "kv_cache_tokens"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    model = EngineModel(max_num_seqs=args.max_num_seqs, prefill_tps=args.prefill_tps, decode_base_s=args.decode_base_ms / 1e3,
                        decode_per_seq_s=args.decode_per_seq_ms / 1e3, kv_cache_tokens=args.kv_cache_tokens)
    import uvicorn

    from arag.open_files import ensure_open_files

    short = ensure_open_files(10_000, "the simulator, at up to 10,000 requests in flight")  # thousands of episodes' connections
    if short:
        print(f"warning: {short}", flush=True)
    print(f"simulated vLLM engine on http://{args.host}:{args.port}/v1: {model}, time scale {args.time_scale}", flush=True)
    uvicorn.run(create_app(SimulatedEngine(model, args.time_scale)), host=args.host, port=args.port, log_level="warning", backlog=4096)


if __name__ == "__main__":
    main()
