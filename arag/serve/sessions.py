"""Per-session read trackers of a tool server, bounded in number and in idle time.

chunk_read remembers, per episode, which chunks it already put into the agent's context
(`ReadTracker`), and AgenticRAG's document tools the reference ids their searches handed out; a
session's tracker is a `DocumentSession` (a ReadTracker with the document tools' state), so both
kinds of tools keep their episode memory on the server exactly as in-process. A server sees episodes as sessions (an MCP session, or the `X-Session-Id` of a
JSON API call) and keeps one tracker per session. Clients rarely say when an episode ends, so the
store forgets on its own: a session idle longer than `idle_s` starts afresh, and beyond
`max_sessions` the least recently used one is dropped. Memory is bounded in bytes too (an
estimate of each session's state, taken after each of its calls): a session over `session_bytes`
first drops the documents it loaded (a cache: they are read again from the index, with the same
lines), then is forgotten if still over; beyond `total_bytes` for all sessions together the least
recently used ones go first. An MCP session is counted from its initialize on, with what its
transport costs besides the tracker (`open`), and forgetting it ends the MCP session too
(`on_forget`). Memory stays bounded however many episodes pass through.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable

from arag.tools import DocumentSession, ReadTracker

log = logging.getLogger("arag.serve")

# Longest session id kept; longer ids are refused rather than stored.
MAX_SESSION_ID_CHARS = 200


class SessionIdError(ValueError):
    """A session id that cannot be used (too long, or not printable text)."""


def check_session_id(session_id: str) -> str:
    if len(session_id) > MAX_SESSION_ID_CHARS:
        raise SessionIdError(f"session id is {len(session_id)} characters long; at most {MAX_SESSION_ID_CHARS}")
    if not session_id.isprintable() or not session_id.strip():
        raise SessionIdError("session id must be non-blank printable text")
    return session_id


# Rough per-item costs of a session's state in CPython (object headers, container slots).
READ_ITEM_BYTES = 150  # a chunk id in the read set and in the order list
REF_BYTES = 400  # a DocumentRef with its ids and title
LINE_OVERHEAD_BYTES = 70  # a loaded line's list slots, sentence id and chunk id reference


def document_bytes(lines: list[str]) -> int:
    return sum(map(sys.getsizeof, lines)) + LINE_OVERHEAD_BYTES * len(lines)


@dataclass
class _Entry:
    tracker: DocumentSession
    last_used: float
    bytes: int = 0
    document_sizes: dict[str, int] = field(default_factory=dict)  # loaded documents do not change: measured once
    overhead: int = 0  # what the session costs besides its tracker (an MCP session's transport)


def tracker_bytes(tracker: ReadTracker, document_sizes: dict[str, int]) -> int:
    """An estimate of the memory a session's state holds (document_sizes: the loaded documents
    already measured, filled in here)."""
    size = 1000 + READ_ITEM_BYTES * len(tracker.read)
    if isinstance(tracker, DocumentSession):
        size += REF_BYTES * len(tracker.refs)
        for doc_id, doc in tracker.documents.items():
            if doc_id not in document_sizes:
                document_sizes[doc_id] = document_bytes(doc.lines)
            size += document_sizes[doc_id]
    return size


class SessionTrackers:
    """session id → DocumentSession, least recently used first; safe to use from several threads.
    session_bytes: most memory one session may hold; total_bytes: all sessions together."""

    def __init__(
        self,
        max_sessions: int = 10_000,
        idle_s: float = 3600.0,
        clock: Callable[[], float] = time.monotonic,
        *,
        session_bytes: int = 16 * 2**20,
        total_bytes: int = 512 * 2**20,
    ):
        if max_sessions < 1:
            raise ValueError(f"serve.max_sessions must be at least 1, got {max_sessions}")
        if idle_s <= 0:
            raise ValueError(f"serve.session_idle_s must be positive, got {idle_s}")
        if session_bytes < 1 or total_bytes < session_bytes:
            raise ValueError(f"serve.session_max_bytes must be at least 1 and serve.sessions_max_bytes at least as large, got {session_bytes} and {total_bytes}")
        self.max_sessions = max_sessions
        self.idle_s = idle_s
        self.session_bytes = session_bytes
        self.total_bytes = total_bytes
        self._clock = clock
        self._lock = threading.Lock()
        self._trackers: OrderedDict[str, _Entry] = OrderedDict()
        self._bytes = 0
        # Called (under the lock: it must be quick) with the id of each session forgotten, so what
        # else holds the session (an MCP session's transport) goes with it.
        self.on_forget: Callable[[str], None] | None = None

    def open(self, session_id: str, overhead: int) -> None:
        """A session that costs `overhead` bytes besides its tracker (an MCP session, from its
        initialize on), counted at once: the least recently used sessions go to make room."""
        now = self._clock()
        with self._lock:
            self._expire(now)
            entry = self._trackers.pop(session_id, None) or _Entry(DocumentSession(), now)
            entry.last_used, entry.overhead = now, overhead
            self._trackers[session_id] = entry
            self._bytes -= entry.bytes
            entry.bytes = overhead + tracker_bytes(entry.tracker, entry.document_sizes)
            self._bytes += entry.bytes
            self._bound(session_id)

    def touch(self, session_id: str) -> bool:
        """Mark a session used now (without creating it); False if it is not kept."""
        now = self._clock()
        with self._lock:
            self._expire(now)
            entry = self._trackers.get(session_id)
            if entry is None:
                return False
            entry.last_used = now
            self._trackers.move_to_end(session_id)
            return True

    def get(self, session_id: str) -> DocumentSession:
        """The session's tracker (a fresh one for a new or expired session)."""
        now = self._clock()
        with self._lock:
            self._expire(now)
            entry = self._trackers.pop(session_id, None)
            if entry is None:
                entry = _Entry(DocumentSession(), now)
            entry.last_used = now
            self._trackers[session_id] = entry
            self._bound(session_id)
            return entry.tracker

    def settle(self, session_id: str) -> None:
        """After a call of the session: measure its state and keep memory within bounds."""
        with self._lock:
            entry = self._trackers.get(session_id)
            if entry is None:
                return
            self._bytes -= entry.bytes
            entry.bytes = entry.overhead + tracker_bytes(entry.tracker, entry.document_sizes)
            if entry.bytes - entry.overhead > self.session_bytes and entry.tracker.documents:
                entry.tracker.documents.clear()
                entry.document_sizes.clear()
                entry.bytes = entry.overhead + tracker_bytes(entry.tracker, entry.document_sizes)
            self._bytes += entry.bytes
            if entry.bytes - entry.overhead > self.session_bytes:
                log.warning("session %r holds about %d bytes, over serve.session_max_bytes (%d): forgotten", session_id[:60], entry.bytes, self.session_bytes)
                self._forget(session_id)
            self._bound(session_id)

    def _bound(self, keep: str) -> None:
        """Forget the least recently used sessions while over max_sessions or total_bytes (`keep`,
        the session in use, goes last: only when it alone is over the total)."""
        while self._trackers and (len(self._trackers) > self.max_sessions or self._bytes > self.total_bytes):
            oldest = next(iter(self._trackers))
            if oldest == keep:
                if len(self._trackers) == 1:
                    break
                oldest = list(self._trackers)[1]
            self._forget(oldest)

    @property
    def bytes(self) -> int:
        with self._lock:
            return self._bytes

    def _forget(self, session_id: str) -> None:
        entry = self._trackers.pop(session_id)
        self._bytes -= entry.bytes
        if self.on_forget is not None:
            self.on_forget(session_id)

    def drop(self, session_id: str) -> bool:
        with self._lock:
            if session_id not in self._trackers:
                return False
            self._forget(session_id)
            return True

    def __len__(self) -> int:
        with self._lock:
            self._expire(self._clock())
            return len(self._trackers)

    def _expire(self, now: float) -> None:
        # Oldest use first: stop at the first session still fresh.
        while self._trackers:
            session_id, entry = next(iter(self._trackers.items()))
            if now - entry.last_used <= self.idle_s:
                break
            self._forget(session_id)
