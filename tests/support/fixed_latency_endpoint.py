"""A stand-in OpenAI-compatible chat endpoint that answers every request after a fixed delay and counts
the requests in flight, for measuring what the evaluation path lets through (no model, no GPU).

    python -m tests.support.fixed_latency_endpoint [--port 8000] [--latency-s 2.0]
    curl http://127.0.0.1:8000/stats     # {"in_flight", "peak", "requests", "first_at"}; POST /reset zeroes them

Replies come from the stand-ins' one agent policy (tests/support/agent_policy.py) with the plan
keyword_search, chunk_read: every episode takes three model calls (keyword_search for the question's
names, chunk_read of the chunk ids the search showed, then an answer); a judge's request gets a verdict.
Replies use tool calls (native protocol), or the JSON action objects when the request asks for a
response format (json protocol). With `hold_until=N` each request first waits until N have been in
flight at once (or `hold_timeout_s` passes): a test then sees whether N requests get through at once
without depending on timing.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.support.agent_policy import AgentPolicy, render_reply

ANSWER = "20 March 851"


class Counters:
    def __init__(self) -> None:
        self.arrived = asyncio.Condition()
        self.reset()

    def reset(self) -> None:
        self.in_flight = self.peak = self.requests = 0
        self.first_at: float | None = None  # time.time() of the first request since the reset

    def to_json(self) -> dict[str, Any]:
        return {"in_flight": self.in_flight, "peak": self.peak, "requests": self.requests, "first_at": self.first_at}


POLICY = AgentPolicy(plan=("keyword_search", "chunk_read"), answer=ANSWER)


def reply(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "cmpl-fixed",
        "object": "chat.completion",
        "model": body.get("model", "fixed"),
        "choices": [{"index": 0, **render_reply(POLICY.next_action(body), body)}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
    }


def make_app(latency_s: float = 2.0, hold_until: int | None = None, hold_timeout_s: float = 10.0) -> Starlette:
    counters = Counters()

    async def complete(request: Request) -> JSONResponse:
        body = await request.json()
        counters.requests += 1
        counters.first_at = counters.first_at or time.time()
        counters.in_flight += 1
        counters.peak = max(counters.peak, counters.in_flight)
        try:
            if hold_until:
                async with counters.arrived:
                    counters.arrived.notify_all()
                    try:
                        await asyncio.wait_for(counters.arrived.wait_for(lambda: counters.peak >= hold_until), hold_timeout_s)
                    except asyncio.TimeoutError:
                        pass
            await asyncio.sleep(latency_s)
            return JSONResponse(reply(body))
        finally:
            counters.in_flight -= 1

    async def stats(request: Request) -> JSONResponse:
        return JSONResponse(counters.to_json())

    async def reset(request: Request) -> JSONResponse:
        counters.reset()
        return JSONResponse(counters.to_json())

    app = Starlette(routes=[Route("/v1/chat/completions", complete, methods=["POST"]), Route("/stats", stats), Route("/reset", reset, methods=["POST"])])
    app.state.counters = counters
    return app


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(app: Starlette, port: int | None = None) -> Iterator[str]:
    """Serve `app` on 127.0.0.1 in a thread; yields its base URL (…/v1)."""
    import uvicorn

    port = port or free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", backlog=4096))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the fixed-latency endpoint did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--latency-s", type=float, default=2.0)
    args = parser.parse_args()
    uvicorn.run(make_app(args.latency_s), host=args.host, port=args.port, log_level="warning", backlog=4096)


if __name__ == "__main__":
    main()
