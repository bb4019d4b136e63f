"""Bounded connections: uvicorn's h11 protocol with a header deadline and a bound on *waiting*
connections (those running no request), apart from the guard's request slots; every status answered
here is JSON (docs/tools.md, "Tool server": Connections). A connection lost while its request runs
sets the scope's CONNECTION_LOST, so its tool call is cancelled whichever front end it came by."""

from __future__ import annotations

import asyncio
import json
from collections import Counter, OrderedDict
from http import HTTPStatus
from typing import Any

import h11

# Scope keys: the Event set when the connection is lost; set on a request that showed the token; the
# client (peer address) it counts for; the request slot it holds (arag.serve.guard.Slot).
CONNECTION_LOST = "arag.connection_lost"
AUTHORISED = "arag.authorised"
CLIENT = "arag.client"
SLOT = "arag.slot"


def json_response(status: int, message: str, *, retry_after: int | None = None) -> bytes:
    """A whole HTTP/1.1 response with the server's JSON error shape, closing the connection."""
    body = json.dumps({"error": message}).encode()
    extra = f"retry-after: {retry_after}\r\n" if retry_after is not None else ""
    head = f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n{extra}connection: close\r\n\r\n"
    return head.encode("latin-1") + body


class WaitingConnections:
    """The connections running no request, oldest first; beyond `max_waiting` the least useful of the
    client (peer address, and whether it showed the token) holding the most places is closed.
    Own code: uvicorn's limit_concurrency refuses the newcomer, counting connections before any token."""

    def __init__(self, max_waiting: int):  # checked in ServeSettings.from_dict
        self.max_waiting = max_waiting
        self._waiting: OrderedDict[Any, None] = OrderedDict()

    def add(self, connection: Any) -> None:
        self._waiting[connection] = None
        self._waiting.move_to_end(connection)
        if len(self._waiting) > self.max_waiting:
            self._least_useful(connection).evict()

    def _least_useful(self, newcomer: Any) -> Any:
        """A connection of the client holding the most places, so no client keeps more while another
        waits: one that never showed the token (an idle one first: health checks only, nothing lost;
        else the oldest), else the least recently useful idle one, else the newcomer when it is that
        client's (its excess), else that client's oldest."""
        places = Counter(c.share_key for c in self._waiting)
        most = max(places.values())
        crowded = [c for c in self._waiting if places[c.share_key] == most]
        unproven = [c for c in crowded if not c.authorised and c is not newcomer]
        idle = [c for c in crowded if c.idle]
        if unproven:
            return next((c for c in unproven if c.idle), unproven[0])
        if idle:
            return min(idle, key=lambda c: c.useful_at)
        return newcomer if newcomer in crowded else crowded[0]

    def discard(self, connection: Any) -> None:
        self._waiting.pop(connection, None)

    def __contains__(self, connection: Any) -> bool:
        return connection in self._waiting


def bounded_protocol(base: type[asyncio.Protocol], timeout_s: float, waiting: WaitingConnections) -> type[asyncio.Protocol]:
    """`base` (uvicorn's H11Protocol, whose `cycle` is set once headers are parsed) with the bounds above.
    Own code: uvicorn has no deadline on request headers and answers its errors in plain text."""
    expired = json_response(408, f"the request headers did not arrive within {timeout_s:g} s (serve.header_timeout_s)")
    crowded = json_response(503, f"too many connections are waiting to send a request (serve.max_waiting_connections={waiting.max_waiting}); connect again", retry_after=1)

    class Bounded(base):  # type: ignore[valid-type, misc]
        authorised = False  # a request of this connection showed the token
        useful_at = 0.0  # when its last authorised request was answered (loop time)
        _deadline: asyncio.TimerHandle | None = None
        _served: Any = None  # the last request whose headers arrived
        _sending = False  # bytes of a next request's headers arrived
        _answered = False  # a response was sent on this connection

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._lost = asyncio.Event()
            self._arm()
            waiting.add(self)

        def data_received(self, data: bytes) -> None:
            # The body that follows the headers, and the rest of a body answered early (a 413 on
            # its Content-Length), are the body's: not a next request's headers.
            self._sending = self._sending or (self in waiting and not self._body_arriving())
            super().data_received(data)
            self._watch()

        def on_response_complete(self) -> None:
            if self.cycle is not None and self.cycle.scope.get(AUTHORISED):
                self.authorised = True
                self.useful_at = self.loop.time()
            self._answered = True
            super().on_response_complete()  # may start a pipelined next request
            if not self.transport.is_closing():
                self._watch()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            waiting.discard(self)
            self._lost.set()
            super().connection_lost(exc)

        def send_400_response(self, msg: str) -> None:
            self._close_with(json_response(400, f"malformed HTTP request ({msg.rstrip('.').lower()})"))

        @property
        def share_key(self) -> tuple[str, bool]:
            """The client whose share of waiting places this connection takes: its address, and whether
            it showed the token (one not answered yet counts as its address's authorised client's)."""
            return ((self.client or ("?",))[0], self.authorised or not self._answered)

        @property
        def idle(self) -> bool:
            """Between requests, nothing of a next one sent."""
            return self._answered and not self._sending and not self._body_arriving()

        def evict(self) -> None:
            """Closed to make room: with a 503 unless it is idle between requests."""
            self._close_with(b"" if self.idle else crowded)

        def _watch(self) -> None:
            cycle = self.cycle
            if cycle is not None and cycle is not self._served:  # a request's headers arrived
                self._served = cycle
                cycle.scope[CONNECTION_LOST] = self._lost
                self._disarm()
                waiting.discard(self)
                self._sending = False
            elif cycle is None or cycle.response_complete:  # between requests
                if self not in waiting and not self.transport.is_closing():
                    waiting.add(self)
                if (self._sending or self._body_arriving()) and self._deadline is None:
                    self._arm()  # a next request has begun on a kept-alive connection, or a body answered early is still arriving

        def _body_arriving(self) -> bool:
            """The body of the request last answered is still arriving (h11 reads it and drops it)."""
            return self.conn.their_state is h11.SEND_BODY

        def _arm(self) -> None:
            self._deadline = self.loop.call_later(timeout_s, self._expired)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expired(self) -> None:
            self._deadline = None
            if self.cycle is None or self.cycle.response_complete:
                self._close_with(expired)

        def _close_with(self, answer: bytes) -> None:
            self._disarm()
            waiting.discard(self)
            if not self.transport.is_closing():
                self.transport.write(answer)
                self.transport.close()

    Bounded.__name__ = f"Bounded{base.__name__}"
    return Bounded
