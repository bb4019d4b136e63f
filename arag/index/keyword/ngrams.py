"""Trigram posting lists over Python-lowered chunk text, as compressed bitmaps: keyword candidates.

Why: the keyword score needs every chunk that contains a keyword. If a chunk's lowered text
contains the lowered keyword, it contains every 3-code-point substring of it, so the chunks listed
under *all* the keyword's trigrams are a superset of the matches. Keyword search scores only those
candidates, exactly; results are identical with or without this index.

Only *word* trigrams are indexed: three letters, marks or digits (Unicode categories L*, M*, N*).
Trigrams holding a space or punctuation (" th", "e b", ", t") carry little about which word is
meant, yet they are frequent and took 43% of the postings' bytes on wiki text; a keyword still
narrows by its word trigrams ("michelle bachelet" by "mic" … "let"), and one with none at all
("U.S.", "a b") is scored on every chunk. Both sides use the same rule, so candidates stay a
superset; the cache records the Unicode version the rule was computed with.

Trigrams are kept exactly (three code points packed into one uint64, no hashing, so no false
candidates from collisions). Each trigram's chunk rows are a roaring bitmap (pyroaring), which
stores sparse lists as sorted 16-bit arrays and dense ones as plain bitmaps: about 0.56 bytes per
byte of wiki text. tantivy's n-gram tokenizer was measured too (0.43 bytes per byte, faster to
build), but it answers with scored documents rather than row sets, so every candidate would cross
into Python as an object and need a stored-field lookup for its row; bitmaps intersect in C and
hand back row numbers.

On disk, per part (see arag.index.keyword.part_cache): `trigram_keys.npy` (sorted uint64 codes),
`trigram_offsets.npy` (int64, len(keys)+1) and `trigram_postings.bin` (the bitmaps in roaring's
portable format, back to back); all three are memory-mapped.

Dense trigrams keep their key but no bitmap (an empty byte range): they mean "every chunk may
match". The most frequent trigrams ("the", "ion", "and" in English) have the biggest bitmaps (one
bit per chunk) and are the least useful: intersecting with a list that holds most rows removes few
candidates. Two rules make a trigram dense: it is in at least `DENSE_FRACTION` of a part's
chunks, or the postings would exceed `POSTINGS_BUDGET` bytes per byte of the part's text, in which
case the most frequent trigrams give up their bitmaps first until the rest fit. A budget rather
than a fixed frequency adapts to the text: wiki prose has thousands of mid-frequency trigrams whose
bitmaps would double the cache, while text over a small alphabet (few, all common, trigrams) keeps
every bitmap and needs each one to narrow. Candidates stay a superset, so results are exact.
Where even all of them cannot narrow, the part also gets hashed 6-gram slices (arag.index.keyword.gram_slices).
"""

from __future__ import annotations

import mmap
import unicodedata
from pathlib import Path

import numpy as np
from pyroaring import BitMap

from arag.small_sorted import mapped, positions, unique

_BITS = 21  # every Unicode code point fits in 21 bits: three make one uint64 code
# Rows per extraction step: bounds the temporary arrays (a few million positions).
EXTRACT_ROWS = 2048
# A trigram in at least this fraction of a part's units gets no bitmap ("every unit"), in parts
# of at least DENSE_MIN_UNITS units (below that, bitmaps are small anyway). 1.0: only trigrams in
# every unit, which cannot narrow at all. Lower cuts save disk but cost speed (measured when every
# trigram was indexed, cache format 4): at 0.5, 1M wiki
# chunks took 1.60x the text on disk and 49x the reference scan in place (28x with pread), and on
# made-up words, where nearly every trigram is in over half the chunks, 2-5x
# (benchmarks/keyword_search.py).
DENSE_FRACTION = 1.0
DENSE_MIN_UNITS = 4096
# Bytes of serialised bitmaps per byte of a part's (UTF-8) text at most, in parts of at least
# DENSE_MIN_UNITS units; None: no cap. Off by default because the cap costs speed where it
# matters (measured with cache format 4): at 1M wiki chunks a cap of 0.33 brings the cache from ~1.6x to 1.46x the text but
# keyword p50 from ~100x to 27x the reference scan (keywords made only of common trigrams then
# score every chunk; benchmarks/keyword_search.py). Pass `budget=` to PostingsWriter to trade.
POSTINGS_BUDGET: float | None = None


UNICODE_VERSION = unicodedata.unidata_version  # the word rule's source (kept in each cache's metadata)
_word_table: np.ndarray | None = None


def is_word_char(ch: str) -> bool:
    """A letter, mark or digit: the characters of an indexed trigram."""
    return unicodedata.category(ch)[0] in "LMN"


def _word_mask(cps: np.ndarray) -> np.ndarray:
    """is_word_char of each code point (a table of every code point, built once per process: ~0.3 s)."""
    global _word_table
    if _word_table is None:
        _word_table = np.fromiter((is_word_char(chr(c)) for c in range(0x110000)), dtype=bool, count=0x110000)
    return _word_table[cps]


def _codepoints(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32).astype(np.uint64)


def _codes(cps: np.ndarray) -> np.ndarray:
    return (cps[:-2] << np.uint64(2 * _BITS)) | (cps[1:-1] << np.uint64(_BITS)) | cps[2:]


def keyword_trigrams(lowered_keyword: str) -> np.ndarray | None:
    """Distinct word-trigram codes of a lowered keyword; None if it has none (then every chunk is a candidate)."""
    cps = _codepoints(lowered_keyword)
    if len(cps) < 3:
        return None
    word = np.fromiter((is_word_char(c) for c in lowered_keyword), dtype=bool, count=len(lowered_keyword))
    keep = word[:-2] & word[1:-1] & word[2:]
    if not keep.any():
        return None
    return unique(_codes(cps)[keep])


class PostingsWriter:
    """Collects (trigram, unit) pairs batch by batch; memory is the bitmaps (~0.5× the text).

    A posting names a unit of `unit_rows` consecutive rows (chunk r is in unit r // unit_rows).
    Units of several chunks make the lists smaller (32 chunks: ~3x, measured on 20k wiki-sentence
    chunks) but far less selective: a multi-word keyword of common words finds all its trigrams in
    almost every 32-chunk unit, which made p50 4x slower there; the cache uses units of 1."""

    def __init__(
        self, unit_rows: int = 1, dense_fraction: float | None = None, dense_min_units: int | None = None, budget: float | None = None
    ) -> None:
        self.bitmaps: dict[int, BitMap] = {}
        self.unit_rows = unit_rows
        self.dense_fraction = DENSE_FRACTION if dense_fraction is None else dense_fraction
        self.dense_min_units = DENSE_MIN_UNITS if dense_min_units is None else dense_min_units
        self.budget = POSTINGS_BUDGET if budget is None else budget  # None: no cap
        self.rows = 0  # rows seen (one past the last row added)
        self.text_bytes = 0  # UTF-8 bytes of the texts added (the budget's base)
        self.dense = 0  # trigrams written without a bitmap (set by write)
        self.bytes = 0  # bytes of bitmaps written (set by write)

    def add(self, lowered_texts: list[str], first_row: int, text_bytes: int | None = None) -> None:
        """Add rows `first_row`, … ; `text_bytes`: their UTF-8 size, if known (else measured)."""
        self.rows = max(self.rows, first_row + len(lowered_texts))
        self.text_bytes += sum(len(t.encode("utf-8", "surrogatepass")) for t in lowered_texts) if text_bytes is None else text_bytes
        step = EXTRACT_ROWS - EXTRACT_ROWS % self.unit_rows or self.unit_rows
        for start in range(0, len(lowered_texts), step):
            self._add(lowered_texts[start : start + step], first_row + start)

    def _add(self, texts: list[str], first_row: int) -> None:
        # One NUL (not a word character) between texts: no indexed trigram crosses a chunk boundary.
        cps = _codepoints("\x00".join(texts))
        if len(cps) < 3:
            return
        lengths = np.fromiter((len(t) + 1 for t in texts), dtype=np.int64, count=len(texts))
        local = np.repeat(np.arange(len(texts), dtype=np.uint64), lengths)[: len(cps)]
        codes = _codes(cps)
        word = _word_mask(cps)
        keep = word[:-2] & word[1:-1] & word[2:]
        if not keep.any():
            return
        unique_codes, code_ids = np.unique(codes[keep], return_inverse=True)
        # (code id, row) pairs, once each, sorted by code then row.
        pairs = np.unique((code_ids.astype(np.uint64) << np.uint64(32)) | local[:-2][keep])
        ids, rows = pairs >> np.uint64(32), (pairs & np.uint64(0xFFFFFFFF)).astype(np.uint32) + np.uint32(first_row)
        if self.unit_rows > 1:  # rows to units; pairs that became equal are merged by the bitmaps
            rows = rows // np.uint32(self.unit_rows)
        starts = np.flatnonzero(np.concatenate(([True], ids[1:] != ids[:-1])))
        ends = np.append(starts[1:], len(ids))
        bitmaps = self.bitmaps
        for code, a, b in zip(unique_codes[ids[starts]].tolist(), starts.tolist(), ends.tolist()):
            bm = bitmaps.get(code)
            if bm is None:
                bitmaps[code] = BitMap(rows[a:b].tolist())
            else:
                bm.update(rows[a:b].tolist())

    def dense_codes(self) -> set[int]:
        """The trigrams to write without a bitmap (see the module's docstring for the two rules)."""
        units = -(-self.rows // self.unit_rows)
        if units < self.dense_min_units:
            return set()
        dense_at = self.dense_fraction * units
        if self.budget is None:  # the frequency rule alone: no sizes to measure (write serialises once)
            return {code for code, bm in self.bitmaps.items() if len(bm) >= dense_at}
        by_count = sorted(self.bitmaps, key=lambda c: len(self.bitmaps[c]), reverse=True)  # most frequent first
        sizes = []
        for code in by_count:
            bm = self.bitmaps[code]
            bm.run_optimize()
            sizes.append(len(bm.serialize()))
        over = sum(sizes) - self.budget * self.text_bytes
        dense = set()
        for code, size in zip(by_count, sizes):
            if len(self.bitmaps[code]) < dense_at and over <= 0:
                break
            dense.add(code)
            over -= size
        return dense

    def write(self, directory: Path) -> int:
        """Write the three files; return the number of (trigram, row) postings kept."""
        keys = np.array(sorted(self.bitmaps), dtype=np.uint64)
        offsets = np.zeros(len(keys) + 1, dtype=np.int64)
        dense = self.dense_codes()
        postings = 0
        with open(directory / "trigram_postings.bin", "wb") as f:
            for i, code in enumerate(keys.tolist()):
                if code in dense:  # no bitmap: "every unit" (an empty byte range)
                    offsets[i + 1] = offsets[i]
                    continue
                bm = self.bitmaps[code]
                bm.run_optimize()
                postings += len(bm)
                blob = bm.serialize()
                f.write(blob)
                offsets[i + 1] = offsets[i] + len(blob)
        self.dense, self.bytes = len(dense), int(offsets[-1])
        np.save(directory / "trigram_keys.npy", keys)
        np.save(directory / "trigram_offsets.npy", offsets)
        return postings


class Postings:
    """Read side: the memory-mapped files of one part."""

    def __init__(self, directory: Path):
        self.keys = mapped(directory / "trigram_keys.npy")
        self.offsets = mapped(directory / "trigram_offsets.npy")
        path = directory / "trigram_postings.bin"
        with open(path, "rb") as f:
            self._blob = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if path.stat().st_size else b""

    def _bitmap(self, i: int) -> BitMap:
        return BitMap.deserialize(self._blob[int(self.offsets[i]) : int(self.offsets[i + 1])])

    def candidates(self, codes: np.ndarray, enough: int = 32) -> BitMap | None:
        """Units holding every trigram of `codes` (a superset of those containing the keyword);
        None: every unit (all the keyword's trigrams are dense).

        Intersects from the smallest bitmap up and stops once at most `enough` rows remain:
        checking a few extra rows exactly is cheaper than more intersections.
        """
        if len(self.keys) == 0:
            return BitMap()
        pos = positions(self.keys, codes)
        if (pos >= len(self.keys)).any() or (self.keys[np.minimum(pos, len(self.keys) - 1)] != codes).any():
            return BitMap()  # a trigram no chunk of this part has
        sizes = (self.offsets[pos + 1] - self.offsets[pos]).tolist()
        # smallest first (a stable sort: ties in code order), in Python: np.argsort releases the GIL (arag.small_sorted)
        order = sorted((j for j in range(len(sizes)) if sizes[j] > 0), key=sizes.__getitem__)  # dense ones: no narrowing
        if not order:
            return None
        cand = self._bitmap(int(pos[order[0]]))
        for j in order[1:]:
            if len(cand) <= enough:
                break
            cand &= self._bitmap(int(pos[j]))
        return cand
