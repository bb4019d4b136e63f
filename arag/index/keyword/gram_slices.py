"""Hashed 6-gram slices: a second keyword filter for text whose trigrams cannot narrow.

Why: trigram candidates (arag.index.keyword.ngrams) narrow well on natural prose, where a name's rarest
trigram is in ~1% of the chunks. On text over a small alphabet (made-up words from 30 syllables,
DNA, some codes) every trigram is in a large share of the chunks, so a keyword's trigrams together
still leave thousands of candidates per part for a few hundred matches. Six code points are far
more specific, but an exact 6-gram index would cost more than the text itself.

So each 6-gram of a chunk (six code points within the chunk, any characters) is hashed to one of
SLICES buckets, and each bucket keeps a roaring bitmap of the chunks holding any 6-gram of it
(a bit-sliced signature, as in BitFunnel). A chunk containing a keyword holds every 6-gram of the
keyword, so it is in all their buckets: intersecting those bitmaps keeps a superset of the matches,
whatever the collisions (they only add candidates). The size is bounded by SLICES bits per chunk
(4,096: 512 bytes a chunk at most, ~0.4x the text on made-up words), which is why a part gets the
slices only when its trigrams are weak (`trigrams_are_weak`: words sampled from the part's own
text, looked up as keywords, mostly find candidates that do not contain them).
`python -m benchmarks.keyword_search --text pseudo` measures it.

On disk, per part: `gram6_offsets.npy` (int64, SLICES + 1) and `gram6_slices.bin` (the bitmaps in
roaring's portable format, back to back), memory-mapped.
"""

from __future__ import annotations

import mmap
import re
from pathlib import Path

import numpy as np
from pyroaring import BitMap

from arag.small_sorted import mapped, unique
from arag.index.keyword.ngrams import keyword_trigrams

GRAM = 6
SLICE_BITS = 12
SLICES = 1 << SLICE_BITS
WEAK_PRECISION = 0.2
SAMPLE_ROWS = 4096  # chunks of a part whose words test its trigrams
SAMPLE_WORDS = 256
_WORD = re.compile(r"\w{6,}")
_MIX = np.uint64(0x9E3779B97F4A7C15)  # odd 64-bit multiplier (Fibonacci hashing)
EXTRACT_ROWS = 2048


def _buckets(cps: np.ndarray) -> np.ndarray:
    """The bucket of each GRAM-code-point window of `cps` (uint64 code points), len(cps) - GRAM + 1 of them."""
    n = len(cps) - GRAM + 1
    h = np.zeros(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(GRAM):
            h = (h ^ cps[j : j + n]) * _MIX
    return (h >> np.uint64(64 - SLICE_BITS)).astype(np.int64)


def keyword_buckets(lowered_keyword: str) -> np.ndarray | None:
    """Distinct buckets of a lowered keyword's 6-grams; None if it is shorter than GRAM code points."""
    if len(lowered_keyword) < GRAM:
        return None
    cps = np.frombuffer(lowered_keyword.encode("utf-32-le", "surrogatepass"), dtype=np.uint32).astype(np.uint64)
    return unique(_buckets(cps))


class GramSlicesWriter:
    """Collects (bucket, row) pairs batch by batch; memory is the bitmaps (SLICES bits a row at most)."""

    def __init__(self) -> None:
        self.bitmaps = [BitMap() for _ in range(SLICES)]

    def add(self, lowered_texts: list[str], first_row: int) -> None:
        for start in range(0, len(lowered_texts), EXTRACT_ROWS):
            self._add(lowered_texts[start : start + EXTRACT_ROWS], first_row + start)

    def _add(self, texts: list[str], first_row: int) -> None:
        # One NUL between texts; a window holding a NUL would cross a chunk boundary and is dropped.
        joined = "\x00".join(texts)
        cps = np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), dtype=np.uint32).astype(np.uint64)
        if len(cps) < GRAM:
            return
        lengths = np.fromiter((len(t) + 1 for t in texts), dtype=np.int64, count=len(texts))
        rows = np.repeat(np.arange(len(texts), dtype=np.int64), lengths)[: len(cps) - GRAM + 1]
        nuls = np.concatenate(([0], np.cumsum(cps == 0)))
        keep = nuls[GRAM:] == nuls[: len(cps) - GRAM + 1]
        if not keep.any():
            return
        pairs = np.unique((_buckets(cps)[keep] << 32) | rows[keep])
        buckets, local = pairs >> 32, (pairs & 0xFFFFFFFF) + first_row
        starts = np.flatnonzero(np.concatenate(([True], buckets[1:] != buckets[:-1])))
        ends = np.append(starts[1:], len(pairs))
        for b, lo, hi in zip(buckets[starts].tolist(), starts.tolist(), ends.tolist()):
            self.bitmaps[b].update(local[lo:hi].tolist())

    def write(self, directory: Path) -> int:
        """Write the two files; return their size in bytes."""
        offsets = np.zeros(SLICES + 1, dtype=np.int64)
        with open(directory / "gram6_slices.bin", "wb") as f:
            for i, bm in enumerate(self.bitmaps):
                bm.run_optimize()
                blob = bm.serialize()
                f.write(blob)
                offsets[i + 1] = offsets[i] + len(blob)
        np.save(directory / "gram6_offsets.npy", offsets)
        return int(offsets[-1]) + offsets.nbytes


class GramSlices:
    """Read side: the memory-mapped slices of one part."""

    def __init__(self, directory: Path):
        self.offsets = mapped(directory / "gram6_offsets.npy")
        with open(directory / "gram6_slices.bin", "rb") as f:
            self._blob = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)

    def candidates(self, buckets: np.ndarray, within: BitMap | None) -> BitMap:
        """Rows in every bucket of `buckets` (and in `within`, if given; None: every row)."""
        cand = within
        for b in buckets.tolist():
            bm = BitMap.deserialize(self._blob[int(self.offsets[b]) : int(self.offsets[b + 1])])
            cand = bm if cand is None else cand & bm
            if not cand:
                break
        return cand if cand is not None else BitMap()


def trigrams_are_weak(bitmaps: dict[int, BitMap], sample_rows: list[int], sample_texts: list[str], seed: int = 0) -> bool:
    """Whether trigram candidates fail to narrow this part: words of six or more word characters
    drawn from a sample of its (lowered) chunk texts are looked up as keywords would be, and the
    share of their trigram candidates (within the sample) that truly contain them is measured.
    Weak when a quarter of the words get under WEAK_PRECISION (measured on 4,096-row samples:
    wiki prose 0.50, made-up words 0.05)."""
    rng = np.random.default_rng(seed)
    sample = BitMap(sample_rows)
    words = [w for t in sample_texts for w in _WORD.findall(t)]
    if not words:
        return False
    precisions = []
    for w in (words[i] for i in rng.integers(0, len(words), size=min(SAMPLE_WORDS, len(words)))):
        codes = keyword_trigrams(w)
        if codes is None:
            continue
        found = sample
        for c in codes.tolist():
            found = found & bitmaps.get(c, BitMap())
        matches = sum(w in t for t in sample_texts)
        if len(found):
            precisions.append(matches / len(found))
    return bool(precisions) and float(np.percentile(precisions, 25)) < WEAK_PRECISION
