"""A text_only index (manifest `vectors: text_only`, no sentence vectors), as the keyword-only
synthetic benchmark index is written: keyword tools work, searches by meaning are refused with a
message naming the mode."""

from __future__ import annotations

import json

import pytest

from arag.index.build import TEXT_ONLY, assemble_manifest
from arag.tools import DocumentSession, ToolContext
from tests.support.synthetic_index import iter_chunk_texts, write_synthetic_index


@pytest.fixture(scope="module")
def text_only(tmp_path_factory):
    root = tmp_path_factory.mktemp("text_only") / "index"
    manifest = write_synthetic_index(root, num_chunks=300, parts=2, sentence_pool=2000, log=lambda *a: None)
    with ToolContext(root) as ctx:
        yield root, manifest, ctx


def test_the_manifest_says_text_only_and_names_no_vector_file(text_only):
    root, manifest, ctx = text_only
    assert manifest["vectors"] == TEXT_ONLY and manifest["embedding"]["dimension"] == 0
    assert all(p["vectors"] is None for p in manifest["parts"]) and not list((root / "vectors").iterdir())
    assert not any(f["path"].startswith("vectors/") for f in manifest["files"])
    assert ctx.index.vectors_mode == TEXT_ONLY and not ctx.index.has_vectors and ctx.index.vector_files == []
    assert json.loads((root / "manifest.json").read_text())["vectors"] == TEXT_ONLY


def test_keyword_tools_work_and_meaning_searches_are_refused(text_only):
    _, _, ctx = text_only
    word = ctx.call("chunk_read", {"chunk_ids": ["d0#0"]}).results[0].snippets[0].split()[0]
    found = ctx.call("keyword_search", {"keywords": [word]})
    assert found.error is None and found.results
    for tool, args in (("semantic_search", {"query": "anything"}), ("naive_embedding_search", {"query": "anything"})):
        refused = ctx.call(tool, args)
        assert refused.error == (
            f"{tool} is not available: this index was built in text_only mode (manifest vectors: text_only), without sentence "
            "vectors; search it with keyword_search, or build it with embeddings to search by meaning"
        )
        assert "traceback" not in refused.details  # the caller's problem, not a tool failure
    session = DocumentSession()
    docs = ctx.call("search", {"queries": [word]}, tracker=session)  # AgenticRAG's search: its keyword ranking only
    assert docs.error is None and docs.details["ref_ids"]
    ref = docs.details["ref_ids"][0]
    assert ctx.call("find", {"ref_id": ref, "patterns": [word]}, tracker=session).error is None
    semantic = ctx.call("find", {"ref_id": ref, "patterns": [word], "mode": "semantic"}, tracker=session)
    assert semantic.error.startswith('find with mode "semantic" is not available: this index was built in text_only mode')


def test_a_text_only_manifest_has_no_dimension(tmp_path):
    with pytest.raises(ValueError, match="a text_only index has no vectors"):
        assemble_manifest(None, None, [], [], 384, 0.0, vectors=TEXT_ONLY)
    with pytest.raises(ValueError, match="vectors must be one of embedded, text_only"):
        assemble_manifest(None, None, [], [], 0, 0.0, vectors="none")


def test_a_synthetic_index_draws_its_chunks_from_the_pool_it_is_given(tmp_path):
    pool = [f"Sentence number {i} names the river Xyzzy{i}." for i in range(50)]
    root = tmp_path / "index"
    write_synthetic_index(root, num_chunks=40, sentences_per_chunk=3, parts=2, pool=pool, log=lambda *a: None)
    generated = json.loads((root / "generated-corpus.json").read_text())
    assert (generated["pool"], generated["pool_source"]) == (50, "given")
    texts = [t for batch in iter_chunk_texts(root) for t in batch]
    assert len(texts) == 40
    for text in texts:
        drawn = [s for s in pool if s in text]
        assert 1 <= len(drawn) <= 3 and "of the register." in text  # pool sentences plus the chunk's own
    with ToolContext(root) as ctx:
        found = ctx.store.keyword_top(["Xyzzy7."], 40)
    assert len(found) == sum("xyzzy7." in t.lower() for t in texts) > 0
