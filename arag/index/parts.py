"""Phase 1 of a build, for one input part: read → chunk → split sentences → Parquet files, then the
part's commit record (input digest, file sizes). Plain Python, no Ray."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from arag.corpus.digest import InputDigest, PartDigest
from arag.corpus.readers import CorpusSpec, InputPart, corpus_root, part_digest, read_part
from arag.corpus.documents import Reject
from arag.index.chunking import MIN_CHUNK_TOKENS, Chunk, chunk_document, make_chunk_id
from arag.index.packing import WindowPacker, packed_chunk_id
from arag.index.layout import IndexLayout, atomic_path, file_sizes, read_json, sentence_id, write_json_atomic

CHUNK_SCHEMA = pa.schema(
    [("chunk_id", pa.string()), ("doc_id", pa.string()), ("title", pa.string()), ("position", pa.int32()), ("text", pa.string()), ("n_tokens", pa.int32())]
)
# doc_id, doc_title, doc_sentence (format version 2): what the document tools need on a packed index,
# whose chunk rows only list the documents a window covers.
SENTENCE_SCHEMA = pa.schema(
    [("sentence_id", pa.int64()), ("chunk_id", pa.string()), ("text", pa.string()), ("doc_id", pa.string()), ("doc_title", pa.string()), ("doc_sentence", pa.int32())]
)
SOURCE_COLUMNS = ("doc_id", "doc_title", "doc_sentence")
REJECT_SCHEMA = pa.schema([("source", pa.string()), ("line", pa.int64()), ("reason", pa.string()), ("raw", pa.string())])

# Rows per Parquet row group: small enough for readers to skip around, big enough to compress well.
ROW_GROUP_SIZE = 8192


PER_DOCUMENT, PACKED = "per_document", "packed"
CHUNKING_MODES = (PER_DOCUMENT, PACKED)
# The form of each mode's chunk ids as the model is told it (arag.index.chunk_ids), made by the id functions.
CHUNK_ID_FORMS = {PER_DOCUMENT: make_chunk_id("<document>", "<n>"), PACKED: packed_chunk_id("<part>", "<window>")}  # type: ignore[arg-type]


@dataclass(frozen=True)
class ChunkingSettings:
    """`index.chunking`: per_document (arag.index.chunking) or packed (arag.index.packing)."""

    mode: str = PER_DOCUMENT
    chunk_tokens: int = 1000
    chunk_overlap: int = 100
    language: str = "en"

    def __post_init__(self) -> None:
        if self.mode not in CHUNKING_MODES:
            raise ValueError(f"index.chunking must be one of {', '.join(CHUNKING_MODES)}, got {self.mode!r}")
        if self.chunk_tokens < MIN_CHUNK_TOKENS:
            raise ValueError(f"index.chunk_tokens must be at least {MIN_CHUNK_TOKENS}, got {self.chunk_tokens}")
        if self.mode == PACKED and not 0 <= self.chunk_overlap < self.chunk_tokens:
            raise ValueError(f"index.chunk_overlap must be at least 0 and less than index.chunk_tokens ({self.chunk_tokens}), got {self.chunk_overlap}")

    def identity(self) -> dict:
        out = asdict(self)
        if self.mode != PACKED:
            del out["chunk_overlap"]
        return out


@dataclass
class PartRecord:
    part: int
    input: str
    num_documents: int
    num_chunks: int
    num_sentences: int
    num_rejected: int
    seconds: float
    # What the part was read from: {"start", "end", "bytes", "digest"} (xxh3-128 of those bytes),
    # and its input file's size and modification time when it was read ("file_size", "file_mtime_ns").
    source: dict = field(default_factory=dict)
    # Every file the part wrote, relative to the index root, with its size in bytes.
    files: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict:
        return asdict(self)

    @property
    def input_digest(self) -> str | None:
        return self.source.get("digest")


CONTENT_KEYS = ("start", "end", "bytes", "digest")
STAT_KEYS = ("file_size", "file_mtime_ns")


def _source(part: InputPart, digest: PartDigest) -> dict:
    return {"start": part.start, "end": part.end, "bytes": digest.bytes, "digest": digest.digest}


def input_stat(spec: CorpusSpec, part: InputPart) -> dict:
    stat = (corpus_root(spec) / part.file).stat()
    return {"file_size": stat.st_size, "file_mtime_ns": stat.st_mtime_ns}


def same_position(part: InputPart, record: PartRecord) -> bool:
    return record.input == part.file and record.source.get("start") == part.start and record.source.get("end") == part.end


def unchanged_since_read(spec: CorpusSpec, part: InputPart, record: PartRecord) -> bool:
    """Whether the input file still has the size and mtime recorded when the part was read (one stat)."""
    if not same_position(part, record) or any(k not in record.source for k in STAT_KEYS):
        return False
    try:
        return input_stat(spec, part) == {k: record.source[k] for k in STAT_KEYS}
    except OSError:
        return False


def read_part_record(layout: IndexLayout, part: int) -> PartRecord | None:
    path = layout.part_record(part)
    return PartRecord(**read_json(path)) if path.exists() else None


def verify_part(spec: CorpusSpec, part: InputPart, record: PartRecord, rehash: bool = False) -> bool:
    """Whether a committed part was read from the bytes its input holds now: trusted on an unchanged
    size and mtime, else (or with `rehash`) hashed again and compared."""
    if not same_position(part, record):
        return False
    if not rehash and unchanged_since_read(spec, part, record):
        return True
    return _source(part, part_digest(spec, part)) == {k: record.source.get(k) for k in CONTENT_KEYS}


def discard_part(layout: IndexLayout, part: int) -> None:
    """Forget a committed part and its vectors (their records first, so no record outlives a file)."""
    for path in (layout.vectors_record(part), layout.part_record(part), layout.vectors(part), layout.chunks(part), layout.sentences(part), layout.rejects(part)):
        path.unlink(missing_ok=True)


def discard_parts_beyond(layout: IndexLayout, num_parts: int) -> list[int]:
    """Discard parts numbered `num_parts` or more (an edit can plan a file into fewer parts)."""
    extra = sorted({int(p.name[len("part-") :].split(".")[0]) for p in (layout.root / "parts").glob("part-*.json")} - set(range(num_parts)))
    for part in extra:
        discard_part(layout, part)
    return extra


class _RowBuffer:
    def __init__(self, writer: pq.ParquetWriter, schema: pa.Schema):
        self.writer, self.schema = writer, schema
        self.rows: list[tuple] = []  # not written yet
        self.total = 0

    def add(self, *values) -> None:
        self.rows.append(values)
        self.total += 1
        if len(self.rows) >= ROW_GROUP_SIZE:
            self.flush()

    def flush(self) -> None:
        if self.rows:
            self.writer.write_table(pa.table(list(zip(*self.rows)), schema=self.schema))  # rows to columns
            self.rows = []


def build_part(spec: CorpusSpec, part: InputPart, settings: ChunkingSettings, layout: IndexLayout, rehash: bool = False) -> PartRecord:
    """Write one part's chunks, sentences and rejects, then its commit record (an unchanged committed part is kept)."""
    return build_or_keep_part(spec, part, settings, layout, rehash)[0]


def build_or_keep_part(spec: CorpusSpec, part: InputPart, settings: ChunkingSettings, layout: IndexLayout, rehash: bool = False) -> tuple[PartRecord, bool]:
    """`build_part`, and whether the part was built now (False: the committed part was kept)."""
    committed = read_part_record(layout, part.part)
    if committed is not None:
        if verify_part(spec, part, committed, rehash):
            return committed, False
        discard_part(layout, part.part)
    started = time.perf_counter()
    stat = input_stat(spec, part)  # before reading: an edit made while reading shows as a change next time
    num_documents = 0
    digest = InputDigest()
    with (  # the writers close before their files are committed
        atomic_path(layout.chunks(part.part)) as chunks_tmp,
        atomic_path(layout.sentences(part.part)) as sentences_tmp,
        atomic_path(layout.rejects(part.part)) as rejects_tmp,
        pq.ParquetWriter(chunks_tmp, CHUNK_SCHEMA, compression="zstd") as cw,
        pq.ParquetWriter(sentences_tmp, SENTENCE_SCHEMA, compression="zstd") as sw,
        pq.ParquetWriter(rejects_tmp, REJECT_SCHEMA, compression="zstd") as rw,
    ):
        chunks, sentences, rejects = _RowBuffer(cw, CHUNK_SCHEMA), _RowBuffer(sw, SENTENCE_SCHEMA), _RowBuffer(rw, REJECT_SCHEMA)

        def write(done: list[Chunk]) -> None:
            for c in done:
                chunks.add(c.chunk_id, c.doc_id, c.title, c.position, c.text, c.n_tokens)
                for s, src in zip(c.sentences, c.sources, strict=True):
                    sentences.add(sentence_id(part.part, sentences.total), c.chunk_id, s, src.doc_id, src.title, src.ordinal)

        packer = WindowPacker(part.part, settings.chunk_tokens, settings.chunk_overlap, settings.language) if settings.mode == PACKED else None
        for item in read_part(spec, part, digest):
            if isinstance(item, Reject):
                rejects.add(item.source, item.line, item.reason, item.raw)
                continue
            # per_document: the document's chunks; packed: the windows it completed (None: no sentences)
            doc_chunks = packer.add(item) if packer is not None else (chunk_document(item, settings.chunk_tokens, settings.language) or None)
            if doc_chunks is None:
                rejects.add(item.source, item.line, "no sentences found in the text", item.text[: Reject.MAX_RAW_CHARS])
                continue
            num_documents += 1
            write(doc_chunks)
        if packer is not None:
            write(packer.finish())  # the part ends the last window
        for buf in (chunks, sentences, rejects):
            buf.flush()
    record = PartRecord(
        part=part.part,
        input=part.file,
        num_documents=num_documents,
        num_chunks=chunks.total,
        num_sentences=sentences.total,
        num_rejected=rejects.total,
        seconds=round(time.perf_counter() - started, 3),
        source={**_source(part, digest.result()), **stat},
        files=file_sizes(layout.root, [layout.chunks(part.part), layout.sentences(part.part), layout.rejects(part.part)]),
    )
    write_json_atomic(layout.part_record(part.part), record.to_json())
    return record, True
