"""arag.index.export: an index's chunks as [{"id", "text"}] JSON in index order (the chunks.json that
the authors' A-RAG code loads, made by benchmarks/official_side_by_side.py)."""

from __future__ import annotations

import json

from arag.index.export import index_chunks, write_chunks_json
from tests.support.agent_index import AGENT_DOCS
from tests.support.tiny_index import make_index


def test_export_is_the_chunk_list_in_index_order(tmp_path):
    built = make_index(tmp_path / "index", AGENT_DOCS)
    out = tmp_path / "official" / "chunks.json"
    assert write_chunks_json(index_chunks(built.path), out) == len(built.chunk_ids)
    rows = json.loads(out.read_text(encoding="utf-8"))
    assert [set(r) for r in rows] == [{"id", "text"}] * len(rows)  # the dict form the authors' loader reads (benchmarks/official_side_by_side.py)
    assert [r["id"] for r in rows] == built.chunk_ids  # index order: ties break the same way
    assert [r["text"] for r in rows] == built.chunk_texts
    assert not list(out.parent.glob("*.tmp"))


def test_export_writes_ids_as_strings(tmp_path):
    out = tmp_path / "chunks.json"
    write_chunks_json([(7, "seven"), ("p0-1", "one")], out)
    assert json.loads(out.read_text()) == [{"id": "7", "text": "seven"}, {"id": "p0-1", "text": "one"}]
