"""Phase 2 of a build, for one part: its sentences → vectors → its FAISS shard → its commit record.

Plain Python, no Ray. A part is done exactly when its vectors record exists, matches the part's
phase-1 record (rows, input digest), and its shard is there at the recorded size.
"""

from __future__ import annotations

import socket
import time
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np
import pyarrow.parquet as pq

from arag.index.layout import IndexLayout, missing_or_short, read_json, write_json_atomic
from arag.index.parts import PartRecord
from arag.index.vectors import build_shard, write_shard

# One encode call per this many sentences of a part: bounds the text held at once, and each call
# sorts its sentences by token count into model batches (bigger calls pad less).
DEFAULT_SENTENCES_PER_CALL = 2048


@dataclass(frozen=True)
class VectorsRecord:
    part: int
    path: str  # the shard, relative to the index root
    bytes: int  # its size
    rows: int
    dimension: int
    input_digest: str | None  # of the phase-1 part it embedded
    seconds: float
    node: str  # where it was embedded and written (a Ray node id, or "" outside Ray)
    host: str

    def to_json(self) -> dict:
        return asdict(self)


def read_vectors_record(layout: IndexLayout, part: int) -> VectorsRecord | None:
    path = layout.vectors_record(part)
    return VectorsRecord(**read_json(path)) if path.exists() else None


def committed_vectors(layout: IndexLayout, part: PartRecord) -> VectorsRecord | None:
    """The part's vectors record if it is complete and belongs to the part as committed now."""
    try:
        record = read_vectors_record(layout, part.part)
    except (ValueError, TypeError):  # a record from another version of arag: embed again
        return None
    if record is None or record.rows != part.num_sentences or record.input_digest != part.input_digest:
        return None
    return None if missing_or_short(layout.root, {record.path: record.bytes}) else record


def embed_part(layout: IndexLayout, part: PartRecord, encode: Callable[[list[str]], np.ndarray], factory: str = "Flat",
               sentences_per_call: int = DEFAULT_SENTENCES_PER_CALL, node: str = "") -> VectorsRecord:
    """Embed one part's sentences in row order and commit its shard."""
    started = time.perf_counter()
    source = pq.ParquetFile(layout.sentences(part.part))
    ids = np.empty(part.num_sentences, dtype=np.int64)
    vectors: np.ndarray | None = None
    filled = 0
    for batch in source.iter_batches(batch_size=sentences_per_call, columns=["sentence_id", "text"]):
        encoded = encode(batch.column("text").to_pylist())
        if vectors is None:
            vectors = np.empty((part.num_sentences, encoded.shape[1]), dtype=np.float32)
        n = len(encoded)
        if filled + n > part.num_sentences:
            raise ValueError(f"{layout.sentences(part.part)} has more rows than its record's {part.num_sentences}")
        vectors[filled : filled + n] = encoded
        ids[filled : filled + n] = batch.column("sentence_id").to_numpy()
        filled += n
    if vectors is None or filled != part.num_sentences:
        raise ValueError(f"{layout.sentences(part.part)} has {filled} rows, its record says {part.num_sentences}")
    target = layout.vectors(part.part)
    write_shard(build_shard(vectors, ids, factory), target)
    record = VectorsRecord(
        part=part.part,
        path=str(target.relative_to(layout.root)),
        bytes=target.stat().st_size,
        rows=filled,
        dimension=int(vectors.shape[1]),
        input_digest=part.input_digest,
        seconds=round(time.perf_counter() - started, 3),
        node=node,
        host=socket.gethostname(),
    )
    write_json_atomic(layout.vectors_record(part.part), record.to_json())
    return record
