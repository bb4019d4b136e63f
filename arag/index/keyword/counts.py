"""A bounded, least-recently-used memory of keywords' counts over an index's chunks.

A keyword's count vector does not depend on the query it came in (the score is a sum over keywords),
and costly keywords recur across the agents a tool server serves (docs/tools.md, "Tools cache").
The vectors are read-only and exact: a hit returns what counting again would."""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

# Per opened index (each tool-server worker and each evaluation worker with a local index has its
# own): 128 MiB holds the counts of ~370 keywords that occur in 30k chunks each ('mother' at 10M
# sentences: 29,940 chunks, 12 bytes each, 359 kB).
BUDGET_BYTES = 128 * 2**20
# Keywords scanning fewer candidate chunks than this are counted again on every call: a twentieth
# of the costliest keywords' candidates above.
MIN_CANDIDATES = 4096
# Or counted in at least this long: a vocabulary search in each of many parts (a name at 22 parts,
# 24-120 ms on the shared machine) is worth keeping whatever few chunks it touched.
MIN_SECONDS = 0.002
# What an entry costs beyond its arrays (key, tuple, ordered-dict node), counted in the budget.
ENTRY_BYTES = 200


class KeywordCounts:
    """lowered keyword -> (ascending chunk ords, counts), least recently used first out."""

    def __init__(self, budget_bytes: int = BUDGET_BYTES, min_candidates: int = MIN_CANDIDATES, min_seconds: float = MIN_SECONDS):
        self.budget_bytes, self.min_candidates, self.min_seconds = budget_bytes, min_candidates, min_seconds
        self._entries: OrderedDict[str, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._lock = threading.Lock()  # a tool server runs searches on several threads
        self.bytes = self.hits = self.misses = 0

    def get(self, keyword: str) -> tuple[np.ndarray, np.ndarray] | None:
        with self._lock:
            entry = self._entries.get(keyword)
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(keyword)
            self.hits += 1
            return entry

    def put(self, keyword: str, ords: np.ndarray, counts: np.ndarray, candidates: int, seconds: float = 0.0) -> None:
        """Keep the counts if they touched ≥ min_candidates chunks or took ≥ min_seconds, and fit the budget."""
        size = ords.nbytes + counts.nbytes + ENTRY_BYTES
        if (candidates < self.min_candidates and seconds < self.min_seconds) or size > self.budget_bytes:
            return
        ords.setflags(write=False)
        counts.setflags(write=False)
        with self._lock:
            old = self._entries.pop(keyword, None)
            if old is not None:
                self.bytes -= old[0].nbytes + old[1].nbytes + ENTRY_BYTES
            self._entries[keyword] = (ords, counts)
            self.bytes += size
            while self.bytes > self.budget_bytes:
                _, (o, c) = self._entries.popitem(last=False)
                self.bytes -= o.nbytes + c.nbytes + ENTRY_BYTES

    def __len__(self) -> int:
        return len(self._entries)

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"keywords": len(self._entries), "bytes": self.bytes, "hits": self.hits, "misses": self.misses}
