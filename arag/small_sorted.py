"""Sorted look-ups and orderings of a few values that keep the GIL (results equal numpy's).

numpy's releases the GIL however few values they touch, and on two threads each release hands it
over: chunk_read ran slower on two threads than on one (`benchmarks/tools_concurrency.py --per-tool`;
`benchmarks/small_sorted.py` compares). Up to SMALL values these run in Python.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from pathlib import Path

import numpy as np

SMALL = 64


def mapped(path: Path) -> np.ndarray:
    """A .npy file memory-mapped as a plain ndarray view (a `np.memmap` runs Python on every index)."""
    return np.asarray(np.load(path, mmap_mode="r"))


def positions(sorted_values: np.ndarray, values: np.ndarray | list[int], side: str = "left") -> np.ndarray:
    """`np.searchsorted(sorted_values, values, side=side)` for 1-D `values`."""
    v = np.asarray(values)
    if v.ndim != 1 or len(v) > SMALL:
        return np.searchsorted(sorted_values, v, side=side)
    find, seq = bisect_right if side == "right" else bisect_left, _probe_view(sorted_values)
    return np.fromiter((find(seq, x) for x in v.tolist()), dtype=np.intp, count=len(v))


def position(sorted_values: np.ndarray, value: int, side: str = "left") -> int:
    """`int(np.searchsorted(sorted_values, value, side=side))`."""
    return (bisect_right if side == "right" else bisect_left)(_probe_view(sorted_values), int(value))


def _probe_view(a: np.ndarray) -> np.ndarray | memoryview:
    """A memoryview where it can be one: about 3x cheaper per bisect probe than numpy scalars."""
    a = np.asarray(a)
    return memoryview(a) if a.ndim == 1 and a.flags.c_contiguous else a


def unique(values: np.ndarray) -> np.ndarray:
    """`np.unique(values)` of 1-D `values`."""
    if len(values) > SMALL:
        return np.unique(values)
    v = np.asarray(values)
    return np.asarray(sorted(set(v.tolist())), dtype=v.dtype)


def distinct(values: np.ndarray) -> list[int]:
    """`np.unique(values).tolist()` of 1-D integer `values`."""
    return unique(values).tolist()


def best_first(scores: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """`np.lexsort((ids, -scores))`: positions by score descending, then smaller id."""
    if len(scores) > SMALL:
        return np.lexsort((ids, -scores))
    s, i = np.asarray(scores).tolist(), np.asarray(ids).tolist()
    return np.asarray(sorted(range(len(s)), key=lambda j: (-s[j], i[j])), dtype=np.intp)


def members(sorted_values: np.ndarray, values: np.ndarray) -> np.ndarray:
    """`np.isin(values, sorted_values)` for ascending `sorted_values` (1-D `values`)."""
    if len(sorted_values) == 0:
        return np.zeros(len(values), dtype=bool)
    at = np.minimum(positions(sorted_values, values), len(sorted_values) - 1)
    return sorted_values[at] == values
