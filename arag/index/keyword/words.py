"""Word postings with counts over Python-lowered chunk text: how keyword_search finds and counts matches.

Why words: a keyword's count is a substring count (arag.tools.keyword), so trigram postings only
gave candidates to verify on the text, and a common word ('mother') or a title of common words
('a nest of') left tens of thousands of candidates to read (over a second at 449k chunks). Split
the lowered text into *words*, maximal runs of word characters (Unicode letters, marks, digits:
`is_word_char`), and a keyword's matches become questions about words:

* A keyword made only of word characters lies inside one word of the text wherever it occurs, so
  its count in a chunk is Σ over the part's distinct words w of count(w in chunk) × count(keyword
  in w), both counts non-overlapping like `str.count` (a match never reaches past the word, so the
  left-to-right scan restarts in each word as it does in the text). That is exact and reads no
  chunk text: the vocabulary is searched for words holding the keyword, and their postings summed.
* A keyword with other characters ('a nest of', 'u.s.', "o'brien") is split into its runs of word
  characters. In any match, a run with a non-word character on both sides in the keyword is a
  whole word of the text; the first run (if the keyword starts with it) ends a word, the last
  (if it ends the keyword) starts one. The chunks holding such words are a superset of the
  matches: the most selective of these conditions are intersected and the survivors are counted
  on their text, exactly (arag.index.keyword.part_cache). A keyword with no word character at all
  is counted on every chunk.

On disk, per part:
    words_vocab.bin      the distinct words, UTF-8, each followed by b"\\n" and the first preceded
                         by one (so a whole word is b"\\nw\\n", a prefix b"\\np", a suffix b"s\\n"),
                         memory-mapped and searched with `mmap.find`
    words_starts.npy     int64, words + 1: where each word starts in words_vocab.bin (after its b"\\n")
    words_offsets.npy    int64, words + 1: word i's postings are [offsets[i], offsets[i+1])
    words_rows.npy       the postings' chunk rows, ascending per word: uint16 in parts of at most
                         65,536 chunks (the pipeline's 64 MB parts hold ~5-60k), else uint32
    words_counts.npy     uint8, each posting's count; 255 means "look it up in words_big.npy"
    words_big.npy        int64 (posting index, count) pairs for counts of 255 or more, by index
Vocabulary order is first appearance; UTF-8 substring matches are exactly code-point substring
matches (a UTF-8 sequence cannot start inside another character), and b"\\n" is not a word character.
"""

from __future__ import annotations

import mmap
import re
import unicodedata
from pathlib import Path

import numpy as np

from arag.small_sorted import mapped

SEP = b"\n"
BIG = 255  # a count stored as this is in words_big.npy
# Postings of a condition are unioned only while they are at most this many times the candidates
# already left: gathering a posting costs ~100x less than reading and counting one chunk's text.
UNION_PER_CANDIDATE = 100
# Candidates few enough to count on their text without narrowing further.
ENOUGH = 32

UNICODE_VERSION = unicodedata.unidata_version  # the word rule's source (kept in each cache's metadata)
_pattern: re.Pattern | None = None


def is_word_char(ch: str) -> bool:
    """A letter, mark or digit: the characters of a word."""
    return unicodedata.category(ch)[0] in "LMN"


def word_pattern() -> re.Pattern:
    """A regex matching maximal runs of `is_word_char` characters (built once from the table)."""
    global _pattern
    if _pattern is None:
        mask = np.fromiter((is_word_char(chr(c)) for c in range(0x110000)), dtype=bool, count=0x110000)
        edges = np.flatnonzero(np.diff(np.concatenate(([False], mask, [False])).astype(np.int8)))
        ranges = edges.reshape(-1, 2)
        cls = "".join(f"{re.escape(chr(a))}-{re.escape(chr(b - 1))}" if b - 1 > a else re.escape(chr(a)) for a, b in ranges.tolist())
        _pattern = re.compile(f"[{cls}]+")
    return _pattern


def split_keyword(lowered: str) -> tuple[bool, list[tuple[str, str]]]:
    """(whether the keyword is one run of word characters, its conditions): each run of word
    characters of a keyword with other characters, as ("whole" | "suffix" | "prefix", run).
    A run at the keyword's start must end a word of the text (it is that word's suffix), one at its
    end must start one, one with a non-word character on both sides is a whole word; a run that is
    the whole keyword's start and end at once is only inside a word and makes no condition."""
    runs = [(m.start(), m.end()) for m in word_pattern().finditer(lowered)]
    if len(runs) == 1 and runs[0] == (0, len(lowered)):
        return True, []
    out = []
    for a, b in runs:
        at_start, at_end = a == 0, b == len(lowered)
        if at_start and at_end:
            continue
        kind = "suffix" if at_start else "prefix" if at_end else "whole"
        out.append((kind, lowered[a:b]))
    return False, out


class WordPostingsWriter:
    """Collects (word, row, count) batch by batch; memory ~10 bytes a posting until written."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}
        self.keys: list[np.ndarray] = []  # word id << 32 | row, unique, per batch
        self.counts: list[np.ndarray] = []
        self.rows = 0

    def add(self, lowered_texts: list[str], first_row: int) -> None:
        find = word_pattern().findall
        per_row = [find(t) for t in lowered_texts]
        lengths = np.fromiter(map(len, per_row), dtype=np.int64, count=len(per_row))
        self.rows = max(self.rows, first_row + len(lowered_texts))
        if not lengths.sum():
            return
        vocab = self.vocab
        ids = np.fromiter((vocab.setdefault(w, len(vocab)) for ws in per_row for w in ws), dtype=np.uint64, count=int(lengths.sum()))
        rows = np.repeat(np.arange(first_row, first_row + len(per_row), dtype=np.uint64), lengths)
        keys, counts = np.unique((ids << np.uint64(32)) | rows, return_counts=True)
        self.keys.append(keys)
        self.counts.append(counts)

    def write(self, directory: Path) -> dict:
        """Write the files; return the postings, the vocabulary size and the bytes written."""
        keys = np.concatenate(self.keys) if self.keys else np.zeros(0, np.uint64)
        counts = np.concatenate(self.counts) if self.counts else np.zeros(0, np.int64)
        order = np.argsort(keys, kind="stable")  # by word, then row (rows of a batch are its own)
        keys, counts = keys[order], counts[order]
        ids = (keys >> np.uint64(32)).astype(np.int64)
        rows = (keys & np.uint64(0xFFFFFFFF)).astype(np.uint16 if self.rows <= 1 << 16 else np.uint32)
        offsets = np.zeros(len(self.vocab) + 1, dtype=np.int64)
        np.cumsum(np.bincount(ids, minlength=len(self.vocab)), out=offsets[1:])
        big = np.flatnonzero(counts >= BIG)
        blob = SEP + SEP.join(w.encode("utf-8", "surrogatepass") for w in self.vocab) + SEP if self.vocab else SEP
        lengths = np.fromiter((len(w.encode("utf-8", "surrogatepass")) + 1 for w in self.vocab), dtype=np.int64, count=len(self.vocab))
        starts = np.concatenate(([1], 1 + np.cumsum(lengths))).astype(np.int64)
        (directory / "words_vocab.bin").write_bytes(blob)
        np.save(directory / "words_starts.npy", starts)
        np.save(directory / "words_offsets.npy", offsets)
        np.save(directory / "words_rows.npy", rows)
        np.save(directory / "words_counts.npy", np.minimum(counts, BIG).astype(np.uint8))
        np.save(directory / "words_big.npy", np.stack([big, counts[big]], axis=1).astype(np.int64))
        size = sum((directory / f).stat().st_size for f in ("words_vocab.bin", "words_starts.npy", "words_offsets.npy", "words_rows.npy", "words_counts.npy", "words_big.npy"))
        return {"word_postings": int(len(keys)), "vocabulary": len(self.vocab), "word_bytes": int(size)}


class WordPostings:
    """Read side: the memory-mapped files of one part."""

    def __init__(self, directory: Path, num_chunks: int):
        self.num_chunks = num_chunks
        with open(directory / "words_vocab.bin", "rb") as f:
            self._vocab = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self.starts = mapped(directory / "words_starts.npy")
        self.offsets = mapped(directory / "words_offsets.npy")
        self.rows = mapped(directory / "words_rows.npy")
        self.counts = mapped(directory / "words_counts.npy")
        self.big = np.load(directory / "words_big.npy")

    def matching_words(self, needle: bytes) -> tuple[np.ndarray, np.ndarray]:
        """(word ids, non-overlapping occurrences of `needle` in each) for the words whose
        b"\\n"-framed form holds `needle` (framed needles select whole words, prefixes, suffixes)."""
        found, find, at, step = [], self._vocab.find, 0, max(1, len(needle) - (needle.endswith(SEP)))
        while True:
            at = find(needle, at)
            if at < 0:
                break
            found.append(at)
            at += step  # a framing b"\n" may start the next word's match
        if not found:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        ids = np.searchsorted(self.starts, np.asarray(found, dtype=np.int64) + (1 if needle.startswith(SEP) else 0), side="right") - 1
        return np.unique(ids, return_counts=True)

    def postings(self, ids: np.ndarray) -> int:
        """How many postings the words `ids` have together."""
        return int((self.offsets[ids + 1] - self.offsets[ids]).sum())

    def _gather(self, ids: np.ndarray, with_counts: bool) -> tuple[np.ndarray, np.ndarray | None]:
        lo, hi = self.offsets[ids], self.offsets[ids + 1]
        if len(ids) == 1:
            idx = slice(int(lo[0]), int(hi[0]))
            rows = self.rows[idx].astype(np.int64)
        else:
            n = hi - lo
            idx = np.repeat(lo - np.cumsum(n) + n, n) + np.arange(int(n.sum()))
            rows = self.rows[idx].astype(np.int64)
        if not with_counts:
            return rows, None
        counts = self.counts[idx].astype(np.int64)
        if len(self.big) and (counts == BIG).any():
            where = np.arange(int(lo[0]), int(hi[0])) if isinstance(idx, slice) else idx
            at = np.flatnonzero(counts == BIG)
            counts[at] = self.big[np.searchsorted(self.big[:, 0], where[at]), 1]
        return rows, counts

    def rows_of(self, ids: np.ndarray) -> np.ndarray:
        """Ascending distinct rows holding any of the words `ids`."""
        rows, _ = self._gather(ids, with_counts=False)
        return rows if len(ids) == 1 else np.unique(rows)

    def keyword_counts(self, lowered: str) -> tuple[np.ndarray, np.ndarray]:
        """(ascending rows, counts > 0) of a keyword made only of word characters, from the words alone."""
        ids, per_word = self.matching_words(lowered.encode("utf-8", "surrogatepass"))
        if not len(ids):
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        rows, counts = self._gather(ids, with_counts=True)
        if len(ids) == 1:
            return rows, counts * int(per_word[0])
        weights = counts * np.repeat(per_word, self.offsets[ids + 1] - self.offsets[ids])
        if len(rows) * 8 > self.num_chunks:
            total = np.bincount(rows, weights=weights, minlength=self.num_chunks).astype(np.int64)
            hit = np.flatnonzero(total)
            return hit, total[hit]
        out, where = np.unique(rows, return_inverse=True)
        total = np.zeros(len(out), np.int64)
        np.add.at(total, where, weights)
        return out, total

    def candidates(self, conditions: list[tuple[str, str]]) -> np.ndarray | None:
        """Ascending rows meeting the most selective of `conditions` (split_keyword): a superset of
        the chunks holding the keyword; None: no condition narrows (every row)."""
        framed = []
        for kind, run in conditions:
            b = run.encode("utf-8", "surrogatepass")
            needle = SEP + b + SEP if kind == "whole" else b + SEP if kind == "suffix" else SEP + b
            ids, _ = self.matching_words(needle)
            if not len(ids):
                return np.zeros(0, np.int64)  # a required word no chunk of this part has
            framed.append((self.postings(ids), ids))
        if not framed:
            return None
        framed.sort(key=lambda t: t[0])
        rows = self.rows_of(framed[0][1])
        for size, ids in framed[1:]:
            if len(rows) <= ENOUGH or size > UNION_PER_CANDIDATE * len(rows):
                break
            rows = np.intersect1d(rows, self.rows_of(ids), assume_unique=True)
        return rows
