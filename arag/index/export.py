"""An index's chunks as plain JSON, for tools outside arag that read a chunk list: every chunk as
{"id": ..., "text": ...} in index order (parts, then rows), the order in which ties between equal
scores break."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Iterator

from arag.index.layout import atomic_path


def index_chunks(index_dir: str | Path) -> Iterator[tuple[str, str]]:
    import pyarrow.parquet as pq

    from arag.index.store import open_index

    for path in open_index(index_dir).chunk_files:
        table = pq.read_table(path, columns=["chunk_id", "text"])
        yield from zip(table.column("chunk_id").to_pylist(), table.column("text").to_pylist())


def write_chunks_json(chunks: Iterable[tuple[object, str]], path: str | Path) -> int:
    """Write chunks as [{"id": str, "text": ...}] in order, atomically; returns how many."""
    rows = [{"id": str(cid), "text": text} for cid, text in chunks]
    with atomic_path(Path(path)) as tmp:
        tmp.write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
    return len(rows)
