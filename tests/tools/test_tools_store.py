"""The tools cache: built once, reused, rebuilt when the index changes, placed elsewhere if read-only."""

from __future__ import annotations

import json
import os

import pytest

from arag.index.store import IncompleteIndexError, IndexNotFoundError
from arag.tools import TOOL_SETS, TOOLS, ToolContext, get_tool, tool_schemas
from arag.tools.store import index_fingerprint

from conftest import EDGE_DOCS, Doc, fake_encode, make_index


def test_cache_is_built_once_and_reused(tmp_path):
    built = make_index(tmp_path / "index", EDGE_DOCS[:3])
    with ToolContext(built.path, encoder=fake_encode) as ctx:
        cache = ctx.store.dir
        assert cache.parent == built.path / "tools_cache" and (cache / "cache.json").exists()
        assert ctx.store.num_chunks == len(built.chunk_ids) and ctx.store.num_sentences == len(built.sentence_ids)
    mtime = (cache / "chunks.arrow").stat().st_mtime_ns
    with ToolContext(built.path, encoder=fake_encode) as ctx:
        assert ctx.store.dir == cache and (cache / "chunks.arrow").stat().st_mtime_ns == mtime
    assert not [p for p in cache.parent.iterdir() if p.name.startswith(".tmp-")]


def test_cache_follows_the_manifest(tmp_path):
    built = make_index(tmp_path / "index", EDGE_DOCS[:2])
    with ToolContext(built.path) as ctx:
        assert ctx.call("keyword_search", {"keywords": ["Istanbul"]}).results == []
    rebuilt = make_index(tmp_path / "index", EDGE_DOCS[:3])  # a rebuild writes a new manifest
    with ToolContext(rebuilt.path) as ctx:
        assert [h.chunk_id for h in ctx.call("keyword_search", {"keywords": ["Istanbul"]}).results] == ["2#0"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write to read-only folders")
def test_read_only_index_uses_user_cache(tmp_path, monkeypatch):
    built = make_index(tmp_path / "index", EDGE_DOCS[:2])
    monkeypatch.setenv("ARAG_CACHE_DIR", str(tmp_path / "user-cache"))
    os.chmod(built.path, 0o555)
    try:
        with ToolContext(built.path) as ctx:
            assert ctx.store.dir.parent == tmp_path / "user-cache" / "tools"
    finally:
        os.chmod(built.path, 0o755)


def test_explicit_cache_dir(tmp_path):
    built = make_index(tmp_path / "index", EDGE_DOCS[:2])
    with ToolContext(built.path, cache_dir=tmp_path / "c") as ctx:
        assert ctx.store.dir == tmp_path / "c" / index_fingerprint(ctx.index)
    assert not (built.path / "tools_cache").exists()


def test_refuses_index_without_manifest(tmp_path):
    built = make_index(tmp_path / "index", EDGE_DOCS[:2])
    (built.path / "manifest.json").unlink()
    with pytest.raises(IncompleteIndexError):
        ToolContext(built.path)
    with pytest.raises(IndexNotFoundError):
        ToolContext(tmp_path / "nothing-here")


def test_chunk_without_sentences_and_empty_part(tmp_path):
    docs = [Doc("a", "A", [["One."], [], ["Three."]]), Doc("b", "B", [["Bee."]], part=2)]
    built = make_index(tmp_path / "index", docs)
    with ToolContext(built.path, encoder=fake_encode) as ctx:
        (hit,) = ctx.call("chunk_read", {"chunk_ids": ["a#1"]}).results
        assert (hit.prev_id, hit.next_id, hit.snippets) == ("a#0", "a#2", [""])
        res = ctx.call("semantic_search", {"query": "Three", "top_k": 3})
        assert {h.chunk_id for h in res.results} == {"a#0", "a#2", "b#0"}


def test_registry_and_schemas():
    assert set(TOOL_SETS["arag_full"]) == {"keyword_search", "semantic_search", "chunk_read"}
    assert set(TOOL_SETS["arag_naive"]) == {"naive_embedding_search", "chunk_read"}
    for name, spec in TOOLS.items():
        schema = spec.schema()
        assert schema["type"] == "function" and schema["function"]["name"] == name
        assert len(schema["function"]["description"]) > 100
        params = schema["function"]["parameters"]
        assert params["type"] == "object" and set(params["required"]) <= set(params["properties"])
        json.dumps(schema)
    assert [s["function"]["name"] for s in tool_schemas("arag_full")] == ["keyword_search", "semantic_search", "chunk_read"]
    with pytest.raises(KeyError):
        get_tool("nope")
