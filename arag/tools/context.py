"""`ToolContext`: one open index shared by every tool (the per-part caches, FAISS shards, embedder).

Open it once per process (per evaluation worker or tool server) and call tools through it from
any number of threads: no lock serialises the calls. The caches are memory-mapped and read with
per-thread readers, FAISS and numpy release the GIL, DuckDB (only for ad-hoc `sql`) runs on a
cursor per thread, and concurrent query encodings are micro-batched (arag.tools.batching), one
batch per core at a time.

Admission: at most `max_active` calls (default: twice the cores) run their CPU work at once;
the other callers wait their turn on a semaphore, holding no GIL. Without it, 256 runnable
callers took 3.5x fewer calls/s than 16 (benchmarks/tools_concurrency.py); the likely reason is
that the encoder threads, which release the GIL inside OpenVINO and need it back for tokenising
and pooling, then wait behind hundreds of GIL-hungry threads after every release. A call waiting for its query encoding gives its slot back, so every
waiting query can still join one batch.
"""

from __future__ import annotations

import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import numpy as np

from arag.index.store import Index, open_index
from arag.tools.base import ToolOptions, ToolResult, error_result
from arag.tools.batching import BatchingEncoder
from arag.tools.registry import TOOLS
from arag.tools.store import ChunkStore
from arag.tools.tracker import ReadTracker

log = logging.getLogger(__name__)

# Encodes queries into unit float32 vectors of the index's dimension, shape (n, d).
Encoder = Callable[[list[str]], np.ndarray]

# Shards above this size are memory-mapped rather than read into RAM.
MMAP_SHARD_BYTES = 1 << 30


class ToolContext:
    """The retrieval layer over one index.

    index: an index directory (must hold manifest.json) or an open `Index`.
    encoder: query encoder (a batch of texts in, one row per text out); default: the index's own
        embedder (`SentenceEmbedder(index.embedder_spec).encode_queries`, with the model's query
        prompt), loaded on the first semantic call. Calls are micro-batched across threads.
    cache_dir: where the per-part tools caches live (default `<index>/tools_cache`, see arag.tools.store).
    accelerate: narrow keyword candidates with the trigram postings (same results, faster);
        False scores every chunk.
    nprobe: for IVF shards, how many lists to visit (default: the value saved in the shard).
    batch_window_s: how long the query encoder waits for more concurrent queries to batch.
    max_active: calls that run at once (default: twice the cores); more callers queue.
    """

    def __init__(
        self,
        index: str | Path | Index,
        *,
        encoder: Encoder | None = None,
        cache_dir: str | Path | None = None,
        accelerate: bool = True,
        nprobe: int | None = None,
        duckdb_threads: int | None = None,
        batch_window_s: float = 0.001,
        max_active: int | None = None,
    ):
        self.index = index if isinstance(index, Index) else open_index(index)
        self.store = ChunkStore.open(self.index, cache_dir=cache_dir)
        self.accelerate = accelerate
        self.nprobe = nprobe
        self._encoder = encoder
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        self._batcher = BatchingEncoder(self._encode_batch, window_s=batch_window_s, workers=cores)
        self.max_active = max(1, int(max_active or 2 * cores))
        self._active = threading.BoundedSemaphore(self.max_active)
        self._admitted = threading.local()  # .held: this thread's call holds a slot of _active
        self._shards: list[Any] | None = None
        self._exact: dict[int, tuple[np.ndarray, np.ndarray] | None] = {}  # by id() of a loaded shard
        self._lock = threading.RLock()  # one-time loads only (the encoder, the shards)
        self._pool = ThreadPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1)), thread_name_prefix="faiss-shard")
        self._duckdb_threads = duckdb_threads
        self._con: Any = None
        self._cursors = threading.local()

    # ---- tools ------------------------------------------------------------------------------
    def call(self, tool: str, arguments: Any, *, tracker: ReadTracker | None = None, full_text: bool = False) -> ToolResult:
        """Run tool `tool` with JSON-able `arguments` (a dict or a JSON string). Never raises."""
        spec = TOOLS.get(tool) if isinstance(tool, str) else None
        if spec is None:
            return error_result(str(tool)[:100], f"unknown tool; available tools: {', '.join(TOOLS)}")
        if getattr(self._admitted, "held", False):  # a tool calling a tool: already admitted
            return spec.call(self, arguments, ToolOptions(full_text=full_text, tracker=tracker))
        with self._active:
            self._admitted.held = True
            try:
                return spec.call(self, arguments, ToolOptions(full_text=full_text, tracker=tracker))
            finally:
                self._admitted.held = False

    # ---- shared resources -----------------------------------------------------------------------
    def sql(self, query: str, params: list[Any] | None = None, tables: dict[str, Any] | None = None) -> list[tuple]:
        """Ad-hoc DuckDB query with bound parameters over the view `chunks` (the index's chunk
        Parquet files: chunk_id, doc_id, title, position, text, n_tokens); `tables` are Arrow
        tables visible to this query only. Not used by the tools; each thread has its own cursor."""
        cur = getattr(self._cursors, "cursor", None)
        if cur is None:
            cur = self._cursors.cursor = self._connection().cursor()
        for name, table in (tables or {}).items():
            cur.register(name, table)
        try:
            return cur.execute(query, params or []).fetchall()
        finally:
            for name in tables or {}:
                cur.unregister(name)

    def _connection(self) -> Any:
        with self._lock:
            if self._con is None:
                import duckdb

                con = duckdb.connect(":memory:")
                if self._duckdb_threads:
                    con.execute(f"SET threads = {int(self._duckdb_threads)}")
                # A view cannot take bound parameters: the file names are quoted as SQL strings.
                files = ", ".join("'" + str(f).replace("'", "''") + "'" for f in self.index.chunk_files)
                if files:
                    con.execute(f"CREATE VIEW chunks AS SELECT * FROM read_parquet([{files}])")
                else:
                    con.execute("CREATE VIEW chunks AS SELECT NULL::VARCHAR AS chunk_id, NULL::VARCHAR AS doc_id, NULL::VARCHAR AS title, NULL::INTEGER AS position, NULL::VARCHAR AS text, NULL::INTEGER AS n_tokens WHERE false")
                self._con = con
            return self._con

    def encode_query(self, query: str) -> np.ndarray:
        """(1, d) unit vector of `query`; concurrent calls are encoded together."""
        if getattr(self._admitted, "held", False):  # wait for the encoder without holding a slot
            self._active.release()
            try:
                vec = self._batcher.encode(query)
            finally:
                self._active.acquire()
        else:
            vec = self._batcher.encode(query)
        if vec.ndim != 1 or vec.shape[0] != self.index.dimension:
            raise ValueError(f"query encoder returned shape {vec.shape}, expected ({self.index.dimension},)")
        return np.ascontiguousarray(vec[None, :], dtype=np.float32)

    def _encode_batch(self, queries: list[str]) -> np.ndarray:
        # Runs on the batching worker thread only: the model is loaded once, there.
        if self._encoder is None:
            from arag.index.embedding import SentenceEmbedder

            log.info("loading the query encoder %s", self.index.embedder_spec.name)
            self._encoder = SentenceEmbedder(self.index.embedder_spec).encode_queries
        return self._encoder(queries)

    @property
    def shards(self) -> list[Any]:
        """FAISS shards of the parts with sentences, in part order; loaded on first use."""
        with self._lock:
            if self._shards is None:
                import faiss

                shards = []
                for path in self.index.vector_files:
                    big = path.stat().st_size > MMAP_SHARD_BYTES
                    flags = faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY if big else 0
                    try:
                        shard = faiss.read_index(str(path), flags)
                    except RuntimeError:  # an index type without mmap support: read it whole
                        shard = faiss.read_index(str(path))
                    if self.nprobe:
                        try:
                            faiss.extract_index_ivf(shard).nprobe = int(self.nprobe)
                        except RuntimeError:
                            pass  # exact (Flat) shard: nothing to probe
                    shards.append(shard)
                self._shards = shards
            return self._shards

    def search_sentences(self, qvec: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Top `n` sentences over all shards: (scores desc, sentence ids); ties by smaller id."""
        scores, ids = [], []
        shards = [s for s in self.shards if s.ntotal > 0]

        def search(shard: Any) -> tuple[np.ndarray, np.ndarray]:
            exact = self._exact_view(shard)
            if exact is not None:
                return _top_inner_products(exact[0], exact[1], qvec[0], min(n, shard.ntotal))
            return shard.search(qvec, min(n, shard.ntotal))

        # FAISS answers a single query on one thread and releases the GIL: shards run in parallel.
        results = self._pool.map(search, shards) if len(shards) > 1 else map(search, shards)
        for d, i in results:
            keep = i[0] >= 0
            scores.append(d[0][keep])
            ids.append(i[0][keep])
        if not scores:
            return np.zeros(0, np.float32), np.zeros(0, np.int64)
        s, i = np.concatenate(scores), np.concatenate(ids)
        order = np.lexsort((i, -s))[:n]
        return s[order], i[order]

    def _exact_view(self, shard: Any) -> tuple[np.ndarray, np.ndarray] | None:
        """(vectors, ids) of an exact inner-product shard as arrays over FAISS's own memory (no
        copy; for a memory-mapped shard, over the mapped file), or None for other index types.

        For one query FAISS's flat scan runs on a single thread, one vector at a time; a BLAS
        matrix-vector product over the same memory is ~2x faster and gives the same ranking."""
        key = id(shard)
        if key not in self._exact:
            import faiss

            view = None
            inner = faiss.downcast_index(shard.index) if isinstance(shard, faiss.IndexIDMap) else None
            if isinstance(inner, faiss.IndexFlatIP) and shard.ntotal > 0:
                vectors = faiss.rev_swig_ptr(inner.get_xb(), shard.ntotal * inner.d).reshape(shard.ntotal, inner.d)
                view = (vectors, faiss.vector_to_array(shard.id_map))
            self._exact[key] = view
        return self._exact[key]

    def close(self) -> None:
        self._batcher.close()
        with self._lock:
            if self._con is not None:
                self._con.close()
                self._con = None
            self._shards = None
            self._exact.clear()
        self._pool.shutdown(wait=False)

    def __enter__(self) -> "ToolContext":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ToolContext({self.index!r}, accelerate={self.accelerate})"


def _top_inner_products(vectors: np.ndarray, ids: np.ndarray, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """FAISS-shaped (1, k) scores and ids of the k largest inner products, best first."""
    scores = vectors @ query  # BLAS sgemv: multi-threaded, releases the GIL
    top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
    top = top[np.lexsort((ids[top], -scores[top]))]
    return scores[top][None, :], ids[top][None, :]
