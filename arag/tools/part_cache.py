"""The tools' read cache of ONE index part, built from that part's Parquet files by a plain function.

Why a cache: the tools need random access by row (a chunk's text, a sentence by its FAISS id, a
chunk by its id), which zstd Parquet row groups of 8,192 rows make slow, and candidate narrowing
for keyword search, whose score is defined on *Python's* `str.lower()` (DuckDB's `lower()`
differs on some characters). The cache stores the text once, compressed in small blocks, so it
stays within ~1.1× the chunk text on disk, and everything is memory-mapped: opening is instant
and memory does not grow with the corpus.

```
<part cache>/chunks.arrow         Arrow IPC file, zstd, record batches of BLOCK_ROWS chunks:
                                  chunk_id, doc_id, title, position, text, n_tokens (one batch is
                                  read and decompressed per access: ~0.1 ms)
            sentence_starts.npy   int64, chunks+1: chunk r owns sentence rows [starts[r], starts[r+1])
            sentence_spans.npy    int32 (sentences, 2): each sentence as [start, end) characters of
                                  its chunk's text; start = -1: end is its row in sentences_extra.arrow
            sentences_extra.arrow text of sentences that are not a substring of their chunk (rare)
            chunk_id_hash.npy     uint64 hash of each chunk id, sorted, and chunk_id_rows.npy (int64):
            doc_id_hash.npy       lookups by id without holding the ids in memory (same for doc ids)
            trigram_*             keyword candidates (arag.tools.ngrams)
            cache.json            written last: the cache is complete iff it exists; it names the
                                  Parquet files' sizes and mtimes, so a rewritten part is noticed
```
A cache is written in a temporary folder beside its target and renamed into place, so concurrent
builders and killed builds are safe.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from arag.index.layout import PART_SHIFT
from arag.index.parts import CHUNK_SCHEMA
from arag.tools.ngrams import Postings, PostingsWriter

CACHE_FORMAT = 2
MARKER = "cache.json"
# Chunks per compressed block: 32 (~32 KB of text) compresses wiki text to ~0.47 of its size and
# decompresses in ~0.15 ms; bigger blocks compress a little better and make every access slower.
BLOCK_ROWS = 32
ZSTD_LEVEL = 9
READ_BATCH = 4096
EXTRA_SCHEMA = pa.schema([("text", pa.string())])


class CacheBuildError(RuntimeError):
    pass


def source_stamp(chunks: Path, sentences: Path) -> dict:
    """What the cache was built from: the Parquet files' sizes and modification times."""
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
    return meta.get("cache_format") == CACHE_FORMAT and meta.get("source") == source_stamp(chunks, sentences)


def hash64(values: list[str]) -> np.ndarray:
    """A stable 64-bit hash of each string (for id lookups; collisions are checked on read)."""
    return np.fromiter(
        (int.from_bytes(hashlib.blake2b(v.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little") for v in values),
        dtype=np.uint64,
        count=len(values),
    )


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
    """Build the cache of one part (its chunks and sentences Parquet) into `target`; return it.

    Plain Python, one pass over each file, memory ~0.6× the part's text (the bitmaps being built).
    An existing complete cache of the same files is kept as is.
    """
    chunks, sentences, target = Path(chunks), Path(sentences), Path(target)
    if is_valid(target, chunks, sentences):
        return target
    started = time.perf_counter()
    stamp = source_stamp(chunks, sentences)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=target.parent))
    try:
        meta = _write(chunks, sentences, part, tmp)
        meta.update(cache_format=CACHE_FORMAT, part=part, source=stamp, build_seconds=round(time.perf_counter() - started, 3))
        (tmp / MARKER).write_text(json.dumps(meta, indent=2) + "\n")
        _fsync_tree(tmp)
        if target.exists():
            if is_valid(target, chunks, sentences):  # a concurrent builder finished first
                shutil.rmtree(tmp, ignore_errors=True)
                return target
            shutil.rmtree(target, ignore_errors=True)  # stale: built from older files
        try:
            os.rename(tmp, target)
        except OSError:
            if not is_valid(target, chunks, sentences):
                raise
            shutil.rmtree(tmp, ignore_errors=True)
        return target
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _write(chunks: Path, sentences: Path, part: int, out: Path) -> dict:
    options = pa.ipc.IpcWriteOptions(compression=pa.Codec("zstd", compression_level=ZSTD_LEVEL))
    postings = PostingsWriter()
    starts: list[int] = [0]
    spans: list[tuple[int, int]] = []
    extra: list[str] = []
    id_hashes: list[np.ndarray] = []
    doc_hashes: list[np.ndarray] = []
    sentence_iter = _sentences(sentences, part)
    pending = next(sentence_iter, None)
    rows = text_chars = 0
    with pa.OSFile(str(out / "chunks.arrow"), "wb") as sink, pa.ipc.new_file(sink, CHUNK_SCHEMA, options=options) as writer:
        batches = pq.ParquetFile(chunks).iter_batches(batch_size=READ_BATCH, columns=CHUNK_SCHEMA.names) if chunks.exists() else []
        for batch in batches:
            batch = pa.RecordBatch.from_arrays([batch.column(n).cast(f.type) for n, f in zip(CHUNK_SCHEMA.names, CHUNK_SCHEMA)], schema=CHUNK_SCHEMA)
            ids = batch.column("chunk_id").to_pylist()
            texts = batch.column("text").to_pylist()
            for cid, text in zip(ids, texts):
                pos = 0
                while pending is not None and pending[0] == cid:
                    s = pending[1]
                    at = text.find(s, pos)
                    if at < 0:  # not a substring of its chunk: kept verbatim
                        spans.append((-1, len(extra)))
                        extra.append(s)
                    else:
                        spans.append((at, at + len(s)))
                        pos = at + len(s)
                    pending = next(sentence_iter, None)
                starts.append(len(spans))
            postings.add([t.lower() for t in texts], rows)
            text_chars += sum(map(len, texts))
            for lo in range(0, batch.num_rows, BLOCK_ROWS):
                writer.write_batch(batch.slice(lo, BLOCK_ROWS))
            id_hashes.append(hash64(ids))
            doc_hashes.append(hash64(batch.column("doc_id").to_pylist()))
            rows += batch.num_rows
    if pending is not None:
        raise CacheBuildError(f"{sentences}: sentences of chunk {pending[0]!r} are out of chunk order or belong to no chunk")
    np.save(out / "sentence_starts.npy", np.asarray(starts, dtype=np.int64))
    np.save(out / "sentence_spans.npy", np.asarray(spans, dtype=np.int32).reshape(-1, 2))
    if extra:
        with pa.OSFile(str(out / "sentences_extra.arrow"), "wb") as sink, pa.ipc.new_file(sink, EXTRA_SCHEMA) as writer:
            writer.write_batch(pa.record_batch([pa.array(extra, pa.string())], schema=EXTRA_SCHEMA))
    for name, hashes in (("chunk_id", id_hashes), ("doc_id", doc_hashes)):
        h = np.concatenate(hashes) if hashes else np.zeros(0, np.uint64)
        order = np.argsort(h, kind="stable")
        np.save(out / f"{name}_hash.npy", h[order])
        np.save(out / f"{name}_rows.npy", order.astype(np.int64))
    n_postings = postings.write(out)
    return {"num_chunks": rows, "num_sentences": len(spans), "extra_sentences": len(extra), "text_chars": text_chars, "trigram_postings": n_postings}


def _fsync_tree(directory: Path) -> None:
    for p in directory.iterdir():
        with open(p, "rb") as f:
            os.fsync(f.fileno())
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class PartCache:
    """Read side of one part's cache. Safe to share between threads (readers are per thread)."""

    def __init__(self, directory: Path):
        self.dir = Path(directory)
        self.meta = json.loads((self.dir / MARKER).read_text())
        self.num_chunks = int(self.meta["num_chunks"])
        self.num_sentences = int(self.meta["num_sentences"])
        self.sentence_starts = np.load(self.dir / "sentence_starts.npy", mmap_mode="r")
        self.spans = np.load(self.dir / "sentence_spans.npy", mmap_mode="r")
        self.id_hash = np.load(self.dir / "chunk_id_hash.npy", mmap_mode="r")
        self.id_rows = np.load(self.dir / "chunk_id_rows.npy", mmap_mode="r")
        self.doc_hash = np.load(self.dir / "doc_id_hash.npy", mmap_mode="r")
        self.doc_rows = np.load(self.dir / "doc_id_rows.npy", mmap_mode="r")
        self.postings = Postings(self.dir)
        self._local = threading.local()
        self._extra: list[str] | None = None

    def _reader(self) -> pa.ipc.RecordBatchFileReader:
        # One reader per thread: a reader keeps read state, and opening one only reads the footer.
        reader = getattr(self._local, "reader", None)
        if reader is None:
            reader = self._local.reader = pa.ipc.open_file(pa.memory_map(str(self.dir / "chunks.arrow")))
        return reader

    def block(self, b: int) -> pa.RecordBatch:
        """Chunk rows [b·BLOCK_ROWS, (b+1)·BLOCK_ROWS), decompressed."""
        return self._reader().get_batch(b)

    def rows(self, rows: list[int], columns: list[str]) -> dict[str, list]:
        """Columns of the chunks at local `rows` (in that order) as Python lists."""
        out: dict[str, list] = {c: [None] * len(rows) for c in columns}
        by_block: dict[int, list[int]] = {}
        for i, r in enumerate(rows):
            by_block.setdefault(r // BLOCK_ROWS, []).append(i)
        for b, idx in by_block.items():
            batch = self.block(b)
            for c in columns:
                values = batch.column(c).to_pylist()
                for i in idx:
                    out[c][i] = values[rows[i] - b * BLOCK_ROWS]
        return out

    def sentence_texts(self, rows: list[int]) -> list[str]:
        """Texts of the sentences at local `rows`, cut out of their chunks' text."""
        rows_arr = np.asarray(rows, dtype=np.int64)
        owners = (np.searchsorted(self.sentence_starts, rows_arr, side="right") - 1).tolist()
        texts = self.rows(sorted(set(owners)), ["text"])["text"]
        by_owner = dict(zip(sorted(set(owners)), texts))
        out = []
        for r, o in zip(rows_arr.tolist(), owners):
            start, end = (int(x) for x in self.spans[r])
            out.append(self._extra_text(end) if start < 0 else by_owner[o][start:end])
        return out

    def _extra_text(self, i: int) -> str:
        if self._extra is None:
            table = pa.ipc.open_file(pa.memory_map(str(self.dir / "sentences_extra.arrow"))).read_all()
            self._extra = table.column("text").to_pylist()
        return self._extra[i]

    def find_rows(self, column: str, values: list[str]) -> dict[str, list[int]]:
        """Local rows whose `column` (chunk_id or doc_id) equals each value; values not present are absent."""
        hashes, order = (self.id_hash, self.id_rows) if column == "chunk_id" else (self.doc_hash, self.doc_rows)
        h = hash64(values)
        lo, hi = np.searchsorted(hashes, h, side="left"), np.searchsorted(hashes, h, side="right")
        wanted = {v: [int(r) for r in order[a:b]] for v, a, b in zip(values, lo.tolist(), hi.tolist()) if b > a}
        if not wanted:
            return {}
        every = sorted({r for rs in wanted.values() for r in rs})
        actual = dict(zip(every, self.rows(every, [column])[column]))  # rule out hash collisions
        out = {v: [r for r in rs if actual[r] == v] for v, rs in wanted.items()}
        return {v: rs for v, rs in out.items() if rs}
