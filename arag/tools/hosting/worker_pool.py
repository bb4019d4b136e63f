"""`ToolWorkerPool`: the tools of one index served by N worker processes, each with its own `ToolContext`.

A tool call is mostly Python, one core per process: two callers of one ToolContext reach ~1.5x one
caller on 2 cores (benchmarks/tools_concurrency.py). The episode's tracker travels with each call
(`ReadTracker.state`, back through `update`); a DocumentSession's documents stay in the worker. A
worker that dies is replaced and its call answers an internal failure (docs/tools.md, "Concurrency").
"""

from __future__ import annotations

import asyncio
import functools
import logging
import multiprocessing
import os
import queue
import signal
import subprocess
import sys
import threading
from collections import OrderedDict
from contextlib import suppress
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, NamedTuple

from arag.index.chunk_ids import ChunkIdFormat
from arag.index.store import open_index
from arag.tools.base import ResultFormat, ToolResult, error_result
from arag.tools.documents import DocumentSession
from arag.tools.failures import DIAGNOSTICS, INFRASTRUCTURE
from arag.tools.hosting.calls import ToolCalls
from arag.tools.hosting.context import ToolContext, usable_cores
from arag.tools.tracker import ReadTracker

log = logging.getLogger(__name__)

# Sessions whose loaded documents a worker keeps (AgenticRAG's open/find read a whole document).
SESSION_DOCUMENTS_KEPT = 64
# How long a new worker may take to open the index before the pool gives up on it.
START_TIMEOUT_S = 300.0


def _message(tool: str, arguments: Any, tracker: ReadTracker | None, full_text: bool, result_format: ResultFormat | None) -> tuple:
    state = None if tracker is None else (type(tracker), tracker.state())
    return (tool, arguments, state, full_text, result_format)


def _answer(reply: tuple, tracker: ReadTracker | None) -> ToolResult:
    result, state = reply
    if tracker is not None and state is not None:
        tracker.update(state)  # the call's reads and references, as in-process
    return result


def _worker_main(conn: Any) -> None:
    """A worker process: open the index, then answer calls until the pipe closes. A Ctrl-C or SIGTERM
    sent to the whole process group is the parent's to handle, not a traceback here."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with suppress(EOFError, BrokenPipeError, ConnectionResetError):  # the parent closed the pipe: it is gone or stopping
        _serve_calls(conn)


def _serve_calls(conn: Any) -> None:
    try:
        index, options = conn.recv()
        ctx = ToolContext(index, **options)
    except BaseException as exc:  # reported to the parent, which raises it with the index named
        conn.send(("failed", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", os.getpid()))
    documents: OrderedDict[str, dict] = OrderedDict()
    try:
        while (message := conn.recv()) is not None:
            tool, arguments, state, full_text, result_format = message
            tracker = None
            if state is not None:
                tracker = state[0].__new__(state[0])
                tracker.update(state[1])
                if isinstance(tracker, DocumentSession):
                    tracker.documents = documents.pop(tracker.session_id, None) or {}
            result = ctx.call(tool, arguments, tracker=tracker, full_text=full_text, result_format=result_format)
            if isinstance(tracker, DocumentSession):
                documents[tracker.session_id] = tracker.documents
                while len(documents) > SESSION_DOCUMENTS_KEPT:
                    documents.popitem(last=False)
            conn.send((result, None if tracker is None else tracker.state()))
    finally:
        ctx.close()


class _Worker(NamedTuple):
    process: subprocess.Popen
    conn: Connection


class ToolWorkerPool(ToolCalls):
    """workers: processes, each answering one call at a time; options: `ToolContext`'s (not `encoder`)."""

    def __init__(self, index: str | Path, *, workers: int = 2, **options: Any):
        if int(workers) < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        if "encoder" in options:
            raise ValueError("a ToolWorkerPool's workers load the index's own query encoder; encoder= is for an in-process ToolContext")
        self.index = str(Path(index).resolve())
        self.workers = int(workers)
        cores = usable_cores()
        # Each worker's query encoder gets its share of the cores: N encoders of all cores each
        # would run N times the threads there are cores for.
        self.options = {"encoder_threads": max(1, cores // self.workers), **options}
        self.admit(self.workers)
        # Idle workers, last idle first: with fewer callers than workers the same worker serves call
        # after call, its caches and pages warm and its process awake (round-robin made one caller
        # of a 2-worker pool ~25% slower on 2Wiki's semantic calls). None: the pool is closed.
        self._idle: queue.LifoQueue[_Worker | None] = queue.LifoQueue()
        self._all: list[_Worker] = []
        self._lock = threading.Lock()
        self._closed = False
        try:
            for worker in [self._start() for _ in range(self.workers)]:
                self._ready(worker)
        except BaseException:
            self.close()
            raise

    def _start(self) -> _Worker:
        # A fresh interpreter running this module, not multiprocessing's spawn: spawn re-imports
        # the caller's __main__, which breaks any script without an `if __name__ == "__main__"` guard.
        parent, child = multiprocessing.Pipe()
        # The worker imports this same arag (a checkout run without installing it too); its stdout
        # goes to stderr, since a stdio MCP server's stdout is the protocol channel.
        package_root = str(Path(__file__).resolve().parents[3])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)}
        process = subprocess.Popen(
            [sys.executable, "-m", "arag.tools.hosting.worker_pool", str(child.fileno())], pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL, stdout=2, env=env
        )
        child.close()
        parent.send((self.index, self.options))
        worker = _Worker(process, parent)
        with self._lock:
            self._all.append(worker)
        return worker

    def _ready(self, worker: _Worker) -> None:
        """Wait for a started worker's index to open, then make it available."""
        if not worker.conn.poll(START_TIMEOUT_S):
            raise RuntimeError(f"a tool worker did not open index {self.index} within {START_TIMEOUT_S:.0f} s")
        try:
            status, detail = worker.conn.recv()
        except EOFError:
            raise RuntimeError(f"a tool worker exited (code {worker.process.wait(5)}) while opening index {self.index}") from None
        if status != "ready":
            raise RuntimeError(f"a tool worker could not open index {self.index}: {detail}")
        self._give_back(worker)

    def _take(self, block: bool = True) -> _Worker:
        """An idle worker; blocking, it waits without the GIL while every worker is busy."""
        worker = self._idle.get(block)
        if worker is None:
            self._idle.put(None)  # for the next caller too
            raise RuntimeError("the tool worker pool is closed")
        return worker

    def _give_back(self, worker: _Worker) -> None:
        if not self._closed:  # a closed pool closes its workers itself
            self._idle.put(worker)

    @functools.cached_property
    def chunk_ids(self) -> ChunkIdFormat:
        """What the index's chunk ids look like, read here (manifest and one row group), not by a worker."""
        return open_index(self.index).chunk_ids

    def call(self, tool: str, arguments: Any, *, tracker: ReadTracker | None = None, full_text: bool = False, result_format: ResultFormat | None = None) -> ToolResult:
        """`ToolContext.call` in a worker process. Never raises (a closed pool raises RuntimeError)."""
        worker = self._take()
        try:
            worker.conn.send(_message(tool, arguments, tracker, full_text, result_format))
            reply = worker.conn.recv()
        except (EOFError, OSError):
            return self._replace(worker, tool)
        except BaseException:
            # Interrupted mid-call (a KeyboardInterrupt, say): its reply would be read by the next caller, so this worker is not reused.
            self._retire(worker)
            raise
        self._give_back(worker)
        return _answer(reply, tracker)

    async def _arun(self, run: functools.partial) -> ToolResult:
        """The call on the event loop's thread (the loop watches the worker's socket): no thread hops."""
        (tool, arguments), options = run.args, run.keywords
        try:
            worker = self._take(block=False)  # acall's gate admits one call per worker
        except queue.Empty:  # sync callers hold workers, or one is being replaced: wait on a thread
            waiting = self._executor().submit(self._take)
            try:
                worker = await asyncio.wrap_future(waiting)
            except asyncio.CancelledError:
                waiting.add_done_callback(lambda f: f.cancelled() or f.exception() or self._give_back(f.result()))
                raise
        loop = asyncio.get_running_loop()
        try:
            worker.conn.send(_message(tool, arguments, **options))
            readable = loop.create_future()
            fd = worker.conn.fileno()
            loop.add_reader(fd, lambda: readable.done() or readable.set_result(None))
            try:
                await readable
            finally:
                loop.remove_reader(fd)
            reply = worker.conn.recv()  # the reply is arriving: at most a moment's wait for its rest
        except (EOFError, OSError):
            return self._replace(worker, tool)
        except BaseException:
            # Cancelled while the worker runs the call: a thread reads the reply, then returns
            # the worker, so the next caller does not get this call's answer.
            threading.Thread(target=self._drain, args=(worker,), daemon=True).start()
            raise
        self._give_back(worker)
        return _answer(reply, options["tracker"])

    def _drain(self, worker: _Worker) -> None:
        try:
            worker.conn.recv()
        except (EOFError, OSError):
            self._replace(worker, "cancelled")
            return
        self._give_back(worker)

    def _retire(self, worker: _Worker) -> None:
        with self._lock:
            if worker in self._all:
                self._all.remove(worker)
        worker.conn.close()
        if worker.process.poll() is None:
            worker.process.kill()
        worker.process.wait(5)

    def _replace(self, worker: _Worker, tool: str) -> ToolResult:
        self._retire(worker)
        code = worker.process.returncode
        how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
        log.error("tool worker %s %s during a %s call; starting another", worker.process.pid, how, tool)
        if not self._closed:
            try:
                self._ready(self._start())
            except Exception as exc:  # the pool serves on with the workers it has left
                log.error("could not replace the tool worker: %s", exc)
        # Not the model's doing: an internal failure (arag.tools.failures), which fails the episode.
        result = error_result(str(tool)[:100], f"the tool worker process {how} during this call (a replacement was started)", INFRASTRUCTURE)
        result.details[DIAGNOSTICS] = f"tool worker {worker.process.pid} {how} during a {tool} call"
        return result

    def pids(self) -> list[int]:
        with self._lock:
            return [w.process.pid for w in self._all]

    def close(self) -> None:
        super().close()
        self._closed = True
        self._idle.put(None)
        with self._lock:
            workers, self._all = self._all, []
        for worker in workers:
            with suppress(OSError):
                worker.conn.send(None)
        for worker in workers:
            try:
                worker.process.wait(10)
            except subprocess.TimeoutExpired:
                worker.process.kill()
                worker.process.wait(5)
            worker.conn.close()

    def __repr__(self) -> str:
        return f"ToolWorkerPool({self.index!r}, workers={self.workers})"


if __name__ == "__main__":
    _worker_main(Connection(int(sys.argv[1])))
