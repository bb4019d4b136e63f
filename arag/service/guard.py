"""The door of the HTTP server: a bearer token on every request, and a cap on request size.

An ASGI middleware in front of everything the server mounts (the JSON API, its OpenAPI schema and
the MCP endpoint), so no route can be reached around it. With a token set, a request without
`Authorization: Bearer <token>`, or with another token, gets 401 and nothing else. A body over
`max_request_bytes` gets 413 before any of it reaches a route: a declared Content-Length is
checked first, a chunked body is counted as it arrives.
"""

from __future__ import annotations

import hmac
import json
from typing import Any, Awaitable, Callable

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

TOKEN_ENV = "ARAG_SERVE_TOKEN"


async def send_json(send: Send, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]] | None = None) -> None:
    data = json.dumps(body, ensure_ascii=False).encode("utf-8")
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())] + list(headers or [])
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": data})


class Guard:
    """token: the bearer token every request must carry (None: no token asked);
    max_request_bytes: the largest request body served."""

    def __init__(self, app: ASGIApp, *, token: str | None, max_request_bytes: int):
        if max_request_bytes < 1:
            raise ValueError(f"serve.max_request_bytes must be at least 1, got {max_request_bytes}")
        self.app = app
        self._expected = f"Bearer {token}".encode("utf-8") if token else None
        self.max_request_bytes = max_request_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan events pass; websockets are not served
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        if self._expected is not None and not hmac.compare_digest(headers.get(b"authorization", b""), self._expected):
            await send_json(send, 401, {"error": "unauthorized: this server needs the header 'Authorization: Bearer <token>' with its token"}, [(b"www-authenticate", b"Bearer")])
            return
        declared = headers.get(b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                await send_json(send, 400, {"error": f"bad Content-Length header {declared[:40].decode('latin-1')!r}"})
                return
            if size > self.max_request_bytes:
                await self._too_large(send, size)
                return
        if scope.get("method") not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        # Read the (bounded) body here, so a chunked upload is cut off at the limit too.
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_request_bytes:
                await self._too_large(send, None)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        replay: list[Message] = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]

        async def receive_again() -> Message:
            return replay.pop() if replay else await receive()

        await self.app(scope, receive_again, send)

    async def _too_large(self, send: Send, size: int | None) -> None:
        got = f" ({size} bytes)" if size is not None else ""
        await send_json(send, 413, {"error": f"request body too large{got}: this server accepts at most {self.max_request_bytes} bytes (serve.max_request_bytes)"})
