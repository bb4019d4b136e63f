"""`ToolCalls`: the one tool call, whatever runs the tools (docs/tools.md, "Concurrency").

Transports: `ToolContext` (this process), `ToolWorkerPool` (worker processes), `RemoteTools` (a tool
server). `acall` waits its turn at the one admission limit (`gate`, a CallGate), then the transport runs
it: its native `_arun`, else `call` on a pool of `slots` threads, so awaiting episodes cost no thread each.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from typing import Any, Hashable

from arag.tools.base import ResultFormat, ToolResult
from arag.tools.hosting.admission import CallGate
from arag.tools.tracker import ReadTracker


class ToolCalls(AbstractContextManager):
    """Subclasses call `admit(slots)` in their __init__ and define `call`."""

    gate: CallGate
    _pool: ThreadPoolExecutor | None = None

    def admit(self, slots: int) -> None:
        """At most `slots` calls through `acall` run at once (a server sets its own: serve.threads)."""
        self.gate = CallGate(max(1, int(slots)))
        self._pool_lock = threading.Lock()

    def call(self, tool: str, arguments: Any, *, tracker: ReadTracker | None = None, full_text: bool = False, result_format: ResultFormat | None = None) -> ToolResult:
        """Run `tool` with `arguments` (a dict or JSON text); bad arguments come back as its error result."""
        raise NotImplementedError

    async def acall(
        self, tool: str, arguments: Any, *, tracker: ReadTracker | None = None, full_text: bool = False, result_format: ResultFormat | None = None,
        client: Hashable = None, caller: Hashable = None, ticket: Any = None,
    ) -> ToolResult:
        """`call` for asyncio callers, admitted by `gate` (client, caller, ticket: as CallGate.turn takes them)."""
        run = functools.partial(self.call, tool, arguments, tracker=tracker, full_text=full_text, result_format=result_format)
        async with self.gate.turn(client, caller, ticket):
            return await self.gate.run(self._arun(run))

    async def _arun(self, run: functools.partial) -> ToolResult:
        return await asyncio.get_running_loop().run_in_executor(self._executor(), run)

    def _executor(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.gate.slots, thread_name_prefix="arag-tools")
            return self._pool

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    def __exit__(self, *exc: Any) -> None:
        self.close()
