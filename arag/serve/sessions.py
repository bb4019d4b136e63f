"""Per-session read trackers of a tool server (an MCP session, or a JSON API call's `X-Session-Id`), so
chunk_read's reads and the document tools' reference ids stay on the server as in-process. Clients
rarely say when an episode ends, so the store forgets on its own, by idle time, count and bytes
(docs/tools.md, "Tool server": Sessions)."""

from __future__ import annotations

import logging
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from cachetools import TTLCache

from arag.tools import DocumentSession

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


@dataclass
class _Entry:
    tracker: DocumentSession = field(default_factory=DocumentSession)
    bytes: int = 0
    document_sizes: dict[str, int] = field(default_factory=dict)  # loaded documents do not change: measured once
    overhead: int = 0  # what the session costs besides its tracker (an MCP session's transport)

    def measure(self) -> None:
        """An estimate of the session's memory."""
        tracker = self.tracker
        size = self.overhead + 1000 + READ_ITEM_BYTES * len(tracker.read) + REF_BYTES * len(tracker.refs)
        for doc_id, doc in tracker.documents.items():
            if doc_id not in self.document_sizes:
                self.document_sizes[doc_id] = sum(map(sys.getsizeof, doc.lines)) + LINE_OVERHEAD_BYTES * len(doc.lines)
            size += self.document_sizes[doc_id]
        self.bytes = size


class _Store(TTLCache):
    """cachetools' TTLCache (LRU, idle expiry, size in bytes) that reports each session it evicts or expires."""

    def __init__(self, forgotten: Callable[[str], None], **options) -> None:
        super().__init__(**options)
        self.forgotten = forgotten

    def popitem(self) -> tuple[str, _Entry]:
        session_id, entry = super().popitem()
        self.forgotten(session_id)
        return session_id, entry

    def expire(self, time: float | None = None) -> list[tuple[str, _Entry]]:
        expired = super().expire(time)
        for session_id, _ in expired:
            self.forgotten(session_id)
        return expired


class SessionTrackers:
    """session id → DocumentSession, thread-safe; session_bytes: one session's memory, total_bytes: all."""

    def __init__(self, max_sessions: int = 10_000, idle_s: float = 3600.0, clock: Callable[[], float] = time.monotonic, *, session_bytes: int = 16 * 2**20, total_bytes: int = 512 * 2**20):
        if session_bytes < 1 or total_bytes < session_bytes:
            raise ValueError(f"serve.session_max_bytes must be at least 1 and serve.sessions_max_bytes at least as large, got {session_bytes} and {total_bytes}")
        self.max_sessions = max_sessions
        self.session_bytes = session_bytes
        self._lock = threading.Lock()
        # A session alone over the total counts as the total: it is kept, the others go.
        self._sessions = _Store(lambda session_id: self.on_forget(session_id), maxsize=total_bytes, ttl=idle_s, timer=clock, getsizeof=lambda entry: min(entry.bytes, total_bytes))
        # Called (under the lock: it must be quick) with the id of each session forgotten, so what
        # else holds the session (an MCP session's transport) goes with it.
        self.on_forget: Callable[[str], None] = lambda session_id: None

    def _keep(self, session_id: str, entry: _Entry) -> None:
        """Store the session as the most recently used; the least recently used go while over the bounds."""
        self._sessions.pop(session_id, None)
        self._sessions[session_id] = entry
        while len(self._sessions) > self.max_sessions:
            self._sessions.popitem()

    def open(self, session_id: str, overhead: int) -> None:
        """A session costing `overhead` bytes besides its tracker (an MCP session's transport), counted at once."""
        with self._lock:
            entry = self._sessions.get(session_id) or _Entry()
            entry.overhead = overhead
            entry.measure()
            self._keep(session_id, entry)

    def touch(self, session_id: str) -> bool:
        """Mark a session used now (without creating it); False if it is not kept."""
        with self._lock:
            entry = self._sessions.get(session_id)
            if entry is not None:
                self._keep(session_id, entry)
            return entry is not None

    def get(self, session_id: str) -> DocumentSession:
        """The session's tracker (a fresh one for a new or expired session)."""
        with self._lock:
            entry = self._sessions.get(session_id) or _Entry()
            self._keep(session_id, entry)
            return entry.tracker

    def settle(self, session_id: str) -> None:
        """After a call of the session: measure its state and keep memory within bounds."""
        with self._lock:
            entry = self._sessions.get(session_id)
            if entry is None:
                return
            entry.measure()
            if entry.bytes - entry.overhead > self.session_bytes and entry.tracker.documents:
                entry.tracker.documents.clear()
                entry.document_sizes.clear()
                entry.measure()
            if entry.bytes - entry.overhead > self.session_bytes:
                log.warning("session %r holds about %d bytes, over serve.session_max_bytes (%d): forgotten", session_id[:60], entry.bytes, self.session_bytes)
                self._drop(session_id)
                return
            self._keep(session_id, entry)

    @property
    def bytes(self) -> int:
        with self._lock:
            return self._sessions.currsize

    def _drop(self, session_id: str) -> None:
        del self._sessions[session_id]
        self.on_forget(session_id)

    def drop(self, session_id: str) -> bool:
        with self._lock:
            if session_id not in self._sessions:
                return False
            self._drop(session_id)
            return True

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)
