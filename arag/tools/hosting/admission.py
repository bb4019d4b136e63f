"""The one admission limit of tool calls (ToolCalls.acall): at most `slots` at once, the rest queued.

Turns are own code (neither asyncio nor anyio has a fair queue): the client (peer address) served
longest ago goes next, within it the caller (session, else connection) served longest ago, a caller's
calls in arrival order. A stopping server answers queued calls `ServerStopping` and, past its grace
period, running ones too; a call whose client left is cancelled (docs/tools.md, "Tool server").
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter, deque
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Awaitable, Hashable, TypeVar

T = TypeVar("T")


class ServerStopping(Exception):
    """The server is stopping: the call did not run or was not waited for (send it to the next server)."""


class ServerBusy(Exception):
    """The call's place went to another client (its own held more than its share of slots): send it again."""


class ClientGone(Exception):
    """The client disconnected before its call was answered."""


class CallGate:
    """`async with gate.turn(client, caller):` around a tool call: waits for a free slot, in turns.
    On an event loop's thread (no locks); bound to no loop, so successive loops may share it."""

    def __init__(self, slots: int):
        if slots < 1:
            raise ValueError(f"a call gate needs at least one slot, got {slots}")
        self.slots = slots
        self.running = 0
        self.closed = False
        self.abandoned = False
        self._running: set[asyncio.Future[None]] = set()  # set at abandon: their calls are answered ServerStopping
        self._idle = asyncio.Event()
        self._idle.set()
        self._grants = itertools.count()
        # client → caller → waiters (insertion order: who came first among equals)
        self._queues: dict[Hashable, dict[Hashable, deque[asyncio.Future[None]]]] = {}
        self._last_turn: dict[Hashable, int] = {}  # a client, or (client, caller): its last grant
        self._active: Counter[Hashable] = Counter()  # calls queued or running per client / (client, caller)

    @property
    def queued(self) -> int:
        return sum(len(waiters) for callers in self._queues.values() for waiters in callers.values())

    @asynccontextmanager
    async def turn(self, client: Hashable = None, caller: Hashable = None, ticket: Any = None) -> AsyncIterator["CallGate"]:
        """ticket: an object whose `waiter` is set to the call's place in the queue while it waits
        (the guard's request slot: a place it may give to another client, ServerBusy)."""
        if self.closed:
            raise ServerStopping()
        keys = (client, (client, caller))
        self._active.update(keys)
        try:
            if self.running < self.slots and not self._queues:
                self._grant(keys)
            else:
                await self._wait(client, caller, ticket)
            try:
                yield self
            finally:
                self._release()
        finally:
            self._active.subtract(keys)
            for key in keys:
                if self._active[key] <= 0:
                    del self._active[key]
                    self._last_turn.pop(key, None)

    async def _wait(self, client: Hashable, caller: Hashable, ticket: Any) -> None:
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queues.setdefault(client, {}).setdefault(caller, deque()).append(waiter)
        if ticket is not None:
            ticket.waiter = waiter
        try:
            await waiter  # a slot handed over (counted as running), ServerStopping or ServerBusy
        except (asyncio.CancelledError, ServerBusy):
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._release()  # handed a slot just as it was cancelled: pass it on
            else:
                self._forget(client, caller, waiter)
            raise
        finally:
            if ticket is not None:
                ticket.waiter = None

    def _grant(self, keys: tuple[Hashable, Hashable]) -> None:
        self.running += 1
        self._idle.clear()
        turn = next(self._grants)
        for key in keys:
            self._last_turn[key] = turn

    def _forget(self, client: Hashable, caller: Hashable, waiter: asyncio.Future[None]) -> None:
        callers = self._queues.get(client, {})
        waiters = callers.get(caller)
        if waiters is not None and waiter in waiters:
            waiters.remove(waiter)
            if not waiters:
                del callers[caller]
            if not callers:
                del self._queues[client]

    def _release(self) -> None:
        self.running -= 1
        while self._queues:
            # min() keeps the first of equals: dicts keep their insertion (arrival) order.
            client = min(self._queues, key=lambda c: self._last_turn.get(c, -1))
            callers = self._queues[client]
            caller = min(callers, key=lambda c: self._last_turn.get((client, c), -1))
            waiter = callers[caller].popleft()
            if not callers[caller]:
                del callers[caller]
            if not callers:
                del self._queues[client]
            if not waiter.done():
                self._grant((client, (client, caller)))
                waiter.set_result(None)
                return
        if self.running == 0:
            self._idle.set()

    def close(self) -> None:
        """Stop: what is queued gets ServerStopping now; what runs finishes."""
        self.closed = True
        queues, self._queues = self._queues, {}
        for callers in queues.values():
            for waiters in callers.values():
                for waiter in waiters:
                    if not waiter.done():
                        waiter.set_exception(ServerStopping())

    async def wait_idle(self, timeout_s: float) -> bool:
        """True once no call runs, False if some still run after `timeout_s`."""
        return await set_within(self._idle, timeout_s)

    def abandon(self) -> None:
        """Past the stop's grace period: running calls are answered ServerStopping (their threads finish unobserved)."""
        self.abandoned = True
        for gone in self._running:
            if not gone.done():
                gone.set_result(None)

    async def run(self, work: Awaitable[T]) -> T:
        """`work`'s result, or ServerStopping once the gate is abandoned."""
        gone: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.abandoned:
            gone.set_result(None)
        self._running.add(gone)
        try:
            return await unless(gone, work)
        except ClientGone:
            raise ServerStopping() from None
        finally:
            self._running.discard(gone)


async def set_within(event: asyncio.Event, timeout_s: float) -> bool:
    """True once `event` is set, False if it is not within `timeout_s`."""
    try:
        async with asyncio.timeout(timeout_s):
            await event.wait()
        return True
    except TimeoutError:
        return False


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
