"""Word postings with counts over Python-lowered chunk text: how keyword_search finds and counts matches.

Why words: a keyword's count is a substring count (arag.tools.keyword); trigram postings only gave
candidates to verify on the text, and a common word ('mother') left tens of thousands to read
(over a second at 449k chunks). A keyword without separators is counted from the words alone; one
with separators narrows candidates by its words and adjacent word pairs. The rules: docs/tools.md,
"Tools cache"; the files: docs/indexing.md, "Tools cache files"."""

from __future__ import annotations

import bisect
import itertools
import mmap
import re
import unicodedata
import zlib
from pathlib import Path

import numpy as np

from arag.small_sorted import mapped

SEP = b"\n"
ESCAPE = 15  # a count nibble meaning "16 or more: in words_big.npy"
# Postings of a condition are gathered only while they are at most this many times the candidates
# they are expected to remove: gathering a posting costs ~60-140 ns, reading and counting a chunk's
# text ~10-20 µs for a few kB of wiki text. A prefix like 'a', in nearly every chunk, is not worth it.
UNION_PER_CANDIDATE = 150
ENOUGH = 32  # candidates few enough to count on their text without narrowing further
# A suffix condition matching more words than this (a word ending in "a") is not used: finding
# them (a scan of the words, ~5 µs a match) costs more than it narrows.
SUFFIX_WORDS = 64

BLOCK_WORDS = 128
SIGNATURE_BITS = 2048  # 2 bytes a word; a block's 128 words set ~40% of the bits on wiki text

# Pair buckets per byte of the average chunk's text: the pair bit sets are 0.04x the text. Chunks of
# 2.7 kB of wiki text hold ~410 distinct pair keys: 858 buckets, each set in ~38% of the chunks;
# 'you can no' keeps 8,763 of the 36,866 chunks of 100,000 meeting its word conditions (301 hold it).
PAIR_BITS_PER_TEXT_BYTE = 0.32
PAIR_EDGE = 2  # bytes of each word in a pair's key: a 2-letter last word ("you can no") still fixes one
MIN_PAIR_BUCKETS = 64

UNICODE_VERSION = unicodedata.unidata_version  # what str.isspace() and lower() follow (kept in each cache's metadata)
WORD = re.compile(r'[^\s()\[\]{}",;:!?]+')  # str patterns: \s is str.isspace()


def split_keyword(lowered: str) -> tuple[bool, list[tuple[str, str]]]:
    """(whether the keyword lies inside one word, else its runs as ("whole" | "suffix" | "prefix", run))."""
    runs = [(m.start(), m.end()) for m in WORD.finditer(lowered)]
    if len(runs) == 1 and runs[0] == (0, len(lowered)):
        return True, []
    return False, [("suffix" if a == 0 else "prefix" if b == len(lowered) else "whole", lowered[a:b]) for a, b in runs]


def _pair_hashes(tails: np.ndarray, heads: np.ndarray) -> np.ndarray:
    """The 32-bit key hash of each adjacent pair from its words' edge hashes (zlib.crc32)."""
    x = (tails * np.uint64(0x9E3779B1) + heads * np.uint64(0x85EBCA77)) & np.uint64(0xFFFFFFFF)
    return x ^ (x >> np.uint64(15))


def pair_edges(conditions: list[tuple[str, str]]) -> list[tuple[int, int]]:
    """(left tail hash, right head hash) of each pair of consecutive runs whose key the runs fix:
    the left a whole word or ≥ PAIR_EDGE bytes, the right a whole word or ≥ PAIR_EDGE bytes."""
    out = []
    for (lk, left), (rk, right) in zip(conditions, conditions[1:]):
        lb, rb = left.encode("utf-8", "surrogatepass"), right.encode("utf-8", "surrogatepass")
        if (lk == "whole" or len(lb) >= PAIR_EDGE) and (rk == "whole" or len(rb) >= PAIR_EDGE):
            out.append((zlib.crc32(lb[-PAIR_EDGE:]), zlib.crc32(rb[:PAIR_EDGE])))
    return out


def _index_dtype(largest: int) -> type:
    return np.uint32 if largest < 2**32 else np.uint64


def _hashes(data: np.ndarray) -> np.ndarray:
    """Hash of each 3-byte window of `data` (uint8) into SIGNATURE_BITS."""
    x = data.astype(np.uint32)
    return ((x[:-2] * np.uint32(0x9E37) + x[1:-1] * np.uint32(0x85EB) + x[2:] * np.uint32(0xC2B3)) >> np.uint32(3)) % np.uint32(SIGNATURE_BITS)


def _signatures(blob: np.ndarray, starts: np.ndarray, words: int) -> np.ndarray:
    """Each block's bit set of the hashes of its words' 3-byte windows (none crosses a b"\\n")."""
    blocks = -(-words // BLOCK_WORDS)
    bits = np.zeros((blocks, SIGNATURE_BITS), dtype=bool)
    if len(blob) >= 3 and words:
        sep = blob == SEP[0]
        keep = ~(sep[:-2] | sep[1:-1] | sep[2:])
        at = np.flatnonzero(keep)
        block = (np.searchsorted(starts, at, side="right") - 1) // BLOCK_WORDS
        bits[block, _hashes(blob)[keep]] = True
    return np.packbits(bits, axis=1, bitorder="little")


class WordPostingsWriter:
    """Collects (word, row, count) batch by batch; memory ~16 bytes a posting until written."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}
        self.keys: list[np.ndarray] = []  # word id << 32 | row, unique, per batch
        self.counts: list[np.ndarray] = []
        self.tails: list[int] = []  # edge hashes by word id
        self.heads: list[int] = []
        self.pairs: list[np.ndarray] = []  # row << 32 | pair hash, unique, per batch
        self.text_bytes = 0
        self.rows = 0

    def add(self, lowered_texts: list[str], first_row: int) -> None:
        self.text_bytes += sum(len(t.encode("utf-8", "surrogatepass")) for t in lowered_texts)
        self.rows = max(self.rows, first_row + len(lowered_texts))
        per_row = [WORD.findall(t) for t in lowered_texts]
        lengths = np.fromiter(map(len, per_row), dtype=np.int64, count=len(per_row))
        total = int(lengths.sum())
        if not total:
            return
        vocab = self.vocab
        ids = np.fromiter((vocab.setdefault(w, len(vocab)) for ws in per_row for w in ws), dtype=np.uint64, count=total)
        rows = np.repeat(np.arange(first_row, first_row + len(per_row), dtype=np.uint64), lengths)
        keys, counts = np.unique((ids << np.uint64(32)) | rows, return_counts=True)
        self.keys.append(keys)
        self.counts.append(counts)
        for w in itertools.islice(vocab, len(self.tails), None):  # words new in this batch, in id order
            b = w.encode("utf-8", "surrogatepass")
            self.tails.append(zlib.crc32(b[-PAIR_EDGE:]))
            self.heads.append(zlib.crc32(b[:PAIR_EDGE]))
        same_row = rows[1:] == rows[:-1]
        left, right = ids[:-1][same_row].astype(np.int64), ids[1:][same_row].astype(np.int64)
        tails, heads = np.asarray(self.tails, np.uint64), np.asarray(self.heads, np.uint64)
        self.pairs.append(np.unique((rows[1:][same_row] << np.uint64(32)) | _pair_hashes(tails[left], heads[right])))

    def _pair_bits(self) -> np.ndarray:
        """(buckets, ceil(rows / 8)) bit sets: the chunks holding a pair hashed to each bucket."""
        buckets = max(MIN_PAIR_BUCKETS, int(PAIR_BITS_PER_TEXT_BYTE * self.text_bytes / max(self.rows, 1)))
        bits = np.zeros((buckets, -(-self.rows // 8) * 8), dtype=bool)
        if self.pairs:
            keys = np.concatenate(self.pairs)
            bits[((keys & np.uint64(0xFFFFFFFF)) % np.uint64(buckets)).astype(np.int64), (keys >> np.uint64(32)).astype(np.int64)] = True
        return np.packbits(bits, axis=1, bitorder="little")

    def write(self, directory: Path) -> dict:
        words = sorted(self.vocab)  # code point order = UTF-8 byte order
        rank = np.empty(len(words), dtype=np.uint64)
        rank[np.fromiter((self.vocab[w] for w in words), dtype=np.int64, count=len(words))] = np.arange(len(words), dtype=np.uint64)
        keys = np.concatenate(self.keys) if self.keys else np.zeros(0, np.uint64)
        counts = np.concatenate(self.counts) if self.counts else np.zeros(0, np.int64)
        keys = (rank[(keys >> np.uint64(32)).astype(np.int64)] << np.uint64(32)) | (keys & np.uint64(0xFFFFFFFF))
        order = np.argsort(keys)
        keys, counts = keys[order], counts[order]
        rows = (keys & np.uint64(0xFFFFFFFF)).astype(np.int64)
        n = np.bincount((keys >> np.uint64(32)).astype(np.int64), minlength=len(words))
        offsets = np.concatenate(([0], np.cumsum(n)))
        first = offsets[:-1]
        gaps = np.diff(rows, prepend=0)
        gaps[first[n > 0]] = rows[first[n > 0]]
        widest = np.maximum.reduceat(gaps, first) if len(words) else np.zeros(0, np.int64)
        width = np.where(widest < 2**8, 1, np.where(widest < 2**16, 2, 4))
        row_at = np.concatenate(([0], np.cumsum(n * width)))
        per_posting = np.repeat(width, n)
        pos = np.repeat(row_at[:-1], n) + per_posting * (np.arange(len(rows)) - np.repeat(first, n))
        stream = np.zeros(int(row_at[-1]), dtype=np.uint8)
        for b in range(4):
            m = per_posting > b
            stream[pos[m] + b] = (gaps[m] >> (8 * b)) & 0xFF
        # Most postings of wiki text count 1: a bit a posting says which count more, and only those
        # have a nibble, found by the bits set before theirs (size: benchmarks/keyword_search.py).
        repeated = counts > 1
        bits = np.packbits(np.pad(repeated, (0, -len(repeated) % 64)), bitorder="little").view("<u8")
        rank = np.concatenate(([0], np.cumsum(np.bitwise_count(bits))[:-1])).astype(np.uint32)
        nibbles = np.where(counts[repeated] > ESCAPE, ESCAPE, counts[repeated] - 1).astype(np.uint8)
        nibbles = np.pad(nibbles, (0, len(nibbles) % 2))  # two to a byte
        big = np.flatnonzero(counts > ESCAPE)
        encoded = [w.encode("utf-8", "surrogatepass") for w in words]
        blob = SEP + b"".join(w + SEP for w in encoded)
        starts = np.concatenate(([1], 1 + np.cumsum(np.fromiter((len(w) + 1 for w in encoded), dtype=np.int64, count=len(encoded)))))
        files = {
            "words_starts.npy": starts.astype(_index_dtype(len(blob) + 1)),
            "words_offsets.npy": offsets.astype(_index_dtype(len(rows))),
            "words_row_at.npy": row_at.astype(_index_dtype(len(stream))),
            "words_rows.npy": stream,
            "words_repeated.npy": bits,
            "words_repeated_rank.npy": rank,
            "words_counts.npy": nibbles[0::2] | (nibbles[1::2] << np.uint8(4)),
            "words_big.npy": np.stack([big, counts[big]], axis=1).astype(_index_dtype(max(len(rows), int(counts.max(initial=0))))),
            "words_blocks.npy": _signatures(np.frombuffer(blob, dtype=np.uint8), starts, len(words)),
            "words_pairs.npy": self._pair_bits(),
        }
        (directory / "words_vocab.bin").write_bytes(blob)
        for name, array in files.items():
            np.save(directory / name, array)
        size = sum((directory / f).stat().st_size for f in [*files, "words_vocab.bin"])
        return {"word_postings": int(len(rows)), "vocabulary": len(words), "word_bytes": int(size)}


class WordPostings:
    """The memory-mapped word files of one part."""

    def __init__(self, directory: Path, num_chunks: int):
        self.num_chunks = num_chunks
        with open(directory / "words_vocab.bin", "rb") as f:
            self._vocab = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self.starts = mapped(directory / "words_starts.npy")
        self.offsets = mapped(directory / "words_offsets.npy")
        self.row_at = mapped(directory / "words_row_at.npy")
        self.stream = mapped(directory / "words_rows.npy")
        self.repeated = mapped(directory / "words_repeated.npy")
        self.repeated_rank = mapped(directory / "words_repeated_rank.npy")
        self.nibbles = mapped(directory / "words_counts.npy")
        self.big = np.load(directory / "words_big.npy")
        self.blocks = mapped(directory / "words_blocks.npy")
        self.pairs = mapped(directory / "words_pairs.npy")
        self.size = len(self.starts) - 1

    def _word(self, i: int) -> bytes:
        return self._vocab[int(self.starts[i]) : int(self.starts[i + 1]) - 1]

    def _range(self, prefix: bytes, whole: bool) -> tuple[int, int]:
        """Ids [lo, hi) of the words equal to `prefix` (whole) or starting with it."""
        lo = bisect.bisect_left(range(self.size), prefix, key=self._word)
        if whole:
            return lo, lo + int(lo < self.size and self._word(lo) == prefix)
        return lo, bisect.bisect_left(range(self.size), prefix + b"\xff", lo=lo, key=self._word)  # no UTF-8 byte is 0xff

    def _spans(self, needle: bytes) -> list[tuple[int, int]]:
        """Byte ranges of words_vocab.bin that hold every word containing `needle` (without its
        framing b"\\n"): the runs of blocks whose signature has all of the needle's hashes."""
        core = needle.strip(SEP)
        if len(core) < 3:
            return [(0, len(self._vocab))]
        h = np.unique(_hashes(np.frombuffer(core, dtype=np.uint8)))
        hit = np.flatnonzero(((self.blocks[:, h >> 3] >> (h & 7).astype(np.uint8)) & 1).all(axis=1))
        if not len(hit):
            return []
        cut = np.flatnonzero(np.diff(hit) > 1) + 1
        first, last = hit[np.concatenate(([0], cut))], hit[np.concatenate((cut - 1, [len(hit) - 1]))]
        lo = self.starts[first * BLOCK_WORDS].astype(np.int64)
        hi = self.starts[np.minimum((last + 1) * BLOCK_WORDS, self.size)].astype(np.int64)
        return list(zip(lo.tolist(), hi.tolist()))

    def matching_words(self, needle: bytes, limit: int | None = None) -> tuple[np.ndarray, np.ndarray] | None:
        """(ascending word ids, non-overlapping occurrences of `needle` in each) of the words whose
        b"\\n"-framed form holds `needle` (no leading b"\\n"); None past `limit` matches."""
        found, find = [], self._vocab.find
        step = max(1, len(needle) - needle.endswith(SEP))  # a framing b"\n" also starts the next word
        for at, end in self._spans(needle):
            while True:
                at = find(needle, at, end)
                if at < 0:
                    break
                found.append(at)
                if limit is not None and len(found) > limit:
                    return None
                at += step
        ids = np.searchsorted(self.starts, np.asarray(found, dtype=self.starts.dtype), side="right") - 1  # its dtype: no copy of `starts`
        return np.unique(ids, return_counts=True)

    def _gather(self, ids: np.ndarray, with_counts: bool) -> tuple[np.ndarray, np.ndarray | None]:
        """Rows (ascending within each word, words in `ids` order) and counts of the words `ids`."""
        lo = self.offsets[ids].astype(np.int64)
        n = self.offsets[ids + 1].astype(np.int64) - lo
        at = self.row_at[ids].astype(np.int64)
        width = (self.row_at[ids + 1].astype(np.int64) - at) // np.maximum(n, 1)
        seg = np.cumsum(n) - n
        rank = np.arange(int(n.sum())) - np.repeat(seg, n)
        per_posting = np.repeat(width, n)
        pos = np.repeat(at, n) + per_posting * rank
        gaps = self.stream[pos].astype(np.int64)
        for b in (1, 2, 3):
            m = per_posting > b
            if m.any():
                gaps[m] |= self.stream[pos[m] + b].astype(np.int64) << (8 * b)
        total = np.cumsum(gaps)
        before = total[seg[n > 0]] - gaps[seg[n > 0]]
        rows = total - np.repeat(before, n[n > 0])
        if not with_counts:
            return rows, None
        posting = np.repeat(lo, n) + rank
        word, bit = posting >> 6, (posting & 63).astype(np.uint64)
        bits = self.repeated[word]
        counts = np.ones(len(posting), dtype=np.int64)
        more = np.flatnonzero((bits >> bit) & np.uint64(1))
        nib = self.repeated_rank[word[more]].astype(np.int64) + np.bitwise_count(bits[more] & ((np.uint64(1) << bit[more]) - np.uint64(1)))
        counts[more] = ((self.nibbles[nib >> 1] >> ((nib & 1) * 4).astype(np.uint8)) & 0xF).astype(np.int64) + 1
        escaped = np.flatnonzero(counts > ESCAPE)
        if len(escaped):
            counts[escaped] = self.big[np.searchsorted(self.big[:, 0], posting[escaped]), 1].astype(np.int64)
        return rows, counts

    def _union(self, ids: np.ndarray) -> np.ndarray:
        """Ascending distinct rows holding any of the words `ids`."""
        rows, _ = self._gather(ids, with_counts=False)
        if len(ids) == 1:
            return rows
        mark = np.zeros(self.num_chunks, dtype=bool)
        mark[rows] = True
        return np.flatnonzero(mark)

    def keyword_counts(self, lowered: str) -> tuple[np.ndarray, np.ndarray]:
        """(ascending rows, counts > 0) of a keyword without separators, from the words alone."""
        ids, per_word = self.matching_words(lowered.encode("utf-8", "surrogatepass"))
        if not len(ids):
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        rows, counts = self._gather(ids, with_counts=True)
        if len(ids) == 1:
            return rows, counts * int(per_word[0])
        weights = counts * np.repeat(per_word, (self.offsets[ids + 1] - self.offsets[ids]).astype(np.int64))
        total = np.bincount(rows, weights=weights, minlength=self.num_chunks).astype(np.int64)
        hit = np.flatnonzero(total)
        return hit, total[hit]

    def candidates(self, conditions: list[tuple[str, str]]) -> np.ndarray | None:
        """Ascending rows meeting the most selective of `conditions` (split_keyword), a superset of
        the chunks holding the keyword; None: every row. A suffix needs a scan of the words, so it
        is looked at last, only while candidates are many, and dropped past SUFFIX_WORDS words."""
        ranked = []
        for kind, run in conditions:
            if kind != "suffix":
                lo, hi = self._range(run.encode("utf-8", "surrogatepass"), whole=kind == "whole")
                if lo == hi:
                    return np.zeros(0, np.int64)  # a word every match needs, in no chunk of this part
                ranked.append((int(self.offsets[hi]) - int(self.offsets[lo]), np.arange(lo, hi)))
        ranked.sort(key=lambda t: t[0])
        # The pair filter costs a bit test a candidate: before gathering more postings.
        rows = self.with_pairs(self._union(ranked[0][1]), conditions) if ranked else None
        for size, ids in ranked[1:]:
            if len(rows) <= ENOUGH or not self._worth(len(rows), size):
                break
            rows = self._within(rows, ids)
        for kind, run in conditions:
            if kind != "suffix" or (rows is not None and len(rows) <= ENOUGH):
                continue
            if rows is not None:  # the word `run` itself ends in it: its postings are a floor on the scan's
                lo, hi = self._range(run.encode("utf-8", "surrogatepass"), whole=True)
                if not self._worth(len(rows), int(self.offsets[hi]) - int(self.offsets[lo])):
                    continue
            found = self.matching_words(run.encode("utf-8", "surrogatepass") + SEP, limit=SUFFIX_WORDS)
            if found is None:
                continue
            ids = found[0]
            if not len(ids):
                return np.zeros(0, np.int64)
            if rows is None:
                rows = self._union(ids)
            elif self._worth(len(rows), int((self.offsets[ids + 1].astype(np.int64) - self.offsets[ids]).sum())):
                rows = self._within(rows, ids)
        return self.with_pairs(rows, conditions) if not ranked else rows

    def _worth(self, candidates: int, postings: int) -> bool:
        """Whether gathering `postings` to narrow `candidates` costs less than the texts it saves."""
        return candidates * max(0.0, 1.0 - postings / max(self.num_chunks, 1)) * UNION_PER_CANDIDATE >= postings

    def with_pairs(self, rows: np.ndarray | None, conditions: list[tuple[str, str]]) -> np.ndarray | None:
        """Those of ascending `rows` (None: every row) whose pair buckets hold every `pair_edges` pair."""
        edges = np.asarray(pair_edges(conditions), np.uint64).reshape(-1, 2)
        for key in (_pair_hashes(edges[:, 0], edges[:, 1]) % np.uint64(len(self.pairs))).tolist():
            if rows is not None and len(rows) == 0:
                break
            bucket = self.pairs[key]
            if rows is None:
                rows = np.flatnonzero(np.unpackbits(bucket, bitorder="little")[: self.num_chunks])
            else:
                rows = rows[(bucket[rows >> 3] >> (rows & 7).astype(np.uint8)) & 1 == 1]
        return rows

    def _within(self, rows: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """Those of ascending `rows` holding any of the words `ids`."""
        mark = np.zeros(self.num_chunks, dtype=bool)
        mark[self._gather(ids, with_counts=False)[0]] = True
        return rows[mark[rows]]
