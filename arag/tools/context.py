"""`ToolContext`: one open index shared by every tool (DuckDB connection, FAISS shards, embedder).

Open it once per process (per evaluation worker) and call tools through it; it is cheap to keep
and safe to share between threads (calls that touch DuckDB or FAISS take a lock).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any, Callable

import duckdb
import numpy as np

from arag.index.store import Index, open_index
from arag.tools.base import ToolOptions, ToolResult, error_result
from arag.tools.store import ChunkStore
from arag.tools.tracker import ReadTracker
from arag.tools.vector_search import VectorSearch

log = logging.getLogger(__name__)

# Encodes queries into unit float32 vectors of the index's dimension, shape (n, d).
Encoder = Callable[[list[str]], np.ndarray]


class ToolContext:
    """The retrieval layer over one index.

    index: an index directory (must hold manifest.json) or an open `Index`.
    encoder: query encoder; default: the index's own embedder (`SentenceEmbedder(index.embedder_spec)
        .encode_queries`, with the model's query prompt), loaded on the first semantic call.
    cache_dir: where the tools cache lives (default `<index>/tools_cache`, see arag.tools.store).
    accelerate: build/use the trigram candidate index for keyword search (same results, faster).
    nprobe, rerank: query-time knobs of vector search on an ANN index: lists probed, and exact
        re-rank candidates per result (see arag.tools.vector_search; defaults from the benchmark).
    """

    def __init__(
        self,
        index: str | Path | Index,
        *,
        encoder: Encoder | None = None,
        cache_dir: str | Path | None = None,
        accelerate: bool = True,
        nprobe: int | None = None,
        rerank: int | None = None,
        duckdb_threads: int | None = None,
    ):
        self.index = index if isinstance(index, Index) else open_index(index)
        self.store = ChunkStore.open(self.index, cache_dir=cache_dir, trigrams=accelerate)
        self.accelerate = accelerate and self.store.trigrams is not None
        self.nprobe = nprobe
        self._encoder = encoder
        self.vectors = VectorSearch(self.index, nprobe=nprobe, rerank=rerank)
        self._lock = threading.RLock()
        self.con = duckdb.connect(":memory:")
        if duckdb_threads:
            self.con.execute(f"SET threads = {int(duckdb_threads)}")
        # The Arrow table is memory-mapped; DuckDB scans it in place (no copy into DuckDB).
        self.con.register("chunks", self.store.chunks)

    # ---- tools ------------------------------------------------------------------------------
    def call(self, tool: str, arguments: Any, *, tracker: ReadTracker | None = None, full_text: bool = False) -> ToolResult:
        """Run tool `tool` with JSON-able `arguments` (a dict or a JSON string). Never raises."""
        from arag.tools import TOOLS

        spec = TOOLS.get(tool) if isinstance(tool, str) else None
        if spec is None:
            return error_result(str(tool)[:100], f"unknown tool; available tools: {', '.join(TOOLS)}")
        return spec.call(self, arguments, ToolOptions(full_text=full_text, tracker=tracker))

    # ---- shared resources -----------------------------------------------------------------------
    def sql(self, query: str, params: list[Any] | None = None, tables: dict[str, Any] | None = None) -> list[tuple]:
        """Run a query with bound parameters; `tables` are Arrow tables visible for this query only."""
        with self._lock:
            for name, table in (tables or {}).items():
                self.con.register(name, table)
            try:
                return self.con.execute(query, params or []).fetchall()
            finally:
                for name in tables or {}:
                    self.con.unregister(name)

    def encode_query(self, query: str) -> np.ndarray:
        with self._lock:
            if self._encoder is None:
                from arag.index.embedding import SentenceEmbedder

                log.info("loading the query encoder %s", self.index.embedder_spec.name)
                self._encoder = SentenceEmbedder(self.index.embedder_spec).encode_queries
            vec = np.asarray(self._encoder([query]), dtype=np.float32)
        if vec.ndim != 2 or vec.shape[0] != 1 or vec.shape[1] != self.index.dimension:
            raise ValueError(f"query encoder returned shape {vec.shape}, expected (1, {self.index.dimension})")
        return np.ascontiguousarray(vec)

    def search_sentences(self, qvec: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Top `n` sentences over all shards: (scores desc, sentence ids); ties by smaller id."""
        return self.vectors.search(qvec, n)

    def close(self) -> None:
        with self._lock:
            self.con.close()
        self.vectors.close()

    def __enter__(self) -> "ToolContext":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ToolContext({self.index!r}, accelerate={self.accelerate})"
