"""The door of the HTTP server: an ASGI middleware in front of every route (JSON API, OpenAPI, /mcp), so
none can be reached around it. It checks repeated headers, Host and Origin, the token, request slots
shared per client and JSON bodies, answers every error as JSON and turns requests away while stopping
(docs/tools.md, "Tool server": Token, Origins, Connections, Stopping)."""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from http.client import responses
from typing import TYPE_CHECKING, Any, Sequence

from arag.config.schemas import TOKEN_ENV  # noqa: F401  (the variable index.token_env names by default)
from arag.tools.hosting.admission import ClientGone, ServerBusy, set_within, unless
from arag.serve.connections import AUTHORISED, CLIENT, CONNECTION_LOST, SLOT

if TYPE_CHECKING:  # the remote client imports this module without the serve extra
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("arag.serve")

# How long arag's own client (RemoteTools) keeps an idle connection: the server must keep them
# longer (serve.keep_alive_s), or a call can reuse a connection the server is closing just then and
# fail with "server disconnected" (a call the client cannot send again: the tool may have run).
CLIENT_KEEPALIVE_S = 1.0
HEALTH_PATH = "/health"
MCP_PATH = "/mcp"
# A request with a wrong token is answered after this long, at most MAX_FAILING_TOKENS at once.
FAILED_TOKEN_DELAY_S = 1.0
MAX_FAILING_TOKENS = 16
SINGLE_HEADERS = (b"host", b"origin", b"authorization")
CLOSE = (b"connection", b"close")
RETRY = (b"retry-after", b"1")
STOPPING = "the tool server is stopping; send the request again (to the server that replaces it)"
BUSY = "the tool server gave this call's place to another client's (this client held more than its share of serve.max_connections); send it again"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
# Headers a browser page may send when its origin is allowed (CORS).
CORS_HEADERS = ["authorization", "content-type", "x-session-id", "x-document-settings", "mcp-session-id", "mcp-protocol-version", "last-event-id"]


@dataclass(eq=False)
class Slot:
    """A request slot of `client`'s, which may be `taken` for another while its `body` is still arriving
    (its task cancelled: 503) or its tool call waits in the queue (`waiter`, set by CallGate: 503)."""

    client: Any
    task: asyncio.Task[Any] | None = field(default_factory=asyncio.current_task)
    body: bool = False
    waiter: asyncio.Future[None] | None = None
    taken: bool = False


def matches(value: str, patterns: Sequence[str]) -> bool:
    """`value` is one of `patterns` (`name:*`: any port of ASCII digits 1-65535), names in any case.
    Own code: the MCP SDK's TransportSecuritySettings and TrustedHostMiddleware compare case-sensitively, any port."""
    value = value.lower()
    for pattern in map(str.lower, patterns):
        if value == pattern:
            return True
        port = value[len(pattern) - 1 :]
        if pattern.endswith(":*") and value.startswith(pattern[:-1]) and port.isascii() and port.isdigit() and len(port) <= 5 and 0 < int(port) < 65536:
            return True
    return False


async def send_json(send: Send, status: int, message: str, *headers: tuple[bytes, bytes]) -> None:
    data = json.dumps({"error": message}, ensure_ascii=False).encode("utf-8")
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()), *headers]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": data})


class Guard:
    """`settings` checked by ServeSettings.from_dict; token None: no token asked."""

    def __init__(self, app: ASGIApp, settings: Any, token: str | None):  # arag.serve.app.ServeSettings (app imports this module)
        self.app = app
        self._token = token.encode("utf-8") if token else None
        self.settings = settings
        self.allowed_hosts, self.allowed_origins = settings.origin_rule()  # allowed_hosts None: any Host
        self.stopping = False
        self._slots: list[Slot] = []  # authorised requests being served, oldest first
        self._answered = asyncio.Event()  # no request holds a slot
        self._answered.set()
        self._waiting: list[tuple[Slot, asyncio.Future[bool]]] = []  # requests waiting for a slot, in arrival order
        self._streams: OrderedDict[Any, asyncio.Event] = OrderedDict()  # open event streams → set to end each
        self._failing = asyncio.Semaphore(MAX_FAILING_TOKENS)  # failed tokens being answered (each after FAILED_TOKEN_DELAY_S)
        self._inner: ASGIApp = self._checked
        if settings.allowed_origins:
            from starlette.middleware.cors import CORSMiddleware

            self._inner = CORSMiddleware(self._checked, allow_origins=list(settings.allowed_origins), allow_methods=["GET", "POST", "DELETE"], allow_headers=CORS_HEADERS, expose_headers=["mcp-session-id"], max_age=600)

    def stop(self) -> None:
        """The server stops: every request from now on gets a retryable 503, and event streams end."""
        self.stopping = True
        for _, granted in self._waiting:
            if not granted.done():
                granted.set_result(False)
        for ended in self._streams.values():
            ended.set()

    async def wait_answered(self, timeout_s: float) -> bool:
        """True once no admitted request holds a slot, False after `timeout_s`."""
        return await set_within(self._answered, timeout_s)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan events pass; websockets are not served
            await self.app(scope, receive, send)
            return
        send = json_errors(send)
        headers = dict(scope["headers"])
        repeated = repeated_header(scope["headers"])
        host = headers.get(b"host", b"").decode("latin-1")
        origin = headers.get(b"origin")
        if repeated:
            await send_json(send, 400, f"the {repeated} header appears more than once; send it once", CLOSE)
        elif self.allowed_hosts is not None and not matches(host, self.allowed_hosts):
            await send_json(send, 421, f"this server does not answer to the host {host[:100]!r} (serve.allowed_hosts)")
        elif origin is not None and not matches(origin.decode("latin-1"), self.allowed_origins):
            await send_json(send, 403, f"requests from the origin {origin[:100].decode('latin-1')!r} are not served (serve.allowed_origins)")
        elif self.stopping:
            await send_json(send, 503, STOPPING, RETRY, CLOSE)
        else:
            await self._inner(scope, receive, send)

    def _authorized(self, value: bytes) -> bool:
        scheme, _, credentials = value.partition(b" ")
        # compare_digest first, so the time taken does not depend on the scheme's spelling either
        same = hmac.compare_digest(credentials.strip(), self._token or b"")
        return same and scheme.lower() == b"bearer"

    async def _refuse_token(self, send: Send, given: bytes | None) -> None:
        """401, closing the connection; a wrong token after FAILED_TOKEN_DELAY_S, beyond MAX_FAILING_TOKENS at
        once 429 unread: guessing runs at most MAX_FAILING_TOKENS / FAILED_TOKEN_DELAY_S a second."""
        if given is not None:
            if self._failing.locked():
                await send_json(send, 429, "too many requests with a wrong token at once; wait and send the right one", RETRY, CLOSE)
                return
            async with self._failing:
                await asyncio.sleep(FAILED_TOKEN_DELAY_S)
        await send_json(send, 401, "unauthorized: this server needs the header 'Authorization: Bearer <token>' with its token", (b"www-authenticate", b"Bearer"), CLOSE)

    async def _checked(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope["headers"])
        if scope["path"] == HEALTH_PATH:  # no token, no slot: it answers nothing about the index
            await self._run(scope, receive, send)
            return
        if self._token is not None and not self._authorized(headers.get(b"authorization", b"")):
            await self._refuse_token(send, headers.get(b"authorization"))
            return
        scope[AUTHORISED] = True
        client = scope[CLIENT] = (scope.get("client") or ("?",))[0]
        if scope["method"] == "GET" and scope["path"] == MCP_PATH:
            await self._stream(scope, receive, send)
            return
        slot = scope[SLOT] = Slot(client)
        try:
            if not self._admit(slot) and not await self._wait_for_slot(slot, scope.get(CONNECTION_LOST)):
                refused = STOPPING if self.stopping else f"the server is serving {self.settings.max_connections} requests at once (serve.max_connections) and this client holds its share of them (or as many requests wait); send it again"
                await send_json(send, 503, refused, RETRY)
                return
            await self._admitted(scope, receive, send, headers, slot)
        finally:
            self._release(slot)

    def _grant(self, slot: Slot) -> None:
        self._slots.append(slot)
        self._answered.clear()

    def _admit(self, slot: Slot) -> bool:
        """`slot` granted at once: one is free (nobody waits), or it takes one (_take_a_slot)."""
        free = self.settings.max_connections - sum(not held.taken for held in self._slots)
        if (free > 0 and not self._waiting) or self._take_a_slot(slot.client):
            self._grant(slot)
            return True
        return False

    async def _wait_for_slot(self, slot: Slot, lost: asyncio.Event | None) -> bool:
        """True once a slot freed was handed to `slot`; False at once if its client already holds (or
        waits for) its share, serve.max_connections over the clients holding or waiting, or when the
        server stops. Own code: no server library shares its slots per client."""
        held = Counter(other.client for other in self._slots if not other.taken)
        held.update(waiting.client for waiting, _ in self._waiting)
        share = max(1, self.settings.max_connections // len({*held, slot.client}))
        if held[slot.client] >= share or len(self._waiting) >= self.settings.max_connections:
            return False
        granted: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiting.append((slot, granted))
        try:
            return await (granted if lost is None else unless(lost.wait(), granted))
        except ClientGone:
            return False  # nobody to answer: the 503 goes nowhere

    def _release(self, slot: Slot) -> None:
        """`slot` given back (or its wait ended): freed slots go to the waiting requests, the client holding fewest first."""
        self._waiting = [(waiting, granted) for waiting, granted in self._waiting if waiting is not slot]
        if slot in self._slots:
            self._slots.remove(slot)
        while self._waiting and sum(not held.taken for held in self._slots) < self.settings.max_connections:
            held = Counter(other.client for other in self._slots if not other.taken)
            waiting, granted = min(self._waiting, key=lambda pair: held[pair[0].client])  # min(): the first to come among equals
            self._waiting.remove((waiting, granted))
            if not granted.done():
                self._grant(waiting)
                granted.set_result(True)
        if not self._slots:
            self._answered.set()

    def _take_a_slot(self, client: Any) -> bool:
        """Free a slot for `client`: a body still arriving (the most-holding client's oldest), else the newest
        queued call of a client holding two slots more; False if neither.
        Own code: no server library shares its slots per client."""
        held = Counter(slot.client for slot in self._slots if not slot.taken)
        # Only its own client's, or a client's holding more: a flood cannot take the slot of
        # another client's request whose body is on its way.
        loose = [slot for slot in self._slots if slot.body and not slot.taken and (slot.client == client or held[slot.client] > held[client])]
        if loose:
            taken = min(loose, key=lambda slot: -held[slot.client])  # min(): the oldest of the most-holding client
            taken.taken = True  # counted free from now on; its request answers 503 on its way out
            if taken.task is not None:
                taken.task.cancel()  # it waits for its body's next bytes: the cancellation arrives there
            return True
        greedy = max(held, key=held.__getitem__)
        if held[greedy] < held[client] + 2:
            return False
        queued = [slot for slot in self._slots if slot.client == greedy and not slot.taken and slot.waiter is not None and not slot.waiter.done()]
        if not queued:
            return False
        queued[-1].taken = True
        queued[-1].waiter.set_exception(ServerBusy())
        return True

    async def _stream(self, scope: Scope, receive: Receive, send: Send) -> None:
        """An event stream, holding no slot: it ends after serve.stream_idle_s, the oldest beyond serve.max_connections open.
        Own code: neither the SDK nor sse-starlette ends a stream after a time (ours carry no events)."""
        ended = asyncio.Event()
        key = object()
        self._streams[key] = ended
        if len(self._streams) > self.settings.max_connections:
            self._streams.popitem(last=False)[1].set()
        timer = asyncio.get_running_loop().call_later(self.settings.stream_idle_s, ended.set)
        try:
            await self._run(scope, stream_ends(receive, ended), send)
        finally:
            timer.cancel()
            self._streams.pop(key, None)

    async def _admitted(self, scope: Scope, receive: Receive, send: Send, headers: dict[bytes, bytes], slot: Slot) -> None:
        declared = headers.get(b"content-length")  # digits: h11 refuses any other Content-Length
        if declared is not None and int(declared) > self.settings.max_request_bytes:
            await self._too_large(send, int(declared))
            return
        if scope["method"] not in ("POST", "PUT", "PATCH"):
            await self._run(scope, receive, send)
            return
        content_type = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
        if content_type != b"application/json":
            shown = content_type[:60].decode("latin-1") or "none"
            await send_json(send, 415, f"request bodies must be JSON with 'Content-Type: application/json' (got {shown})")
            return
        # Read the (bounded) body here, so a chunked upload is cut off at the limit too, and a
        # body that stops arriving does not hold the connection.
        chunks, size = [], 0
        slot.body = True
        try:
            async with asyncio.timeout(self.settings.body_timeout_s):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > self.settings.max_request_bytes:
                        slot.body = False  # answered now: its slot is no longer anyone else's to take
                        await self._too_large(send, None)
                        return
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            await send_json(send, 408, f"the request body did not arrive within {self.settings.body_timeout_s:g} s (serve.body_timeout_s)", CLOSE)
            return
        except asyncio.CancelledError:
            if not slot.taken:
                raise
            asyncio.current_task().uncancel()
            # 503, which clients send again: the body may have been on its way, not stalled.
            await send_json(send, 503, "the request body was still arriving when another request needed its slot (serve.max_connections); send it again", RETRY, CLOSE)
            return
        slot.body = False
        replay: list[Message] = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]

        async def receive_again() -> Message:
            return replay.pop() if replay else await receive()

        await self._run(scope, receive_again, send)

    async def _run(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = completed = False

        async def tracked(message: Message) -> None:
            nonlocal started, completed
            started = started or message["type"] == "http.response.start"
            completed = completed or (message["type"] == "http.response.body" and not message.get("more_body", False))
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except asyncio.CancelledError:
            # Only a stopping server cancels a request (its grace period is over): the client is
            # told so in the shape it retries, rather than uvicorn's untyped 500.
            if not started:
                await send_json(send, 503, STOPPING, RETRY, CLOSE)
            elif not completed:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except Exception:
            log.exception("%s %s failed", scope["method"], str(scope["path"])[:200])
            if not started:
                await send_json(send, 500, "the server failed on this request (details in its log)")
        else:
            if started and not completed and scope["path"] == MCP_PATH:
                await send({"type": "http.response.body", "body": b"", "more_body": False})  # an event stream ended by the server

    async def _too_large(self, send: Send, size: int | None) -> None:
        got = f" ({size} bytes)" if size is not None else ""
        await send_json(send, 413, f"request body too large{got}: this server accepts at most {self.settings.max_request_bytes} bytes (serve.max_request_bytes)")


def repeated_header(headers: Sequence[tuple[bytes, bytes]]) -> str | None:
    """The first of Host, Origin, Authorization given more than once, else None."""
    names = [name for name, _ in headers if name in SINGLE_HEADERS]
    return next((name.decode().title() for i, name in enumerate(names) if name in names[:i]), None)


def json_errors(send: Send) -> Send:
    """`send` turning an error answer that is not JSON (the SDK's, Starlette's) into {"error": <its text>}."""
    held: Message | None = None
    text = b""

    async def sending(message: Message) -> None:
        nonlocal held, text
        if message["type"] == "http.response.start" and message["status"] >= 400:
            if not dict(message.get("headers") or []).get(b"content-type", b"").startswith(b"application/json"):
                held = message
                return
        if held is None or message["type"] != "http.response.body":
            await send(message)
            return
        text += message.get("body", b"")
        if message.get("more_body", False):
            return
        # An empty body says its status's reason phrase; one outside the standard's list (499: the client left) its number.
        phrase = responses.get(held["status"], f"status {held['status']}")
        data = json.dumps({"error": text[:500].decode("utf-8", "replace").strip() or phrase}).encode()
        kept = [(k, v) for k, v in held.get("headers") or [] if k not in (b"content-type", b"content-length")]
        await send({**held, "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()), *kept]})
        held = None
        await send({"type": "http.response.body", "body": data})

    return sending


def stream_ends(receive: Receive, ended: asyncio.Event) -> Receive:
    """`receive` that reports the client gone once `ended` is set."""

    async def receiving() -> Message:
        try:
            return await unless(ended.wait(), receive())
        except ClientGone:
            return {"type": "http.disconnect"}

    return receiving
