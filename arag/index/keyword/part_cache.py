"""The tools' read cache of ONE index part, built from that part's Parquet files by a plain function.

Why: the tools read by row (a chunk's text, a sentence by its FAISS id, a chunk by its id), which
zstd Parquet row groups make slow, and keyword search counts on *Python's* `str.lower()`. The text
is stored once, uncompressed, memory-mapped or read with pread, so opening is instant and the
process's memory does not grow with the corpus. How it is used: docs/tools.md, "Tools cache";
its files: docs/indexing.md, "Tools cache files".
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
import tempfile
import time
import weakref
from functools import cached_property
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from arag.index.layout import PART_SHIFT, fsync
from arag.index.parts import CHUNK_SCHEMA
from arag.small_sorted import mapped, members, positions
from arag.index.keyword.words import UNICODE_VERSION, WordPostings, WordPostingsWriter, split_keyword

CACHE_FORMAT = 10  # bumped whenever the files change: an older cache is rebuilt
MARKER = "cache.json"
READ_BATCH = 4096
EXTRA_SCHEMA = pa.schema([("text", pa.string())])
# How keyword scoring reads candidate texts: "pread" copies them into short-lived buffers, "mmap"
# reads them in place (each page touched stays mapped and counts in the RSS). Results are identical.
TEXT_READS = "pread"
# Bytes between two candidates' texts up to which one read covers both (the rows between are scored
# too): about what lowering and matching that much text costs against one more pread. At 1M chunks,
# 4096 made keyword_search in the wiki mix ~27% slower on one thread than 0 or 1024
# (benchmarks/tools_concurrency.py --big: the extra text), and 0 made it ~2x slower on made-up words
# than 1024 or 4096 (benchmarks/keyword_search.py --text pseudo: the extra reads).
READ_GAP = 1024
SCORE_ROWS = 16384  # candidates scored at a time: bounds the text buffers (~16 MB of wiki chunks)
# Characters whose Python lowercase holds ASCII (a test checks every code point): their rows are scored
# in Python, so an ASCII keyword is counted on text with only ASCII lowered (~5-9x faster: benchmarks/keyword_stages.py).
LOWER_TO_ASCII = ("\u0130", "\u212a")


def literal_regex(text: str) -> str:
    """An RE2 pattern matching exactly `text`: every character but ASCII letters and digits as \\x{hex}."""
    return "".join(c if c.isascii() and c.isalnum() else f"\\x{{{ord(c):x}}}" for c in text)


class CacheBuildError(RuntimeError):
    pass


def source_stamp(chunks: Path, sentences: Path) -> dict:
    out = {}
    for name, path in (("chunks", chunks), ("sentences", sentences)):
        st = path.stat() if path.exists() else None
        out[name] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns} if st else None
    return out


def is_valid(directory: Path, chunks: Path, sentences: Path) -> bool:
    """A complete cache of the current files of this part (a stale or partial one is not)."""
    try:
        meta = json.loads((directory / MARKER).read_text())
    except (OSError, ValueError):
        return False
    return (
        meta.get("cache_format") == CACHE_FORMAT
        and meta.get("unicode") == UNICODE_VERSION  # which characters make words depends on it (arag.index.keyword.words)
        and meta.get("source") == source_stamp(chunks, sentences)
    )


def id_hash(values: list[str]) -> np.ndarray:
    """A stable 32-bit hash of each string (for id lookups; a collision costs a row read, checked on read)."""
    digests = b"".join(hashlib.blake2b(v.encode("utf-8", "surrogatepass"), digest_size=4).digest() for v in values)
    return np.frombuffer(digests, dtype="<u4").astype(np.uint32)


def _sentences(path: Path, part: int) -> Iterator[tuple[str, str]]:
    """(chunk_id, text) of a part's sentences in row order, checking the ids are part<<32|row."""
    if not path.exists():
        return
    row = 0
    for batch in pq.ParquetFile(path).iter_batches(batch_size=READ_BATCH, columns=["sentence_id", "chunk_id", "text"]):
        sids = batch.column("sentence_id").to_numpy()
        expected = (part << PART_SHIFT) + row + np.arange(len(sids), dtype=np.int64)
        if not np.array_equal(sids, expected):
            raise CacheBuildError(f"{path}: sentence ids are not part<<32|row; cannot map FAISS ids to rows")
        row += len(sids)
        yield from zip(batch.column("chunk_id").to_pylist(), batch.column("text").to_pylist())


def build_part_cache(chunks: Path, sentences: Path, part: int, target: Path) -> Path:
    """Build the cache of one part into `target` (a complete cache of the same files is kept).

    Memory: ~16 bytes a (word, chunk) posting while they are collected (~2x the part's text on
    wiki prose), a few times that while they are sorted and written."""
    if is_valid(target, chunks, sentences):
        return target
    started = time.perf_counter()
    stamp = source_stamp(chunks, sentences)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=target.parent))
    try:
        meta = _write(chunks, sentences, part, tmp)
        meta.update(cache_format=CACHE_FORMAT, unicode=UNICODE_VERSION, part=part, source=stamp, build_seconds=round(time.perf_counter() - started, 3))
        (tmp / MARKER).write_text(json.dumps(meta, indent=2) + "\n")
        for path in [*tmp.iterdir(), tmp]:
            fsync(path)
        if target.exists():
            if is_valid(target, chunks, sentences):  # a concurrent builder finished first
                return target
            shutil.rmtree(target, ignore_errors=True)  # stale: built from older files
        try:
            os.rename(tmp, target)
        except OSError:
            if not is_valid(target, chunks, sentences):
                raise
        return target
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # gone once renamed; else a failed or a losing build's


def _write(chunks: Path, sentences: Path, part: int, out: Path) -> dict:
    words = WordPostingsWriter()
    python_lower: list[int] = []
    starts: list[int] = [0]
    spans: list[tuple[int, int]] = []
    extra: list[str] = []
    id_hashes: list[np.ndarray] = []
    doc_hashes: list[np.ndarray] = []
    sentence_iter = _sentences(sentences, part)
    pending = next(sentence_iter, None)
    rows = text_chars = longest = 0
    with pa.OSFile(str(out / "chunks.arrow"), "wb") as sink, pa.ipc.new_file(sink, CHUNK_SCHEMA) as writer:
        batches = pq.ParquetFile(chunks).iter_batches(batch_size=READ_BATCH, columns=CHUNK_SCHEMA.names) if chunks.exists() else []
        for batch in batches:
            batch = batch.cast(CHUNK_SCHEMA)
            ids = batch.column("chunk_id").to_pylist()
            texts = batch.column("text").to_pylist()
            for cid, text in zip(ids, texts):
                pos = 0
                while pending is not None and pending[0] == cid:
                    s = pending[1]
                    at = text.find(s, pos)
                    if at < 0:  # not a substring of its chunk: kept verbatim
                        spans.append((EXTRA, len(extra)))
                        extra.append(s)
                    else:
                        spans.append((at, at + len(s)))
                        pos = at + len(s)
                    pending = next(sentence_iter, None)
                starts.append(len(spans))
            lowered = [t.lower() for t in texts]
            words.add(lowered, rows)
            arrow_lowered = pc.utf8_lower(batch.column("text")).to_pylist()
            python_lower += [rows + i for i, (t, a, b) in enumerate(zip(texts, lowered, arrow_lowered)) if a != b or any(c in t for c in LOWER_TO_ASCII)]
            text_chars += sum(map(len, texts))
            longest = max([longest, *map(len, texts)])
            writer.write_batch(batch)
            id_hashes.append(id_hash(ids))
            doc_hashes.append(id_hash(batch.column("doc_id").to_pylist()))
            rows += batch.num_rows
    if pending is not None:
        raise CacheBuildError(f"{sentences}: sentences of chunk {pending[0]!r} are out of chunk order or belong to no chunk")
    np.save(out / "sentence_starts.npy", np.asarray(starts, dtype=np.uint32 if len(spans) < 2**32 else np.int64))
    np.save(out / "python_lower_rows.npy", np.asarray(python_lower, dtype=np.int64))
    np.save(out / "sentence_spans.npy", _span_array(spans, longest=longest))
    if extra:
        with pa.OSFile(str(out / "sentences_extra.arrow"), "wb") as sink, pa.ipc.new_file(sink, EXTRA_SCHEMA) as writer:
            writer.write_batch(pa.record_batch([pa.array(extra, pa.string())], schema=EXTRA_SCHEMA))
    for name, hashes in (("chunk_id", id_hashes), ("doc_id", doc_hashes)):
        h = np.concatenate(hashes) if hashes else np.zeros(0, np.uint32)
        order = np.argsort(h, kind="stable")
        np.save(out / f"{name}_hash.npy", h[order])
        np.save(out / f"{name}_rows.npy", order.astype(np.uint32))  # rows of a part fit in 32 bits
    return {
        "num_chunks": rows,
        "num_sentences": len(spans),
        "extra_sentences": len(extra),
        "python_lower_rows": len(python_lower),
        "text_chars": text_chars,
        **words.write(out),
    }


EXTRA = -1  # span start of a sentence kept in sentences_extra.arrow (stored as the dtype's maximum)


def _span_array(spans: list[tuple[int, int]], longest: int) -> np.ndarray:
    """uint16 pairs when every offset fits below 65,535, else uint32; EXTRA becomes the dtype's maximum."""
    raw = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    widest = max(longest, int(raw[:, 1].max()) if len(raw) else 0)
    dtype = np.uint16 if widest < np.iinfo(np.uint16).max else np.uint32
    raw[raw[:, 0] == EXTRA, 0] = np.iinfo(dtype).max
    return raw.astype(dtype)


class PartCache:
    """Read side of one part's cache. Immutable and memory-mapped: safe to share between threads."""

    def __init__(self, directory: Path):
        self.dir = Path(directory)
        self.meta = json.loads((self.dir / MARKER).read_text())
        self.num_chunks = int(self.meta["num_chunks"])
        self.num_sentences = int(self.meta["num_sentences"])
        chunks_file = pa.memory_map(str(self.dir / "chunks.arrow"))
        self.table = pa.ipc.open_file(chunks_file).read_all()  # zero-copy
        self._texts = self.table.column("text").chunks
        self._views = self._column_views()
        self.bounds = np.concatenate(([0], np.cumsum([len(c) for c in self.table.column(0).chunks], dtype=np.int64)))
        chunks_file.seek(0)
        base = chunks_file.read_buffer(1).address
        self._fd = os.open(self.dir / "chunks.arrow", os.O_RDONLY)
        weakref.finalize(self, os.close, self._fd)
        # Each row's text as [start, end) bytes of the file (16 bytes a row): candidate texts are then
        # gathered with one vectorised plan and one pread per run.
        self._text_start = np.empty(self.num_chunks, dtype=np.int64)
        self._text_end = np.empty(self.num_chunks, dtype=np.int64)
        for b, c in enumerate(self.table.column("text").chunks):
            if len(c) == 0:
                continue
            offsets_at, data_at = c.buffers()[1].address - base + 4 * c.offset, c.buffers()[2].address - base if c.buffers()[2] is not None else 0
            offs = np.frombuffer(os.pread(self._fd, 4 * (len(c) + 1), offsets_at), dtype=np.int32).astype(np.int64) + data_at
            self._text_start[self.bounds[b] : self.bounds[b + 1]] = offs[:-1]
            self._text_end[self.bounds[b] : self.bounds[b + 1]] = offs[1:]
        self.text_reads = TEXT_READS
        self.sentence_starts = mapped(self.dir / "sentence_starts.npy")
        self.spans = mapped(self.dir / "sentence_spans.npy")
        self._extra_marker = int(np.iinfo(self.spans.dtype).max)
        self.python_lower = np.load(self.dir / "python_lower_rows.npy")
        # find_rows' column -> (sorted hashes of its values, the row of each)
        self._hashed = {c: (mapped(self.dir / f"{c}_hash.npy"), mapped(self.dir / f"{c}_rows.npy")) for c in ("chunk_id", "doc_id")}
        self.words = WordPostings(self.dir, self.num_chunks)

    def rows(self, rows: list[int], columns: list[str]) -> dict[str, list]:
        """Columns of the chunks at local `rows` (in that order) as Python lists, equal to Arrow's `take`.

        No Arrow calls: each releases the GIL, and on two threads every release hands it over, which
        made a chunk_read on two threads slower than on one (benchmarks/tools_concurrency.py)."""
        at = np.asarray(rows, dtype=np.int64)
        if len(at) and (int(at.min()) < 0 or int(at.max()) >= self.num_chunks):
            raise IndexError(f"rows out of range for a part of {self.num_chunks} chunks: {rows}")
        batch = positions(self.bounds, at, side="right") - 1
        where = list(zip(batch.tolist(), (at - self.bounds[batch]).tolist()))
        return {c: self._column_values(c, where) for c in columns}

    def _column_values(self, column: str, where: list[tuple[int, int]]) -> list:
        views = self._views[column]
        out: list = []
        for b, r in where:
            kind, values, data, valid, offset = views[b]
            if valid is not None and not (valid[(offset + r) >> 3] >> ((offset + r) & 7)) & 1:
                out.append(None)
            elif kind == "str":
                out.append(str(data[values[r] : values[r + 1]], "utf-8"))
            else:
                out.append(values[r].item())
        return out

    def _column_views(self) -> dict[str, list[tuple]]:
        """Per column, per record batch: (kind, offsets or values, string bytes, validity, array offset)."""
        views: dict[str, list[tuple]] = {}
        for name in self.table.column_names:
            per_batch = []
            for c in self.table.column(name).chunks:
                validity, offsets_or_values, *rest = c.buffers()
                valid = np.frombuffer(validity, dtype=np.uint8) if validity is not None and c.null_count else None
                if pa.types.is_string(c.type):
                    offsets = np.frombuffer(offsets_or_values, dtype=np.int32)[c.offset : c.offset + len(c) + 1]
                    data = memoryview(rest[0]) if rest[0] is not None else memoryview(b"")
                    per_batch.append(("str", offsets, data, valid, c.offset))
                else:  # CHUNK_SCHEMA's other columns are integers
                    values = np.frombuffer(offsets_or_values, dtype=c.type.to_pandas_dtype())[c.offset : c.offset + len(c)]
                    per_batch.append(("int", values, None, valid, c.offset))
            views[name] = per_batch
        return views

    def _read_texts(self, rows: np.ndarray) -> tuple[pa.Array, np.ndarray]:
        """(texts of the runs of rows holding ascending local `rows`, each wanted row's position there),
        read with os.pread; rows within READ_GAP bytes in one record batch share one read."""
        starts, ends = self._text_start[rows], self._text_end[rows]
        batch = positions(self.bounds, rows, side="right")
        cut = np.flatnonzero((starts[1:] - ends[:-1] > READ_GAP) | (batch[1:] != batch[:-1])) + 1
        first, last = rows[np.concatenate(([0], cut))], rows[np.concatenate((cut - 1, [len(rows) - 1]))]
        run_from, run_to = self._text_start[first], self._text_end[last]
        fd = self._fd
        data = b"".join(map(os.pread, itertools.repeat(fd), (run_to - run_from).tolist(), run_from.tolist()))  # the loop in C, not bytecode
        counts = last - first + 1  # rows per run, the unwanted ones between included
        run_of = np.repeat(np.arange(len(first)), counts)
        every = first[run_of] + (np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts))
        base = np.cumsum(run_to - run_from) - (run_to - run_from)  # where each run starts in `data`
        offsets = np.append(self._text_start[every] - run_from[run_of] + base[run_of], len(data))
        texts = pa.LargeStringArray.from_buffers(len(every), pa.py_buffer(offsets.astype(np.int64)), pa.py_buffer(data))
        return texts, positions(every, rows)

    def keyword_scores(self, rows: np.ndarray, terms: list[tuple[str, int]]) -> np.ndarray:
        """Σ count(k, lower(text))·n over `terms` (lowered keyword k, weight n) for ascending local `rows`."""
        scores, patterns = np.zeros(len(rows), dtype=np.int64), [(literal_regex(k), n) for k, n in terms]
        lower = pc.ascii_lower if all(k.isascii() for k, _ in terms) else pc.utf8_lower  # ASCII keywords match ASCII runs only
        for lo in range(0, len(rows), SCORE_ROWS):  # bounded buffers, however many candidates
            block = rows[lo : lo + SCORE_ROWS]
            if self.text_reads == "pread":
                texts, wanted = self._read_texts(block)
            else:  # read in place from the memory map
                texts, wanted = self._gather_texts(block), np.arange(len(block))
            lowered = lower(texts)
            for pattern, n in patterns:
                # RE2 on an escaped literal: non-overlapping left-to-right matches like str.count, in C++
                # without the GIL, several times faster than Arrow's count_substring (benchmarks/keyword_search.py).
                counts = pc.count_substring_regex(lowered, pattern).to_numpy(zero_copy_only=False).astype(np.int64)
                scores[lo : lo + len(block)] += counts[wanted] * n
            # Rows where Arrow's lowercase differs from Python's: scored in Python, from the texts
            # already read (a `take` per row would touch far more of the mapped file).
            for j in np.flatnonzero(members(self.python_lower, block)).tolist():
                t = texts[int(wanted[j])].as_py().lower()
                scores[lo + j] = sum(t.count(k) * n for k, n in terms)
        return scores

    def _gather_texts(self, rows: np.ndarray) -> pa.Array:
        """The texts of ascending local `rows`, copied out of the mapped file (a take per record batch)."""
        batch = positions(self.bounds, rows, side="right") - 1
        cuts = np.flatnonzero(np.diff(batch)) + 1
        pieces = [self._texts[b[0]].take(pa.array(r - self.bounds[b[0]])) for b, r in zip(np.split(batch, cuts), np.split(rows, cuts))]
        return pieces[0] if len(pieces) == 1 else pa.concat_arrays(pieces)

    def keyword_counts(self, lowered_keyword: str) -> tuple[np.ndarray, np.ndarray, int]:
        """(ascending local rows, their counts > 0, rows whose text was read) of one lowered keyword."""
        if split_keyword(lowered_keyword)[0]:  # inside one word: counted from the words alone
            return (*self.words.keyword_counts(lowered_keyword), 0)
        rows = self.candidate_rows([lowered_keyword])
        c = self.keyword_scores(rows, [(lowered_keyword, 1)])
        hit = c > 0
        return rows[hit], c[hit], len(rows)

    def candidate_rows(self, keywords: list[str]) -> np.ndarray:
        """Ascending local rows that may contain any of the (lowered) keywords."""
        found = []
        for kw in keywords:
            whole, conditions = split_keyword(kw)
            rows = self.words.keyword_counts(kw)[0] if whole else self.words.candidates(conditions)
            if rows is None:  # nothing narrows this keyword: every row
                return np.arange(self.num_chunks, dtype=np.int64)
            found.append(rows)
        if not found:
            return np.zeros(0, dtype=np.int64)
        return found[0] if len(found) == 1 else np.unique(np.concatenate(found))

    def sentence_texts(self, rows: list[int]) -> list[str]:
        """Texts of the sentences at local `rows`, cut out of their chunks' text."""
        rows_arr = np.asarray(rows, dtype=np.int64)
        owners = (positions(self.sentence_starts, rows_arr, side="right") - 1).tolist()
        wanted = sorted(set(owners))
        by_owner = dict(zip(wanted, self.rows(wanted, ["text"])["text"]))
        spans = self.spans[rows_arr].tolist()  # one gather, not an element read per row
        return [self._extra[end] if start == self._extra_marker else by_owner[o][start:end] for (start, end), o in zip(spans, owners)]

    @cached_property
    def _extra(self) -> list[str]:
        """The sentences kept verbatim (not substrings of their chunk), read on first use."""
        return pa.ipc.open_file(pa.memory_map(str(self.dir / "sentences_extra.arrow"))).read_all().column("text").to_pylist()

    def find_rows(self, column: str, values: list[str]) -> dict[str, list[int]]:
        """Local rows whose `column` (chunk_id or doc_id) equals each value present."""
        hashes, order = self._hashed[column]
        h = id_hash(values)
        lo, hi = positions(hashes, h, side="left"), positions(hashes, h, side="right")
        wanted = {v: [int(r) for r in order[a:b]] for v, a, b in zip(values, lo.tolist(), hi.tolist()) if b > a}
        if not wanted:  # the usual case for all parts but one: no rows read
            return {}
        every = sorted({r for rs in wanted.values() for r in rs})
        actual = dict(zip(every, self.rows(every, [column])[column]))  # rule out hash collisions
        out = {v: [r for r in rs if actual[r] == v] for v, rs in wanted.items()}
        return {v: rs for v, rs in out.items() if rs}
