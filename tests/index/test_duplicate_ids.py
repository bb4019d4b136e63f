"""The build's duplicate chunk id check: DuckDB over the parts' chunk files, memory bounded (it
spills inside the index folder and cleans up), only the duplicates come back."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from arag.index.build import find_duplicate_chunk_ids
from arag.index.layout import IndexLayout
from arag.index.parts import CHUNK_SCHEMA, PartRecord


def write_chunks(layout: IndexLayout, part: int, ids: list[str]) -> PartRecord:
    n = len(ids)
    table = pa.table({"chunk_id": ids, "doc_id": ids, "title": ["t"] * n, "position": [0] * n, "text": ["x"] * n, "n_tokens": [1] * n}, schema=CHUNK_SCHEMA)
    pq.write_table(table, layout.chunks(part), row_group_size=50_000)
    return PartRecord(part=part, input="c.jsonl", num_documents=n, num_chunks=n, num_sentences=0, num_rejected=0, seconds=0.0)


def test_duplicates_across_parts_are_found_within_a_small_memory_limit(tmp_path):
    layout = IndexLayout(tmp_path / "idx")
    layout.make_dirs()
    per_part = 150_000
    records = [write_chunks(layout, p, [f"document-with-a-long-name-{p * per_part + i:09d}#0" for i in range(per_part)]) for p in range(3)]
    records.append(write_chunks(layout, 3, ["document-with-a-long-name-000000007#0", "document-with-a-long-name-000300001#0", "new#0", "new#0", "new#0"]))
    records.append(PartRecord(part=4, input="c.jsonl", num_documents=0, num_chunks=0, num_sentences=0, num_rejected=0, seconds=0.0))  # no chunk file
    found = find_duplicate_chunk_ids(layout, records, limit=5, memory_limit="64MB")
    assert found == [("document-with-a-long-name-000000007#0", 2), ("document-with-a-long-name-000300001#0", 2), ("new#0", 3)]
    assert find_duplicate_chunk_ids(layout, records, limit=1, memory_limit="64MB") == [("document-with-a-long-name-000000007#0", 2)]
    assert find_duplicate_chunk_ids(layout, records[:3]) == []
    assert not list(layout.root.glob(".tmp-*"))  # the spill folder is gone
