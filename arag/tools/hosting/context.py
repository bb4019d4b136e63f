"""`ToolContext`: one open index shared by every tool (the per-part caches, FAISS shards, embedder).

Call tools from any number of threads: no lock serialises the calls (docs/tools.md, "Concurrency").
`acall` runs at most `max_active` at once (default twice the cores): unbounded, 256 runnable callers
made 3.5x fewer calls/s than 16 (benchmarks/tools_concurrency.py), the encoders waiting for the GIL
behind hundreds of threads.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from arag.index.chunk_ids import ChunkIdFormat
from arag.index.store import Index, open_index
from arag.tools.base import ResultFormat, ToolOptions, ToolResult, error_result
from arag.tools.hosting.batching import BatchingEncoder, Encoder
from arag.tools.hosting.calls import ToolCalls
from arag.tools.failures import UNKNOWN_TOOL
from arag.tools.registry import TOOLS
from arag.tools.index_cache import ChunkStore
from arag.tools.tracker import ReadTracker
from arag.tools.vector_search import VectorSearch

log = logging.getLogger(__name__)


def usable_cores() -> int:
    """The cores this process may run on (its affinity where the OS has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


class ToolContext(ToolCalls):
    """The retrieval layer over one index (a directory holding manifest.json, or an open `Index`).

    encoder: a batch of texts in, one unit row per text out; default: the index's own embedder with its
    query prompt, loaded on the first semantic call. cache_dir: where the part caches live (default
    `<index>/tools_cache`). The other arguments are the `tools.*` settings of pipelines.serve
    (docs/configuration.md).
    """

    def __init__(self, index: str | Path | Index, *, encoder: Encoder | None = None, cache_dir: str | Path | None = None,
                 accelerate: bool = True, nprobe: int | None = None, rerank: int | None = None, duckdb_threads: int | None = None,
                 batch_window_s: float = 0.001, max_active: int | None = None, encoder_threads: int | None = None,
                 resident_vectors: bool | None = None, probe_slices: int | None = None):
        if encoder_threads is not None and int(encoder_threads) < 1:
            raise ValueError(f"encoder_threads must be at least 1, got {encoder_threads}")
        self.encoder_threads = None if encoder_threads is None else int(encoder_threads)
        self.index = index if isinstance(index, Index) else open_index(index)
        self.store = ChunkStore(self.index, cache_dir=cache_dir)
        self.accelerate = accelerate
        self._encoder = encoder
        cores = usable_cores()
        self._batcher = BatchingEncoder(self._encode_batch, window_s=batch_window_s, workers=cores)
        self.max_active = max(1, int(max_active or 2 * cores))
        self.admit(self.max_active)
        self.vectors = VectorSearch(self.index, nprobe=nprobe, rerank=rerank, resident_vectors=resident_vectors, probe_slices=probe_slices)
        self._lock = threading.RLock()  # one-time loads only (the encoder)
        self._duckdb_threads = duckdb_threads
        self._con: Any = None
        self._cursors = threading.local()

    def admit(self, slots: int) -> None:
        """No more calls at once than `max_active`, whatever a server asks for."""
        super().admit(min(slots, self.max_active))

    def call(self, tool: str, arguments: Any, *, tracker: ReadTracker | None = None, full_text: bool = False, result_format: ResultFormat | None = None) -> ToolResult:
        spec = TOOLS.get(tool) if isinstance(tool, str) else None
        if spec is None:
            return error_result(str(tool)[:100], f"unknown tool; available tools: {', '.join(TOOLS)}", UNKNOWN_TOOL)
        return spec.call(self, arguments, ToolOptions(full_text=full_text, tracker=tracker, result_format=result_format or ResultFormat()))

    def sql(self, query: str, params: list[Any] | None = None) -> list[tuple]:
        """Ad-hoc DuckDB query with bound parameters over the view `chunks` (the chunk Parquet files)."""
        cur = getattr(self._cursors, "cursor", None)
        if cur is None:
            cur = self._cursors.cursor = self._connection().cursor()
        return cur.execute(query, params or []).fetchall()

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
        vec = self._batcher.encode(query)
        if vec.ndim != 1 or vec.shape[0] != self.index.dimension:
            raise ValueError(f"query encoder returned shape {vec.shape}, expected ({self.index.dimension},)")
        return np.ascontiguousarray(vec[None, :], dtype=np.float32)

    def _encode_batch(self, queries: list[str]) -> np.ndarray:
        if self._encoder is None:
            with self._lock:
                if self._encoder is None:
                    from arag.index.embedding import SentenceEmbedder, on_this_machine

                    log.info("loading the query encoder %s", self.index.embedder_spec.name)
                    spec = on_this_machine(self.index.embedder_spec)
                    if self.encoder_threads is not None:
                        spec = dataclasses.replace(spec, threads=self.encoder_threads)
                    self._encoder = SentenceEmbedder(spec).encode_queries
        return self._encoder(queries)

    @property
    def chunk_ids(self) -> ChunkIdFormat:
        """The form of this index's chunk ids and a real one, which the texts the model reads name."""
        return self.index.chunk_ids

    def close(self) -> None:
        super().close()
        with self._lock:
            if self._con is not None:
                self._con.close()
                self._con = None
        self.vectors.close()

    def __repr__(self) -> str:
        return f"ToolContext({self.index!r}, accelerate={self.accelerate})"
