"""Sentence vector search over one index: exact over the Flat shards, or the index's ANN.

`VectorSearch.search(qvec, n)`: the top `n` sentences, scores descending, ties by smaller sentence id.
Without an ANN every exact shard is scanned (equal to brute force); an IVF one's candidates are
re-ranked exactly from the shards on disk (docs/indexing.md, "Index format"). Loading happens once,
under a lock; searches take none (FAISS releases the GIL), so threads share one `VectorSearch`.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from arag.index import ann
from arag.index.facts import search_overrides, vector_search_fact
from arag.index.store import Index
from arag.index.vectors import inner_products
from arag.small_sorted import best_first

# Exact shards above this size are memory-mapped rather than read into RAM.
MMAP_SHARD_BYTES = 1 << 30


class VectorSearch:
    """The vector shards of one index and how to search them. nprobe (IVF lists probed; per shard for
    old per-part IVF shards) and rerank (exact re-rank candidates per result) default to what the index's
    build recorded (arag.index.ann.search_settings); shards over `mmap_bytes` are memory-mapped;
    resident_vectors: re-rank rows held in memory (None: when they fit, arag.index.ann.StoredVectors);
    probe_slices: one ANN query's lists scanned in this many slices at once (None: ann.DEFAULT_PROBE_SLICES)."""

    def __init__(self, index: Index, *, nprobe: int | None = None, rerank: int | None = None, mmap_bytes: int = MMAP_SHARD_BYTES, resident_vectors: bool | None = None, probe_slices: int | None = None):
        self.index, self.resident_vectors = index, resident_vectors
        self.nprobe = nprobe
        self.rerank = rerank
        self.mmap_bytes = mmap_bytes
        self.probe_slices = ann.DEFAULT_PROBE_SLICES if probe_slices is None else probe_slices
        for name, value in (("nprobe", nprobe), ("rerank", rerank), ("probe_slices", probe_slices)):
            if value is not None and int(value) < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        entry = index.manifest.get("ann") or {"kind": "flat"}
        self.kind: str = entry["kind"]
        self.ann_entry: dict[str, Any] | None = None if entry["kind"] == "flat" else entry
        self._shards: list[tuple[Any, tuple[np.ndarray, np.ndarray] | None]] | None = None
        self._ann: ann.AnnSearcher | None = None
        self._stored: ann.StoredVectors | None = None
        self._load_lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def search_fact(self) -> str:
        """How this search scores sentences, its overrides applied (arag.index.facts.vector_search_fact)."""
        return vector_search_fact(self.index.manifest, self.nprobe, self.rerank, self.probe_slices)

    def search_overrides(self) -> dict[str, int]:
        """This search's settings that differ from the index's own (arag.index.facts.search_overrides)."""
        return search_overrides(self.index.manifest, self.nprobe, self.rerank, self.probe_slices)

    def load(self) -> None:
        """Load the shards (or the ANN) now instead of on the first search."""
        if self.ann_entry:
            self._ann_searcher()
        else:
            self._exact_shards()

    def search(self, qvec: np.ndarray, n: int, *, nprobe: int | None = None, rerank: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Top `n` sentences for `qvec` (shape (1, d)): (scores desc, sentence ids); nprobe/rerank for this call."""
        nprobe = nprobe or self.nprobe
        if self.ann_entry:
            return self._ann_searcher().search(qvec, n, nprobe=nprobe, rerank_factor=rerank or self.rerank)
        return self._search_shards(qvec, n, nprobe)

    def scores(self, qvec: np.ndarray, sentence_ids: np.ndarray) -> np.ndarray:
        """Exact inner products of `qvec` (shape (1, d)) with the given sentences' vectors (from the exact shards)."""
        if self._stored is None:
            with self._load_lock:
                if self._stored is None:
                    self._stored = ann.StoredVectors({p.part: p.vectors for p in self.index.parts if p.num_sentences}, self.resident_vectors)
        return self._stored.scores(np.asarray(sentence_ids, dtype=np.int64), qvec[0])

    def _ann_searcher(self) -> ann.AnnSearcher:
        if self._ann is None:
            with self._load_lock:
                if self._ann is None:
                    parts = {p.part: p.vectors for p in self.index.parts if p.num_sentences}
                    self._ann = ann.AnnSearcher(self.index.root, self.ann_entry, parts, self.resident_vectors, self.probe_slices)
        return self._ann

    def _exact_shards(self) -> list[tuple[Any, tuple[np.ndarray, np.ndarray] | None]]:
        """(FAISS shard, exact view or None) of each part with sentences, in part order."""
        if self._shards is None:
            with self._load_lock:
                if self._shards is None:
                    shards = [(s, _exact_view(s)) for s in (self._read_shard(p) for p in self.index.vector_files) if s.ntotal > 0]
                    self._pool = ThreadPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1)), thread_name_prefix="faiss-shard")
                    self._shards = shards
        return self._shards

    def _read_shard(self, path) -> Any:
        import faiss

        flags = faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY if path.stat().st_size > self.mmap_bytes else 0
        try:
            return faiss.read_index(str(path), flags)
        except RuntimeError:  # an index type without mmap support: read it whole
            return faiss.read_index(str(path))

    def _search_shards(self, qvec: np.ndarray, n: int, nprobe: int | None) -> tuple[np.ndarray, np.ndarray]:
        shards = self._exact_shards()

        def search(item: tuple[Any, tuple[np.ndarray, np.ndarray] | None]) -> tuple[np.ndarray, np.ndarray]:
            shard, exact = item
            k = min(n, shard.ntotal)
            if exact is not None:
                return _top_inner_products(exact[0], exact[1], qvec[0], k)
            return _search_faiss_shard(shard, qvec, k, nprobe)

        # FAISS answers a single query on one thread and releases the GIL: shards run in parallel.
        results = list(self._pool.map(search, shards) if len(shards) > 1 else map(search, shards))
        if not results:
            return np.zeros(0, np.float32), np.zeros(0, np.int64)
        scores = np.concatenate([d[0][i[0] >= 0] for d, i in results])
        ids = np.concatenate([i[0][i[0] >= 0] for _, i in results])
        return ann.top_exact(scores, ids, n)

    def close(self) -> None:
        with self._load_lock:
            self._shards = None
            self._ann = None
            if self._pool is not None:
                self._pool.shutdown(wait=False)
                self._pool = None


def _search_faiss_shard(shard: Any, qvec: np.ndarray, k: int, nprobe: int | None) -> tuple[np.ndarray, np.ndarray]:
    """A shard of another index type (per-part IVF shards of indexes built before index.ann)."""
    import faiss

    if nprobe and faiss.try_extract_index_ivf(shard) is not None:
        return shard.search(qvec, k, params=faiss.SearchParametersIVF(nprobe=int(nprobe)))
    return shard.search(qvec, k)


def _exact_view(shard: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """(vectors, ids) of an exact inner-product shard as arrays over FAISS's own memory (no copy;
    for a memory-mapped shard, over the mapped file), or None for other index types."""
    import faiss

    inner = faiss.downcast_index(shard.index) if isinstance(shard, faiss.IndexIDMap) else None
    if isinstance(inner, faiss.IndexFlatIP) and shard.ntotal > 0:
        vectors = faiss.rev_swig_ptr(inner.get_xb(), shard.ntotal * inner.d).reshape(shard.ntotal, inner.d)
        return vectors, faiss.vector_to_array(shard.id_map)
    return None


def _top_inner_products(vectors: np.ndarray, ids: np.ndarray, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """FAISS-shaped (1, k) scores and ids of the k largest inner products, best first."""
    scores = inner_products(vectors, query)
    top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
    top = top[best_first(scores[top], ids[top])]
    return scores[top][None, :], ids[top][None, :]
