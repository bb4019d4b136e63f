"""An optional trigram index over the lowered chunk texts: a candidate filter for keyword search.

Why: the keyword score needs every chunk that contains a keyword. Scanning all text costs time
proportional to the corpus (about a second per query at 1M chunks even in DuckDB). If a chunk's
lowered text contains the lowered keyword, it contains every 3-character substring of it, so the
chunks listed under *all* of the keyword's trigrams are a superset of the matches. Keyword search
then scores only those candidates, exactly, in DuckDB: results are identical with or without this
index; it only decides which rows are looked at.

Trigrams (of Unicode code points) are hashed into 2**bits buckets; a collision only adds false
candidates, never loses one. On disk: `trigram_offsets.npy` (int64, buckets+1) and
`trigram_postings.npy` (uint32 chunk ordinals, sorted within each bucket), both memory-mapped.
Keywords shorter than 3 characters (after lowering) have no trigram: the caller scans instead.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

import numpy as np

_LOCAL_BITS = 10  # chunk number within a small build batch: keys stay 32-bit (cheap to sort)
SMALL_BATCH = 1 << _LOCAL_BITS
MAX_BITS = 32 - _LOCAL_BITS


def choose_bits(total_chars: int) -> int:
    """Enough buckets that distinct trigrams rarely share one, without a huge offsets array."""
    return int(min(MAX_BITS, max(12, np.ceil(np.log2(max(total_chars, 1) / 8 + 1)))))


def trigram_buckets(codepoints: np.ndarray, bits: int) -> np.ndarray:
    """Bucket (uint32 < 2**bits) of the trigram starting at each position i (for i < n-2)."""
    c = codepoints.astype(np.uint32, copy=False)
    h = (c[:-2] * np.uint32(0x9E3779B1)) ^ (c[1:-1] * np.uint32(0x85EBCA77)) ^ (c[2:] * np.uint32(0xC2B2AE3D))
    h ^= h >> np.uint32(15)
    h *= np.uint32(0x2C1B3C6D)
    h ^= h >> np.uint32(13)
    return h >> np.uint32(32 - bits)


def _codepoints(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)


def _batch_pairs(texts: list[str], bits: int) -> np.ndarray:
    """Sorted unique (bucket << LOCAL_BITS | local chunk) keys of at most SMALL_BATCH texts."""
    lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
    # One separator between texts; trigrams touching it cross a chunk boundary and are dropped.
    cps = _codepoints("\x00".join(texts))
    if len(cps) < 3:
        return np.zeros(0, dtype=np.uint32)
    seg = np.repeat(np.arange(len(texts), dtype=np.uint32), lengths + 1)[: len(cps)]
    is_sep = np.zeros(len(cps), dtype=bool)
    ends = np.cumsum(lengths + 1) - 1
    is_sep[ends[ends < len(cps)]] = True
    valid = (seg[:-2] == seg[2:]) & ~is_sep[2:]
    keys = (trigram_buckets(cps, bits)[valid] << np.uint32(_LOCAL_BITS)) | seg[:-2][valid]
    keys.sort()
    if len(keys):
        keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))]
    return keys


def build_trigram_index(texts: Iterable[list[str]], out_dir: Path, bits: int) -> int:
    """Write the index for chunk texts given as consecutive batches (ordinals 0, 1, 2, …).

    Two passes keep memory at one batch plus the output memory map: pass 1 extracts each small
    batch's sorted (bucket, chunk) pairs into spill files and counts postings per bucket; pass 2
    scatters every small batch into its buckets' next free slots, so each bucket's postings come
    out in chunk order. Returns the number of postings.
    """
    if bits > MAX_BITS:
        raise ValueError(f"at most {MAX_BITS} bits")
    nb = 1 << bits
    counts = np.zeros(nb, dtype=np.int64)
    spills: list[Path] = []
    base = 0
    pending_b: list[np.ndarray] = []
    pending_o: list[np.ndarray] = []

    def spill() -> None:
        path = out_dir / f".trigram-spill-{len(spills):06d}.npz"
        sizes = np.array([len(b) for b in pending_b], dtype=np.int64)
        np.savez(path, buckets=np.concatenate(pending_b), ords=np.concatenate(pending_o), sizes=sizes)
        spills.append(path)
        pending_b.clear()
        pending_o.clear()

    for batch in texts:
        for start in range(0, len(batch), SMALL_BATCH):
            part = batch[start : start + SMALL_BATCH]
            keys = _batch_pairs(part, bits)
            buckets = keys >> np.uint32(_LOCAL_BITS)
            ords = (keys & np.uint32(SMALL_BATCH - 1)).astype(np.uint32) + np.uint32(base)
            pending_b.append(buckets)
            pending_o.append(ords)
            base += len(part)
            if sum(len(b) for b in pending_b) > 1 << 25:
                spill()
    if pending_b:
        spill()
    for path in spills:  # counts per bucket, one spill file at a time
        with np.load(path) as data:
            counts += np.bincount(data["buckets"], minlength=nb)
    offsets = np.zeros(nb + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    total = int(offsets[-1])
    postings = np.lib.format.open_memmap(out_dir / "trigram_postings.npy", mode="w+", dtype=np.uint32, shape=(max(total, 1),))
    cursor = offsets[:-1].copy()
    for path in spills:
        with np.load(path) as data:
            all_b, all_o, sizes = data["buckets"], data["ords"], data["sizes"]
        pos = 0
        for n in sizes.tolist():
            b, o = all_b[pos : pos + n].astype(np.int64), all_o[pos : pos + n]
            pos += n
            if not n:
                continue
            # b is sorted: each bucket's entries are contiguous and in chunk order.
            starts = np.flatnonzero(np.concatenate(([True], b[1:] != b[:-1])))
            run_len = np.diff(np.append(starts, n))
            rank = np.arange(n, dtype=np.int64) - np.repeat(starts, run_len)
            postings[cursor[b] + rank] = o
            cursor[b[starts]] += run_len
        os.unlink(path)
    postings.flush()
    del postings
    np.save(out_dir / "trigram_offsets.npy", offsets)
    return total


class TrigramIndex:
    def __init__(self, directory: Path, bits: int):
        self.bits = bits
        self.offsets = np.load(directory / "trigram_offsets.npy", mmap_mode="r")
        self.postings = np.load(directory / "trigram_postings.npy", mmap_mode="r")

    def candidates(self, lowered_keyword: str, enough: int = 64) -> np.ndarray | None:
        """Sorted chunk ordinals that may contain `lowered_keyword`; None if it has no trigram.

        Intersects posting lists from the shortest up, and stops once at most `enough` candidates
        remain: checking a few extra rows exactly is cheaper than more intersections.
        """
        cps = _codepoints(lowered_keyword)
        if len(cps) < 3:
            return None
        buckets = np.unique(trigram_buckets(cps, self.bits).astype(np.int64))
        starts, ends = self.offsets[buckets], self.offsets[buckets + 1]
        order = np.argsort(ends - starts, kind="stable")
        cand = np.array(self.postings[starts[order[0]] : ends[order[0]]])
        for j in order[1:]:
            if len(cand) <= enough:
                break
            other = self.postings[starts[j] : ends[j]]
            if len(other) == 0:
                return np.zeros(0, dtype=np.uint32)
            idx = np.searchsorted(other, cand)
            idx[idx >= len(other)] = len(other) - 1
            cand = cand[other[idx] == cand]
        return cand
