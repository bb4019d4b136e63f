"""FAISS shard files: one index per part, ids = sentence ids, inner product on unit vectors."""

from __future__ import annotations

from pathlib import Path

import faiss
import numpy as np

from arag.index.layout import atomic_path


def build_shard(vectors: np.ndarray, ids: np.ndarray, factory: str = "Flat") -> faiss.Index:
    """The exact shard of one part. ANN indexes are built over all shards (arag.index.ann)."""
    if factory != "Flat":
        raise ValueError(f"shards are exact (Flat), not {factory!r}: the ANN over all shards is index.ann")
    index = faiss.IndexIDMap2(faiss.IndexFlatIP(vectors.shape[1]))
    index.add_with_ids(vectors, ids.astype(np.int64))
    return index


def write_shard(index: faiss.Index, target: Path) -> None:
    with atomic_path(target) as tmp:
        faiss.write_index(index, str(tmp))


def read_shard(path: Path, mmap: bool = False) -> faiss.Index:
    flags = faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY if mmap else 0
    return faiss.read_index(str(path), flags)


def shard_contents(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """The sentence ids and vectors an exact (Flat) shard holds, in the shard's order."""
    shard = read_shard(path)
    return faiss.vector_to_array(shard.id_map).astype(np.int64), faiss.downcast_index(shard.index).reconstruct_n(0, shard.ntotal)


def stored_vectors(paths: list[Path], ids: list[int]) -> np.ndarray:
    """The vectors of sentence `ids`, in that order, gathered from the exact shards at `paths`."""
    where = {int(sid): i for i, sid in enumerate(ids)}
    out: np.ndarray | None = None
    for path in paths:
        shard_ids, vectors = shard_contents(path)
        if out is None:
            out = np.zeros((len(ids), vectors.shape[1]), dtype=np.float32)
        keep = [k for k, sid in enumerate(shard_ids) if int(sid) in where]
        out[[where[int(shard_ids[k])] for k in keep]] = vectors[keep]
    if out is None:
        raise ValueError("no vector shards given")
    return out


def inner_products(vectors: np.ndarray, query: np.ndarray) -> np.ndarray:
    """`vectors @ query` on the calling thread only, with the GIL released (FAISS's SIMD kernel).

    Not numpy's BLAS: its sgemv splits one product across every core and spins its threads, so
    concurrent searches fight over the cores (on 2 busy cores ~49 ms against ~7 ms single-threaded)."""
    query = np.ascontiguousarray(query, dtype=np.float32)
    if not vectors.flags.c_contiguous or vectors.dtype != np.float32 or vectors.shape[1:] != query.shape:
        raise ValueError(f"inner_products: vectors {vectors.dtype}{vectors.shape} and query {query.dtype}{query.shape} do not fit")
    out = np.empty(len(vectors), dtype=np.float32)
    if len(vectors):
        faiss.fvec_inner_products_ny(faiss.swig_ptr(out), faiss.swig_ptr(query), faiss.swig_ptr(vectors), vectors.shape[1], len(vectors))
    return out
