"""Per-session read trackers of a tool server, bounded in number and in idle time.

chunk_read remembers, per episode, which chunks it already put into the agent's context
(`ReadTracker`), and AgenticRAG's document tools the reference ids their searches handed out; a
session's tracker is a `DocumentSession` (a ReadTracker with the document tools' state), so both
kinds of tools keep their episode memory on the server exactly as in-process. A server sees episodes as sessions (an MCP session, or the `X-Session-Id` of a
JSON API call) and keeps one tracker per session. Clients rarely say when an episode ends, so the
store forgets on its own: a session idle longer than `idle_s` starts afresh, and beyond
`max_sessions` the least recently used one is dropped. Memory stays bounded however many
episodes pass through.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Callable

from arag.tools import DocumentSession

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


class SessionTrackers:
    """session id → DocumentSession, least recently used first; safe to use from several threads."""

    def __init__(self, max_sessions: int = 10_000, idle_s: float = 3600.0, clock: Callable[[], float] = time.monotonic):
        if max_sessions < 1:
            raise ValueError(f"serve.max_sessions must be at least 1, got {max_sessions}")
        if idle_s <= 0:
            raise ValueError(f"serve.session_idle_s must be positive, got {idle_s}")
        self.max_sessions = max_sessions
        self.idle_s = idle_s
        self._clock = clock
        self._lock = threading.Lock()
        self._trackers: OrderedDict[str, tuple[DocumentSession, float]] = OrderedDict()

    def get(self, session_id: str) -> DocumentSession:
        """The session's tracker (a fresh one for a new or expired session)."""
        now = self._clock()
        with self._lock:
            self._expire(now)
            entry = self._trackers.pop(session_id, None)
            tracker = entry[0] if entry is not None else DocumentSession()
            self._trackers[session_id] = (tracker, now)
            while len(self._trackers) > self.max_sessions:
                self._trackers.popitem(last=False)
            return tracker

    def drop(self, session_id: str) -> bool:
        with self._lock:
            return self._trackers.pop(session_id, None) is not None

    def __len__(self) -> int:
        with self._lock:
            self._expire(self._clock())
            return len(self._trackers)

    def _expire(self, now: float) -> None:
        # Oldest use first: stop at the first session still fresh.
        while self._trackers:
            session_id, (_, last_used) = next(iter(self._trackers.items()))
            if now - last_used <= self.idle_s:
                break
            del self._trackers[session_id]
