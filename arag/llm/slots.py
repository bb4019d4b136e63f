"""A backend's slots for requests in flight, and a clock of the time a model call waited for one,
kept out of a row's `llm_s` (else a slow model and a small limit would look alike)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from dataclasses import dataclass
from typing import AsyncIterator, Generic, Iterator, TypeVar

T = TypeVar("T")


@dataclass
class QueueClock:
    seconds: float = 0.0


# Tasks copy the context when they start, so a call awaited in another task still finds its clock.
_CLOCK: contextvars.ContextVar[QueueClock | None] = contextvars.ContextVar("arag_queue_clock", default=None)


@contextlib.contextmanager
def queue_clock() -> Iterator[QueueClock]:
    """The seconds the model calls made inside this block waited for a backend slot."""
    clock = QueueClock()
    token = _CLOCK.set(clock)
    try:
        yield clock
    finally:
        _CLOCK.reset(token)


class Slots(Generic[T]):
    """`n` slots over `resources`: slot i lends resources[i % len(resources)]. `take` waits first come
    first served and adds the wait to the call's queue clock."""

    def __init__(self, resources: list[T], n: int):
        self._free: asyncio.Queue[T] = asyncio.Queue()
        for i in range(n):
            self._free.put_nowait(resources[i % len(resources)])

    @contextlib.asynccontextmanager
    async def take(self) -> AsyncIterator[T]:
        started = time.perf_counter()
        resource = await self._free.get()
        clock = _CLOCK.get()
        if clock is not None:
            clock.seconds += time.perf_counter() - started
        try:
            yield resource
        finally:
            self._free.put_nowait(resource)
