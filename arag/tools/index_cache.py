"""The tools' read cache of a whole index: one cache per part (arag.index.keyword.part_cache), opened together.

Missing part caches are built here on open (about a minute per million chunks); where they live:
docs/tools.md, "Tools cache". A chunk's `ord` is its place in index order (parts in manifest order,
then rows); a sentence's global row is its part's sentence offset plus its row (FAISS id = part << 32 | row).
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections import Counter
from functools import cached_property
from pathlib import Path
from typing import Sequence

import numpy as np

from arag.index.layout import PART_SHIFT, TOOLS_CACHE, part_name
from arag.index.store import Index, PartFiles
from arag.small_sorted import best_first, distinct, position, positions
from arag.index.keyword.counts import KeywordCounts
from arag.index.keyword.part_cache import CacheBuildError, PartCache, build_part_cache, is_valid
from arag.tools.sentence_sources import SentenceSources, by_range

log = logging.getLogger(__name__)


def manifest_hash(index: Index) -> str:
    """Hash of the bytes of the index's manifest.json (names the per-user cache of an index)."""
    return hashlib.sha256(index.layout.manifest.read_bytes()).hexdigest()[:16]


def part_cache_dir(index_root: Path, part: int) -> Path:
    """Where the pipeline puts a part's cache: inside the index."""
    return Path(index_root) / TOOLS_CACHE / part_name(part)


def _user_cache_root(index: Index) -> Path:
    env = os.environ.get("ARAG_CACHE_DIR")
    base = Path(env) / "tools" if env else Path.home() / ".cache" / "arag" / "tools"
    return base / manifest_hash(index)


def _open_part(index: Index, part: PartFiles, cache_dir: str | Path | None) -> PartCache:
    """The part's cache: a complete one where it may be, else built in the first writable place."""
    roots = [Path(cache_dir)] if cache_dir else [index.root / TOOLS_CACHE, _user_cache_root(index)]
    for root in roots:
        d = root / part_name(part.part)
        if is_valid(d, part.chunks, part.sentences):
            return PartCache(d)
    errors = []
    for root in roots:
        try:
            log.info("building the tools cache of part %d of %s in %s", part.part, index.root, root)
            return PartCache(build_part_cache(part.chunks, part.sentences, part.part, root / part_name(part.part)))
        except PermissionError as exc:  # read-only index directory: try the next place
            errors.append(f"{root}: {exc}")
            log.warning("cannot write the tools cache under %s (%s); trying the next place", root, exc)
    raise CacheBuildError(f"could not build the tools cache of {index.root}: {'; '.join(errors)}")


def top_pairs(ords: np.ndarray, scores: np.ndarray, top_k: int) -> list[tuple[int, int]]:
    """The `top_k` (ord, score) pairs: highest score first, ties by smaller ord."""
    return [(int(ords[i]), int(scores[i])) for i in best_first(scores, ords)[:top_k]]


class ChunkStore:
    """All parts' caches of one index, addressed by global chunk `ord` and global sentence row; missing
    or stale caches are built on opening."""

    def __init__(self, index: Index, cache_dir: str | Path | None = None):
        self.index = index
        self.parts: list[PartCache] = []
        for part in index.parts:
            cache = _open_part(index, part, cache_dir)
            if cache.num_chunks != part.num_chunks or cache.num_sentences != part.num_sentences:
                raise CacheBuildError(
                    f"part {part.part} of {index.root}: the manifest says {part.num_chunks} chunks and {part.num_sentences} sentences, "
                    f"its files hold {cache.num_chunks} and {cache.num_sentences}"
                )
            self.parts.append(cache)
        self.part_numbers = [p.part for p in index.parts]
        self.chunk_offsets = np.cumsum([0] + [p.num_chunks for p in self.parts], dtype=np.int64)
        self.sentence_offsets = np.cumsum([0] + [p.num_sentences for p in self.parts], dtype=np.int64)
        self.num_chunks = int(self.chunk_offsets[-1])
        self.num_sentences = int(self.sentence_offsets[-1])
        self._part_index = {n: i for i, n in enumerate(self.part_numbers)}
        self.keyword_counts = KeywordCounts()

    @property
    def dirs(self) -> list[Path]:
        return [p.dir for p in self.parts]

    def chunk_rows(self, ords: np.ndarray | list[int], columns: list[str]) -> dict[str, list]:
        """Columns of the chunks at `ords` as lists: CHUNK_SCHEMA's plus s_start, s_count (global sentence rows)."""
        ords = list(ords)
        out: dict[str, list] = {c: [None] * len(ords) for c in columns}
        stored = [c for c in columns if c not in ("s_start", "s_count")]
        for w, at, local in by_range(self.chunk_offsets, ords):
            part = self.parts[w]
            rows = local.tolist()
            values = part.rows(rows, stored) if stored else {}
            if "s_start" in out or "s_count" in out:
                starts = part.sentence_starts
                values["s_start"] = [int(self.sentence_offsets[w]) + int(starts[r]) for r in rows]
                values["s_count"] = [int(starts[r + 1]) - int(starts[r]) for r in rows]
            for c in columns:
                for i, v in zip(at.tolist(), values[c]):
                    out[c][i] = v
        return out

    def sentences_at(self, rows: np.ndarray | Sequence[int]) -> list[str]:
        """Texts of global sentence rows (any order, any parts), in that order; one text read per chunk."""
        out: list[str] = [""] * len(rows)
        for w, at, local in by_range(self.sentence_offsets, rows):
            for i, t in zip(at.tolist(), self.parts[w].sentence_texts(local.tolist())):
                out[i] = t
        return out

    def sentence_ids(self, start: int, count: int) -> list[int]:
        """FAISS ids (part << 32 | row) of global sentence rows [start, start+count) (within one part)."""
        if count <= 0:
            return []
        w = position(self.sentence_offsets, start, side="right") - 1
        local = start - int(self.sentence_offsets[w])
        return [(self.part_numbers[w] << PART_SHIFT) | r for r in range(local, local + count)]

    def sentence_rows(self, sentence_ids: np.ndarray) -> np.ndarray:
        """Global sentence row of each FAISS id (part << 32 | row)."""
        sids = np.asarray(sentence_ids, dtype=np.int64)
        parts = sids >> PART_SHIFT
        rows = sids & ((1 << PART_SHIFT) - 1)
        out = np.empty(len(sids), dtype=np.int64)
        for p in distinct(parts):
            m = parts == p
            w = self._part_index.get(int(p))
            if w is None or rows[m].max() >= self.parts[w].num_sentences:
                raise KeyError(f"sentence id of part {int(p)} not in this index (stale vector file?)")
            out[m] = self.sentence_offsets[w] + rows[m]
        return out

    def chunk_of_sentence_rows(self, rows: np.ndarray) -> np.ndarray:
        out = np.empty(len(rows), dtype=np.int64)
        for w, at, local in by_range(self.sentence_offsets, rows):
            out[at] = self.chunk_offsets[w] + positions(self.parts[w].sentence_starts, local, side="right") - 1
        return out

    def find_chunks(self, column: str, values: list[str]) -> dict[str, list[int]]:
        """Ords of the chunks whose chunk_id or doc_id equals each value (absent when none)."""
        out: dict[str, list[int]] = {}
        for w, part in enumerate(self.parts):
            for v, rows in part.find_rows(column, values).items():
                out.setdefault(v, []).extend(int(self.chunk_offsets[w]) + r for r in rows)
        return out

    @cached_property
    def sentence_sources(self) -> SentenceSources:
        """Each sentence's source document; MissingSentenceSourcesError on an index built without them."""
        return SentenceSources(self)

    def keyword_top(self, keywords: list[str], top_k: int, narrow: bool = True) -> list[tuple[int, int]]:
        """Top `top_k` (ord, score) by keyword_search's score, score > 0, ties by smaller ord. `narrow`: each
        distinct keyword counted on its own and summed with its weight (same result); else every chunk scored."""
        terms = [(k.lower(), len(k)) for k in keywords]
        if not narrow:
            return self._scan_top(terms, top_k)
        weights: Counter[str] = Counter()
        for k, n in terms:  # a keyword given twice counts twice
            weights[k] += n
        ords, scores = [], []
        for k, n in weights.items():
            o, c = self.keyword_occurrences(k)
            if len(o):
                ords.append(o)
                scores.append(c.astype(np.int64) * n)
        if not ords:
            return []
        if len(ords) == 1:
            o, s = ords[0], scores[0]
        else:
            o, where = np.unique(np.concatenate(ords), return_inverse=True)
            s = np.zeros(len(o), dtype=np.int64)
            np.add.at(s, where, np.concatenate(scores))
        return top_pairs(o, s, top_k)

    def keyword_occurrences(self, keyword: str) -> tuple[np.ndarray, np.ndarray]:
        """(ascending ords, counts) of the chunks whose lowered text holds the lowered `keyword`; costly
        counts are remembered (arag.index.keyword.counts)."""
        known = self.keyword_counts.get(keyword)
        if known is not None:
            return known
        started = time.perf_counter()
        ords, counts, scanned = [], [], 0
        for w, part in enumerate(self.parts):
            if part.num_chunks == 0:
                continue
            rows, c, read = part.keyword_counts(keyword)
            scanned += read + len(rows)
            ords.append(rows + self.chunk_offsets[w])
            counts.append(c.astype(np.int32))
        o = np.concatenate(ords) if ords else np.zeros(0, dtype=np.int64)
        c = np.concatenate(counts) if counts else np.zeros(0, dtype=np.int32)
        self.keyword_counts.put(keyword, o, c, scanned, seconds=time.perf_counter() - started)
        return o, c

    def _scan_top(self, terms: list[tuple[str, int]], top_k: int) -> list[tuple[int, int]]:
        """keyword_top scoring every term on every chunk (the reference the narrowing must equal)."""
        ords, scores = [], []
        for w, part in enumerate(self.parts):
            if part.num_chunks == 0:
                continue
            s = part.keyword_scores(np.arange(part.num_chunks, dtype=np.int64), terms)
            hit = s > 0
            ords.append(np.flatnonzero(hit) + self.chunk_offsets[w])
            scores.append(s[hit])
        return top_pairs(np.concatenate(ords), np.concatenate(scores), top_k) if ords else []
