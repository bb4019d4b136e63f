"""The tools' read cache of an index: memory-mapped Arrow tables built once from its Parquet files.

Why a cache: the tools need (1) the chunk text lowered by *Python's* `str.lower()` — the keyword
score is defined by it, and DuckDB's `lower()` differs on some characters (it maps 'İ' to 'i', not
'i̇', and ignores the Greek final-sigma rule) — and (2) random access by row (a chunk's text, a
sentence by its FAISS id), which zstd Parquet row groups make slow. Both live in uncompressed Arrow
IPC files that are memory-mapped, so opening is instant and nothing is copied into Python lists.

```
<cache>/chunks.arrow      ord, chunk_id, doc_id, title, position, text, n_tokens,
                          lt (Python-lowered text), s_start, s_count (its rows in sentences.arrow)
<cache>/sentences.arrow   sentence_id, text — every part's sentences, parts in manifest order
<cache>/trigram_*.npy     optional keyword candidate index (see arag.tools.trigram)
<cache>/cache.json        written last: the cache is complete iff it exists
```
Location: `<index>/tools_cache/<fingerprint>/` (fingerprint = hash of manifest.json), or under
`$ARAG_CACHE_DIR` / `~/.cache/arag/tools/` when the index directory is read-only. A cache is built
in a temporary folder and renamed into place, so concurrent builders and killed builds are safe.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from arag.index.layout import PART_SHIFT
from arag.index.store import Index
from arag.tools.trigram import TrigramIndex, build_trigram_index, choose_bits

log = logging.getLogger(__name__)

CACHE_FORMAT = 1
READ_BATCH = 8192

CHUNKS_SCHEMA = pa.schema(
    [
        ("ord", pa.int64()),
        ("chunk_id", pa.string()),
        ("doc_id", pa.string()),
        ("title", pa.string()),
        ("position", pa.int32()),
        ("text", pa.string()),
        ("n_tokens", pa.int32()),
        ("lt", pa.string()),
        ("s_start", pa.int64()),
        ("s_count", pa.int32()),
    ]
)
SENTENCES_SCHEMA = pa.schema([("sentence_id", pa.int64()), ("text", pa.string())])


class CacheBuildError(RuntimeError):
    pass


def index_fingerprint(index: Index) -> str:
    data = index.layout.manifest.read_bytes()
    return hashlib.sha256(data + f"|tools-cache-{CACHE_FORMAT}".encode()).hexdigest()[:16]


def _default_cache_roots(index: Index) -> list[Path]:
    roots = [index.root / "tools_cache"]
    env = os.environ.get("ARAG_CACHE_DIR")
    roots.append(Path(env) / "tools" if env else Path.home() / ".cache" / "arag" / "tools")
    return roots


class ChunkStore:
    """Open cache of one index. Row `ord` of chunks.arrow is the chunk's place in index order."""

    def __init__(self, directory: Path, index: Index):
        self.dir = directory
        self.meta = json.loads((directory / "cache.json").read_text())
        self.chunks: pa.Table = pa.ipc.open_file(pa.memory_map(str(directory / "chunks.arrow"))).read_all()
        self.sentences: pa.Table = pa.ipc.open_file(pa.memory_map(str(directory / "sentences.arrow"))).read_all()
        self.num_chunks = self.chunks.num_rows
        self.num_sentences = self.sentences.num_rows
        # Small numeric columns are copied once (8 bytes a chunk) for fast vectorised lookups.
        self.s_start = self.chunks.column("s_start").to_numpy()
        self.s_count = self.chunks.column("s_count").to_numpy()
        self.part_offsets: dict[int, int] = {int(k): v for k, v in self.meta["part_sentence_offsets"].items()}
        self.part_sizes: dict[int, int] = {int(k): v for k, v in self.meta["part_sentence_counts"].items()}
        self.trigrams = TrigramIndex(directory, self.meta["trigram_bits"]) if self.meta.get("trigram_bits") else None
        # Row offsets of the tables' record batches: `take` is done per batch, because Arrow's
        # ChunkedArray.take concatenates the whole column first (a full copy per call).
        self._chunk_bounds = _bounds(self.chunks)

    def take(self, column: str, ords: np.ndarray | list[int]) -> pa.Array:
        """Values of chunks-table `column` at `ords` (in that order), copying only those rows."""
        ords = np.asarray(ords, dtype=np.int64)
        col = self.chunks.column(column)
        if len(ords) == 0:
            return pa.array([], type=col.type)
        order = np.argsort(ords, kind="stable")
        sorted_ords = ords[order]
        which = np.searchsorted(self._chunk_bounds, sorted_ords, side="right") - 1
        cuts = np.flatnonzero(np.diff(which)) + 1
        pieces = []
        for lo, hi in zip(np.concatenate(([0], cuts)), np.concatenate((cuts, [len(ords)]))):
            b = int(which[lo])
            pieces.append(col.chunk(b).take(pa.array(sorted_ords[lo:hi] - self._chunk_bounds[b])))
        values = pa.concat_arrays(pieces)
        inverse = np.empty_like(order)
        inverse[order] = np.arange(len(order))
        return values.take(pa.array(inverse))

    # ---- opening / building -------------------------------------------------------------
    @classmethod
    def open(cls, index: Index, cache_dir: str | Path | None = None, trigrams: bool = True) -> "ChunkStore":
        """Open the cache of `index`, building it first if needed (logged; minutes at 1M chunks)."""
        fp = index_fingerprint(index)
        roots = [Path(cache_dir)] if cache_dir else _default_cache_roots(index)
        for root in roots:
            d = root / fp
            if (d / "cache.json").exists():
                meta = json.loads((d / "cache.json").read_text())
                if not trigrams or meta.get("trigram_bits"):
                    return cls(d, index)
        last_error: Exception | None = None
        for root in roots:
            try:
                root.mkdir(parents=True, exist_ok=True)
                d = build_cache(index, root, fp, trigrams=trigrams)
                return cls(d, index)
            except OSError as exc:  # read-only index directory: try the next place
                last_error = exc
                log.warning("cannot write the tools cache under %s (%s); trying the next place", root, exc)
        raise CacheBuildError(f"could not build the tools cache of {index.root}: {last_error}")

    # ---- row access -----------------------------------------------------------------------
    def chunk_rows(self, ords: np.ndarray | list[int], columns: list[str]) -> dict[str, list]:
        """Columns of the chunks at `ords` (in that order) as Python lists."""
        return {c: self.take(c, ords).to_pylist() for c in columns}

    def sentence_texts(self, start: int, count: int) -> list[str]:
        return self.sentences.column("text").slice(start, count).to_pylist()

    def sentence_rows(self, sentence_ids: np.ndarray) -> np.ndarray:
        """Global row in sentences.arrow of each FAISS id (part << 32 | row)."""
        sids = np.asarray(sentence_ids, dtype=np.int64)
        parts = sids >> PART_SHIFT
        rows = sids & ((1 << PART_SHIFT) - 1)
        out = np.empty(len(sids), dtype=np.int64)
        for p in np.unique(parts):
            m = parts == p
            if int(p) not in self.part_offsets or rows[m].max() >= self.part_sizes[int(p)]:
                raise KeyError(f"sentence id of part {int(p)} not in this index (stale vector file?)")
            out[m] = self.part_offsets[int(p)] + rows[m]
        return out

    def chunk_of_sentence_rows(self, rows: np.ndarray) -> np.ndarray:
        """Chunk ordinal of each global sentence row (chunks own consecutive sentence ranges)."""
        return np.searchsorted(self.s_start, rows, side="right") - 1


def _bounds(table: pa.Table) -> np.ndarray:
    lengths = [len(c) for c in table.column(0).chunks] if table.num_columns else []
    return np.concatenate(([0], np.cumsum(lengths, dtype=np.int64)))


def _runs(chunk_ids: pa.ChunkedArray) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Consecutive runs of equal chunk ids in a sentence file: (ids, starts, lengths)."""
    n = len(chunk_ids)
    if n == 0:
        return [], np.zeros(0, np.int64), np.zeros(0, np.int64)
    enc = pc.dictionary_encode(chunk_ids).combine_chunks()
    codes = enc.indices.to_numpy(zero_copy_only=False)
    starts = np.flatnonzero(np.concatenate(([True], codes[1:] != codes[:-1])))
    lengths = np.diff(np.append(starts, n))
    ids = enc.dictionary.take(pa.array(codes[starts])).to_pylist()
    return ids, starts, lengths


def _iter_batches(path: Path, columns: list[str]) -> Iterator[pa.RecordBatch]:
    yield from pq.ParquetFile(path).iter_batches(batch_size=READ_BATCH, columns=columns)


def build_cache(index: Index, root: Path, fingerprint: str, trigrams: bool = True) -> Path:
    """Build the cache of `index` into `root/<fingerprint>`; return that folder."""
    target = root / fingerprint
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root))
    log.info("building the tools cache of %s in %s", index.root, target)
    try:
        part_offsets: dict[int, int] = {}
        part_counts: dict[int, int] = {}
        total_chars = 0
        ord_ = 0
        s_global = 0
        with pa.OSFile(str(tmp / "chunks.arrow"), "wb") as cf, pa.OSFile(str(tmp / "sentences.arrow"), "wb") as sf:
            with pa.ipc.new_file(cf, CHUNKS_SCHEMA) as cw, pa.ipc.new_file(sf, SENTENCES_SCHEMA) as sw:
                for part in index.parts:
                    part_offsets[part.part] = s_global
                    n_sent = 0
                    run_ids: list[str] = []
                    run_starts = run_lengths = np.zeros(0, np.int64)
                    if part.num_sentences:
                        run_ids, run_starts, run_lengths = _runs(pq.read_table(part.sentences, columns=["chunk_id"]).column("chunk_id"))
                        for batch in _iter_batches(part.sentences, ["sentence_id", "text"]):
                            sids = batch.column("sentence_id").to_numpy()
                            expected = (part.part << PART_SHIFT) + n_sent + np.arange(len(sids), dtype=np.int64)
                            if not np.array_equal(sids, expected):
                                raise CacheBuildError(f"{part.sentences}: sentence ids are not part<<32|row; cannot map FAISS ids to rows")
                            sw.write_batch(pa.record_batch([batch.column("sentence_id"), batch.column("text")], schema=SENTENCES_SCHEMA))
                            n_sent += len(sids)
                    part_counts[part.part] = n_sent
                    run = 0  # next sentence run; runs follow the chunks' order
                    if part.num_chunks:
                        for batch in _iter_batches(part.chunks, ["chunk_id", "doc_id", "title", "position", "text", "n_tokens"]):
                            ids = batch.column("chunk_id").to_pylist()
                            texts = batch.column("text").to_pylist()
                            s_start = np.empty(len(ids), np.int64)
                            s_count = np.zeros(len(ids), np.int32)
                            for i, cid in enumerate(ids):
                                if run < len(run_ids) and run_ids[run] == cid:
                                    s_start[i] = s_global + run_starts[run]
                                    s_count[i] = run_lengths[run]
                                    run += 1
                                else:  # a chunk without sentences owns an empty range
                                    s_start[i] = s_global + (run_starts[run] if run < len(run_ids) else n_sent)
                            lowered = [t.lower() for t in texts]
                            total_chars += sum(len(t) for t in lowered)
                            cols = [pa.array(np.arange(ord_, ord_ + len(ids), dtype=np.int64))]
                            cols += [batch.column(c) for c in ("chunk_id", "doc_id", "title", "position", "text", "n_tokens")]
                            cols += [pa.array(lowered, pa.string()), pa.array(s_start), pa.array(s_count)]
                            cw.write_batch(pa.record_batch(cols, schema=CHUNKS_SCHEMA))
                            ord_ += len(ids)
                    if run != len(run_ids):
                        raise CacheBuildError(f"{part.sentences}: sentences of chunk {run_ids[run]!r} are out of chunk order or belong to no chunk")
                    s_global += n_sent
        bits = 0
        postings = 0
        if trigrams:
            bits = choose_bits(total_chars)
            table = pa.ipc.open_file(pa.memory_map(str(tmp / "chunks.arrow"))).read_all()
            lt = table.column("lt")
            postings = build_trigram_index((lt.slice(i, 65536).to_pylist() for i in range(0, ord_, 65536)), tmp, bits)
            del table, lt
        meta = {
            "cache_format": CACHE_FORMAT,
            "index": str(index.root),
            "num_chunks": ord_,
            "num_sentences": s_global,
            "part_sentence_offsets": {str(k): v for k, v in part_offsets.items()},
            "part_sentence_counts": {str(k): v for k, v in part_counts.items()},
            "lowered_chars": total_chars,
            "trigram_bits": bits,
            "trigram_postings": postings,
            "build_seconds": round(time.perf_counter() - started, 3),
        }
        if ord_ != index.manifest.get("num_chunks", ord_):
            raise CacheBuildError(f"manifest says {index.manifest['num_chunks']} chunks, the chunk files hold {ord_}")
        (tmp / "cache.json").write_text(json.dumps(meta, indent=2) + "\n")
        if target.exists():  # an older build without trigrams, or a concurrent builder won
            old = (target / "cache.json").exists() and json.loads((target / "cache.json").read_text())
            if old and (old.get("trigram_bits") or not trigrams):
                shutil.rmtree(tmp, ignore_errors=True)
                return target
            shutil.rmtree(target, ignore_errors=True)
        try:
            os.rename(tmp, target)
        except OSError:
            if not (target / "cache.json").exists():
                raise
            shutil.rmtree(tmp, ignore_errors=True)
        log.info("tools cache built in %.1f s", time.perf_counter() - started)
        return target
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
