"""The stand-in model server of the tests, the rehearsal and the concurrency benchmarks: an
OpenAI-compatible `/v1/chat/completions` endpoint that answers with valid agent actions, chosen by the
stand-ins' one agent policy (tests/support/agent_policy.py), after the time its latency option says:

* `EngineModel()`: the time one vLLM engine would take (tests/support/engine_model.py: batch slots,
  prefill one prompt after another, decode steps at the batch's size, the prefix cache), times
  `time_scale` (0.01: a hundred times faster than the engine, for tests; statistics stay in engine
  seconds), so the evaluation harness runs at thousands of episodes in flight on a machine without a
  GPU (everything is real except the model's arithmetic);
* `FixedLatency(s)`: every reply after s seconds however many are in flight, for measuring what the
  evaluation path lets through.

Other options: `policy` (the agent policy's plan, tool-call limit and answer text); `rules`, a
function that says what a real endpoint would refuse (tests/support/openai_rules.py), answered with
HTTP 400 and OpenAI's error JSON, the refused bodies kept in `refused`; `keep_requests` keeps every
body received in `requests`; `hold_until=N` makes each request first wait until N have been in flight
at once (or `hold_timeout_s` passes), so a test sees whether N requests get through at once without
depending on timing; `models`, what GET /v1/models lists.

Presets: `simulated_vllm(...)` (the engine; every offered tool once, in the order offered, then the
answer), `fixed_latency(...)` (the plan keyword_search, chunk_read: three model calls an episode) and
`openai_endpoint()` (OpenAI's request rules, no delay, one tool call then the answer).

A server is an ASGI app: tests reach it through `httpx.ASGITransport` (no socket) or serve it on
127.0.0.1 on a thread (`serve`); on its own:

    python -m tests.support.model_server [--host 127.0.0.1] [--port 8000] [--time-scale 1.0]
        [--max-num-seqs 256] [--prefill-tps 24000] [--decode-base-ms 6.5] [--decode-per-seq-ms 0.055]
        [--kv-cache-tokens 400000]                        # the simulated vLLM engine
    python -m tests.support.model_server --latency-s 2.0  # fixed latency (the fixed_latency preset)

    python -m pipelines.evaluate model=openai model.base_url=http://127.0.0.1:8000/v1 ...
    curl 'http://127.0.0.1:8000/stats?episodes_in_flight=256'

GET /stats: requests in flight now and at peak (arrived, not yet answered, queued ones included),
running sequences now and at peak, requests, the time.time() of the first request (`first_at`),
episodes started (requests with no assistant turn) and answered, tool calls per tool, prompt /
cached / completion tokens, mean queue and service time, requests aborted (the client disconnected
first: dropped from the queue or the batch, as vLLM aborts them) and refused, and, with
`?episodes_in_flight=N` under the engine, the ideal episodes/min for N episodes in flight with this
run's mean episode (`ideal`). POST /stats/reset zeroes the counts (peaks too).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import threading
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator

from tests.support.agent_policy import AgentPolicy, render_reply
from tests.support.engine_model import DECODE_CHUNK_TOKENS, REASONING_TOKENS, EngineModel, PrefixCache, canonical, tokens_of

# (param, code, message) of a refused request, or None: tests/support/openai_rules.refusal.
Rules = Callable[[dict[str, Any]], "tuple[str | None, str | None, str] | None"]


@dataclass(frozen=True)
class FixedLatency:
    """Every reply after `seconds` (wall seconds; `time_scale` is the engine's), no limit on how many
    are served at once, no prefix cache."""

    seconds: float = 2.0


@dataclass
class Stats:
    in_flight: int = 0
    peak_in_flight: int = 0
    running: int = 0
    peak_running: int = 0
    requests: int = 0
    first_at: float | None = None  # time.time() of the first request since the last reset
    episodes_started: int = 0
    episodes_answered: int = 0
    tool_calls: Counter = field(default_factory=Counter)
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    queue_s: float = 0.0  # engine seconds waiting for a slot, summed
    aborted: int = 0  # requests whose client disconnected before the reply: dropped, as vLLM aborts them
    refused: int = 0  # requests the rules refused
    service_s: float = 0.0  # engine seconds from a slot to the reply (prefill wait, prefill, decode), summed


@dataclass(frozen=True)
class Prompt:
    """A request as the model sees it: the tool schemas (chat templates render them into the system
    turn; a JSON action schema only steers decoding) and each message, in order, as cache pieces with
    their tokens; and the reply it gets."""

    pieces: list[str]
    sizes: list[int]
    reply_piece: str
    reply_tokens: int
    completion: int

    @property
    def tokens(self) -> int:
        return sum(self.sizes)


class ModelServer:
    def __init__(self, latency: EngineModel | FixedLatency = EngineModel(), *, time_scale: float = 1.0, policy: AgentPolicy = AgentPolicy(),
                 rules: Rules | None = None, keep_requests: bool = False, hold_until: int | None = None, hold_timeout_s: float = 10.0,
                 models: tuple[str, ...] = ("simulated",)):
        if not time_scale > 0:
            raise ValueError(f"time_scale must be positive, got {time_scale}")
        self.latency = latency
        self.time_scale = float(time_scale)
        self.policy = policy
        self.rules = rules
        self.keep_requests = keep_requests
        self.hold_until = hold_until
        self.hold_timeout_s = hold_timeout_s
        self.models = models
        self.requests: list[dict[str, Any]] = []
        self.refused: list[tuple[str | None, dict[str, Any]]] = []
        self.stats = Stats()
        self.cache = PrefixCache(latency) if isinstance(latency, EngineModel) else None
        self._slots: asyncio.Semaphore | None = None
        self._arrived: asyncio.Condition | None = None
        self._prefill_free_at = 0.0  # loop time at which the prefill lane is free
        self._running_tokens = 0
        self._serial = 0
        self._app = None

    def reset(self) -> None:
        self.stats = Stats(in_flight=self.stats.in_flight, running=self.stats.running)
        self.stats.peak_in_flight, self.stats.peak_running = self.stats.in_flight, self.stats.running

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        stats = self.stats
        stats.requests += 1
        stats.first_at = stats.first_at or time.time()
        stats.in_flight += 1
        stats.peak_in_flight = max(stats.peak_in_flight, stats.in_flight)
        try:
            if self.hold_until:
                await self._hold()
            return await self._complete(body, stats)
        finally:
            stats.in_flight -= 1

    async def _hold(self) -> None:
        if self._arrived is None:
            self._arrived = asyncio.Condition()
        async with self._arrived:
            self._arrived.notify_all()
            try:
                await asyncio.wait_for(self._arrived.wait_for(lambda: self.stats.peak_in_flight >= self.hold_until), self.hold_timeout_s)
            except asyncio.TimeoutError:
                pass

    async def _complete(self, body: dict[str, Any], stats: Stats) -> dict[str, Any]:
        messages = body.get("messages") or []
        if not any(m.get("role") == "assistant" for m in messages):
            stats.episodes_started += 1
        action = self.policy.next_action(body)
        self._serial += 1
        reply = render_reply(action, body, self._serial)
        tools = json.dumps(body.get("tools") or [], sort_keys=True)
        reply_text = json.dumps(reply["message"])
        reasoning = REASONING_TOKENS.get(body.get("reasoning_effort"), 0)
        prompt = Prompt(pieces=[tools] + [canonical(m) for m in messages] if self.cache else [],
                        sizes=[tokens_of(tools)] + [tokens_of(json.dumps(m)) for m in messages],
                        reply_piece=canonical(reply["message"]) if self.cache else "", reply_tokens=tokens_of(reply_text),
                        completion=tokens_of(reply_text) + reasoning)
        if isinstance(self.latency, FixedLatency):
            cached = await self._fixed(self.latency, stats)
        else:
            cached = await self._engine(self.latency, prompt, stats)
        stats.prompt_tokens += prompt.tokens
        stats.cached_tokens += cached
        stats.completion_tokens += prompt.completion
        if "tool" in action:
            stats.tool_calls[action["tool"]] += 1
        else:
            stats.episodes_answered += 1
        usage = {"prompt_tokens": prompt.tokens, "completion_tokens": prompt.completion, "total_tokens": prompt.tokens + prompt.completion,
                 "prompt_tokens_details": {"cached_tokens": cached}, "completion_tokens_details": {"reasoning_tokens": reasoning}}
        return {"id": f"chatcmpl-stand-in-{self._serial}", "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model", self.models[0]), "choices": [{"index": 0, **reply}], "usage": usage}

    @staticmethod
    async def _fixed(latency: FixedLatency, stats: Stats) -> int:
        stats.running += 1
        stats.peak_running = max(stats.peak_running, stats.running)
        try:
            await asyncio.sleep(latency.seconds)
        finally:
            stats.running -= 1
        stats.service_s += latency.seconds
        return 0

    async def _engine(self, model: EngineModel, prompt: Prompt, stats: Stats) -> int:
        """The request's turn at the engine: a slot, the prefill lane, the decode steps; the cached
        tokens of its prompt."""
        loop = asyncio.get_running_loop()
        if self._slots is None:
            self._slots = asyncio.Semaphore(model.max_num_seqs)
        arrived = loop.time()
        async with self._slots:
            started = loop.time()
            stats.queue_s += (started - arrived) / self.time_scale
            stats.running += 1
            stats.peak_running = max(stats.peak_running, stats.running)
            self._running_tokens += prompt.tokens + prompt.completion
            try:
                keys = self.cache.keys(prompt.pieces)
                cached = min(self.cache.lookup(keys, prompt.sizes), prompt.tokens)
                begin = max(loop.time(), self._prefill_free_at)
                self._prefill_free_at = begin + model.prefill_s(prompt.tokens, cached) * self.time_scale
                await asyncio.sleep(max(0.0, self._prefill_free_at - loop.time()))
                left = prompt.completion
                while left > 0:  # the step time follows the batch as it is now
                    n = min(left, DECODE_CHUNK_TOKENS)
                    await asyncio.sleep(model.decode_s(n, stats.running) * self.time_scale)
                    left -= n
                # The reply joins the conversation's cached prefix, for the episode's next request.
                reply_key = self.cache.keys(prompt.pieces + [prompt.reply_piece])[-1]
                self.cache.insert(keys + [reply_key], prompt.sizes + [prompt.reply_tokens], self._running_tokens)
            finally:
                stats.running -= 1
                self._running_tokens -= prompt.tokens + prompt.completion
            stats.service_s += (loop.time() - started) / self.time_scale
        return cached

    def snapshot(self, episodes_in_flight: int | None = None) -> dict[str, Any]:
        s = self.stats
        done = s.requests - s.in_flight - s.aborted - s.refused  # answered requests: an abandoned one is no call of any episode
        out = {k: v for k, v in asdict(s).items() if k != "tool_calls"}
        out["tool_calls"] = dict(s.tool_calls)
        out["mean_queue_s"] = s.queue_s / done if done else 0.0
        out["mean_service_s"] = s.service_s / done if done else 0.0
        out["latency"] = {"kind": type(self.latency).__name__, **asdict(self.latency)}
        out["time_scale"] = self.time_scale
        if isinstance(self.latency, EngineModel) and episodes_in_flight is not None and s.episodes_answered and done:
            calls = done / s.episodes_answered
            uncached = (s.prompt_tokens - s.cached_tokens) / done
            out["ideal"] = {
                "episodes_in_flight": episodes_in_flight,
                "calls_per_episode": calls,
                "uncached_prompt_tokens": uncached,
                "completion_tokens": s.completion_tokens / done,
                # per minute of engine time; divide by time_scale for wall-clock minutes
                "episodes_per_min": self.latency.ideal_episodes_per_min(episodes_in_flight, calls, uncached, s.completion_tokens / done),
            }
        return out

    # -- HTTP ----------------------------------------------------------------------------------------

    async def __call__(self, scope, receive, send) -> None:
        if self._app is None:
            self._app = self._create_app()
        await self._app(scope, receive, send)

    def _create_app(self):
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response
        from starlette.routing import Route

        from arag.serve.http_api import CLIENT_GONE, ClientGone, unless_disconnected

        def error(status: int, message: str, param: str | None = None, code: str | None = None) -> JSONResponse:
            return JSONResponse({"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}, status_code=status)

        async def chat(request: Request) -> Response:
            try:
                body = await request.json()
            except ValueError:
                return error(400, "We could not parse the JSON body of your request.")
            if not isinstance(body, dict):
                return error(400, "The body of your request must be a JSON object.")
            if self.keep_requests:
                self.requests.append(body)
            refused = self.rules(body) if self.rules else None
            if refused is not None:
                param, code, message = refused
                self.stats.requests += 1
                self.stats.refused += 1
                self.refused.append((param, body))
                return error(400, message, param, code)
            if not isinstance(body.get("messages"), list):
                return error(400, "Missing required parameter: 'messages' (a list of messages).", "messages")
            try:
                # A client that gave up (its timeout) is gone: the request leaves the queue or the batch,
                # as vLLM aborts a disconnected request, instead of taking a slot no one reads.
                reply = await unless_disconnected(request, self.complete(body))
            except ClientGone:
                self.stats.aborted += 1
                return Response(status_code=CLIENT_GONE)
            return JSONResponse(reply)

        async def stats(request: Request) -> JSONResponse:
            n = request.query_params.get("episodes_in_flight")
            return JSONResponse(self.snapshot(int(n) if n else None))

        async def reset(request: Request) -> JSONResponse:
            self.reset()
            return JSONResponse({"reset": True})

        async def models(request: Request) -> JSONResponse:
            return JSONResponse({"object": "list", "data": [{"id": m, "object": "model"} for m in self.models]})

        async def no_route(request: Request, exc: Exception) -> JSONResponse:
            return error(getattr(exc, "status_code", 404), f"Invalid URL ({request.method} {request.url.path})")

        return Starlette(routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/stats", stats, methods=["GET"]),
            Route("/stats/reset", reset, methods=["POST"]),
        ], exception_handlers={404: no_route, 405: no_route})


# -- the presets -----------------------------------------------------------------------------------

FIXED_POLICY = AgentPolicy(plan=("keyword_search", "chunk_read"), answer="20 March 851")
# One search, then the answer (a judge's request gets a verdict).
OPENAI_POLICY = AgentPolicy(max_tool_calls=1, answer="It was on 20 March 851, as the records say.")
OPENAI_MODELS = ("gpt-5-mini", "o4-mini", "gpt-4o-mini")


def simulated_vllm(model: EngineModel = EngineModel(), time_scale: float = 1.0) -> ModelServer:
    return ModelServer(model, time_scale=time_scale)


def fixed_latency(latency_s: float = 2.0, hold_until: int | None = None, hold_timeout_s: float = 10.0) -> ModelServer:
    return ModelServer(FixedLatency(latency_s), policy=FIXED_POLICY, hold_until=hold_until, hold_timeout_s=hold_timeout_s)


def openai_endpoint() -> ModelServer:
    from tests.support.openai_rules import refusal

    return ModelServer(FixedLatency(0.0), policy=OPENAI_POLICY, rules=refusal, keep_requests=True, models=OPENAI_MODELS)


# -- serving ---------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(server: ModelServer, port: int = 0) -> Iterator[str]:
    """Serve `server` on 127.0.0.1 on a thread of this process; yields its base URL (…/v1)."""
    import uvicorn

    config = uvicorn.Config(server, host="127.0.0.1", port=port, log_level="warning", lifespan="off", backlog=4096)
    running = uvicorn.Server(config)
    thread = threading.Thread(target=running.run, name="stand-in-model-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not running.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the stand-in model server did not start")
        time.sleep(0.02)
    host, bound = running.servers[0].sockets[0].getsockname()[:2]
    try:
        yield f"http://{host}:{bound}/v1"
    finally:
        running.should_exit = True
        thread.join(timeout=30)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    defaults = EngineModel()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--latency-s", type=float, default=None, help="a fixed latency instead of the simulated engine (the fixed_latency preset)")
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
    if args.latency_s is not None and args.latency_s < 0:
        p.error(f"--latency-s must be 0 or more, got {args.latency_s}")
    import uvicorn

    from arag.open_files import ensure_open_files

    short = ensure_open_files(10_000, "the stand-in model server, at up to 10,000 requests in flight")  # thousands of episodes' connections
    if short:
        print(f"warning: {short}", flush=True)
    if args.latency_s is not None:
        server = fixed_latency(args.latency_s)
        print(f"stand-in model server on http://{args.host}:{args.port}/v1: fixed latency {args.latency_s} s", flush=True)
    else:
        model = EngineModel(max_num_seqs=args.max_num_seqs, prefill_tps=args.prefill_tps, decode_base_s=args.decode_base_ms / 1e3,
                            decode_per_seq_s=args.decode_per_seq_ms / 1e3, kv_cache_tokens=args.kv_cache_tokens)
        server = simulated_vllm(model, args.time_scale)
        print(f"simulated vLLM engine on http://{args.host}:{args.port}/v1: {model}, time scale {args.time_scale}", flush=True)
    uvicorn.run(server, host=args.host, port=args.port, log_level="warning", backlog=4096)


if __name__ == "__main__":
    main()
