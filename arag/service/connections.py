"""Bounded connections: a time limit on a request's headers, which uvicorn lacks.

uvicorn closes a kept-alive connection idle after a response (`timeout_keep_alive`) and refuses
requests beyond `limit_concurrency`, but a connection whose request headers never finish (or never
start) stays open, holding a file descriptor. This wraps uvicorn's HTTP protocol class: from the
moment a connection opens, or the first byte of a next request on a kept-alive one, the headers
must be complete within `timeout_s`, else the connection gets 408 and is closed. The body's time
limit is the guard's (it reads every body).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any


def timeout_response(timeout_s: float) -> bytes:
    body = json.dumps({"error": f"the request headers did not arrive within {timeout_s:g} s (serve.header_timeout_s)"}).encode()
    head = f"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n"
    return head.encode("latin-1") + body


def header_timeout_protocol(base: type[asyncio.Protocol], timeout_s: float) -> type[asyncio.Protocol]:
    """`base` (uvicorn's H11Protocol or HttpToolsProtocol) with a deadline on request headers.
    Both set `self.cycle` when a request's headers are parsed, which is what is watched here."""
    answer = timeout_response(timeout_s)

    class HeaderTimeout(base):  # type: ignore[valid-type, misc]
        _deadline: asyncio.TimerHandle | None = None
        _served: Any = None  # the last request whose headers arrived

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            cycle = self.cycle
            if cycle is not None and cycle is not self._served:
                self._served = cycle
                self._disarm()
            elif (cycle is None or cycle.response_complete) and self._deadline is None:
                self._arm()  # a next request has begun on a kept-alive connection

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._deadline = self.loop.call_later(timeout_s, self._expired)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expired(self) -> None:
            self._deadline = None
            if self.transport.is_closing():
                return
            cycle = self.cycle
            if cycle is None or cycle.response_complete:
                self.transport.write(answer)
                self.transport.close()

    HeaderTimeout.__name__ = f"HeaderTimeout{base.__name__}"
    return HeaderTimeout
