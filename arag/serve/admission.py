"""Which tool calls run: at most `slots` at once (the tool threads or worker processes), the rest
queued in arrival order; a stopping server answers the queued ones `ServerStopping` (a retryable
503) and lets the running ones finish; a call whose client left is cancelled, queued or running."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, Awaitable, TypeVar

T = TypeVar("T")


class ServerStopping(Exception):
    """The server is stopping: the call did not run (send it again, to the server that replaces it)."""


class ClientGone(Exception):
    """The client disconnected before its call was answered."""


class CallGate:
    """`async with gate:` around a tool call: waits for a free slot, in arrival order. All on the
    event loop's thread (no locks)."""

    def __init__(self, slots: int):
        if slots < 1:
            raise ValueError(f"a call gate needs at least one slot, got {slots}")
        self.slots = slots
        self.running = 0
        self.closed = False
        self._queue: deque[asyncio.Future[None]] = deque()

    @property
    def queued(self) -> int:
        return sum(not w.done() for w in self._queue)

    async def __aenter__(self) -> "CallGate":
        if self.closed:
            raise ServerStopping()
        if self.running < self.slots and not self._queue:
            self.running += 1
            return self
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append(waiter)
        try:
            await waiter  # a slot handed over (counted as running), or ServerStopping
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._release()  # handed a slot just as it was cancelled: pass it on
            raise
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self._release()

    def _release(self) -> None:
        while self._queue:
            waiter = self._queue.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self.running -= 1

    def close(self) -> None:
        """Stop: what is queued gets ServerStopping now; what runs finishes."""
        self.closed = True
        while self._queue:
            waiter = self._queue.popleft()
            if not waiter.done():
                waiter.set_exception(ServerStopping())


async def unless(gone: Awaitable[Any], work: Awaitable[T]) -> T:
    """`work`'s result, or ClientGone (and `work` cancelled) if `gone` completes first."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(gone)
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:  # this request was cancelled (the server stops): so is its call
        task.cancel()
        raise
    finally:
        watcher.cancel()
    if not task.done():
        task.cancel()
        raise ClientGone()
    return task.result()
