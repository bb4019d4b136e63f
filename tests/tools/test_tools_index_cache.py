"""The tools cache: one per part, built once, reused, rebuilt when a part's files change, placed
elsewhere when the index directory is read-only."""

from __future__ import annotations

import json
import tempfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from arag.index.store import IncompleteIndexError, IndexNotFoundError
from arag.tools import TOOL_SETS, TOOLS, ToolContext, get_tool, tool_schemas
from arag.index.keyword import part_cache, words
from arag.tools.index_cache import manifest_hash, part_cache_dir

from tests.support.synthetic_index import write_merged_index, write_synthetic_index
from tests.support.tiny_index import EDGE_DOCS, Doc, fake_encode, make_index


def test_cache_is_built_once_per_part_and_reused(tmp_path):
    built = make_index(tmp_path / "index", EDGE_DOCS)  # parts 0, 1 and 3
    with ToolContext(built.path, encoder=fake_encode) as ctx:
        dirs = ctx.store.dirs
        assert dirs == [part_cache_dir(built.path, p) for p in (0, 1, 3)]
        assert all((d / "cache.json").exists() for d in dirs)
        assert ctx.store.num_chunks == len(built.chunk_ids) and ctx.store.num_sentences == len(built.sentence_ids)
    mtimes = [(d / "chunks.arrow").stat().st_mtime_ns for d in dirs]
    with ToolContext(built.path, encoder=fake_encode) as ctx:
        assert ctx.store.dirs == dirs and [(d / "chunks.arrow").stat().st_mtime_ns for d in dirs] == mtimes
    assert not [p for p in dirs[0].parent.iterdir() if p.name.startswith(".tmp-")]


def test_cache_is_small_text_stored_once(tmp_path):
    docs = [Doc(str(i), f"T{i}", [[f"Sentence {i} number {j} about the topic of {i * j}." for j in range(8)] for _ in range(3)]) for i in range(200)]
    built = make_index(tmp_path / "index", docs)
    with ToolContext(built.path) as ctx:
        (cache,) = ctx.store.dirs
        meta = json.loads((cache / "cache.json").read_text())
        assert meta["extra_sentences"] == 0  # every sentence is a span of its chunk, not a copy
        text = sum(len(t.encode()) for t in built.chunk_texts)
        sentences = sum(len(t.encode()) for t in built.sentence_texts)
        assert sentences > 0.9 * text  # so storing sentences as text would double the size
        assert (cache / "chunks.arrow").stat().st_size < 1.2 * text and (cache / "sentence_spans.npy").stat().st_size < 0.2 * text
        assert not (cache / "sentences_extra.arrow").exists()


def test_sentences_not_in_their_chunk_text_are_kept(tmp_path):
    built = make_index(tmp_path / "index", [Doc("a", "A", [["One two.", "Three four."]])], sep="\n")
    chunks = built.path / "chunks" / "part-00000.parquet"
    table = pq.read_table(chunks)
    pq.write_table(table.set_column(4, "text", [["One two. Three five."]]), chunks)  # second sentence no longer a substring
    with ToolContext(built.path, encoder=fake_encode) as ctx:
        assert ctx.store.sentences_at(range(2)) == ["One two.", "Three four."]


@pytest.mark.parametrize("long_chunk", [False, True], ids=["uint16 spans", "uint32 spans"])
def test_sentence_spans_narrow_or_wide_and_extra_sentences(tmp_path, long_chunk):
    filler = "x" * 70_000 + "." if long_chunk else "Filler."
    built = make_index(tmp_path / "index", [Doc("a", "A", [["One two.", "Three four.", filler, "Last one."]])])
    chunks = built.path / "chunks" / "part-00000.parquet"
    table = pq.read_table(chunks)
    text = table.column("text")[0].as_py().replace("Three four.", "Three five.")  # that sentence is kept verbatim
    pq.write_table(table.set_column(4, "text", [[text]]), chunks)
    with ToolContext(built.path, encoder=fake_encode) as ctx:
        (cache,) = ctx.store.dirs
        spans = np.load(cache / "sentence_spans.npy")
        assert spans.dtype == (np.uint32 if long_chunk else np.uint16)
        assert spans[1, 0] == np.iinfo(spans.dtype).max  # the marker of a sentence kept in sentences_extra.arrow
        assert ctx.store.sentences_at(range(4)) == ["One two.", "Three four.", filler, "Last one."]
        assert json.loads((cache / "cache.json").read_text())["extra_sentences"] == 1


@pytest.mark.parametrize("field, stale", [("cache_format", part_cache.CACHE_FORMAT - 1), ("unicode", "0.0.0")])
def test_a_cache_of_an_older_format_or_unicode_version_is_rebuilt(tmp_path, field, stale):
    """Which characters make a word depends on Unicode's character categories: a cache built by a
    Python with another Unicode version could split the text into other words, so it is rebuilt."""
    built = make_index(tmp_path / "index", EDGE_DOCS[:2])
    with ToolContext(built.path) as ctx:
        (cache, *_) = ctx.store.dirs
    meta = json.loads((cache / "cache.json").read_text())
    meta[field] = stale
    (cache / "cache.json").write_text(json.dumps(meta))
    with ToolContext(built.path) as ctx:
        current = part_cache.CACHE_FORMAT if field == "cache_format" else words.UNICODE_VERSION
        assert json.loads((ctx.store.dirs[0] / "cache.json").read_text())[field] == current


def test_a_rewritten_part_is_rebuilt(tmp_path):
    built = make_index(tmp_path / "index", EDGE_DOCS[:2])
    with ToolContext(built.path) as ctx:
        assert ctx.call("keyword_search", {"keywords": ["Istanbul"]}).results == []
    rebuilt = make_index(tmp_path / "index", EDGE_DOCS[:3])  # new part files, new manifest
    with ToolContext(rebuilt.path) as ctx:
        assert [h.chunk_id for h in ctx.call("keyword_search", {"keywords": ["Istanbul"]}).results] == ["2#0"]


def test_read_only_index_uses_user_cache(tmp_path, monkeypatch):
    """Writing inside the index fails (simulated: root may write anywhere) -> the user cache."""
    built = make_index(tmp_path / "index", EDGE_DOCS[:2])
    monkeypatch.setenv("ARAG_CACHE_DIR", str(tmp_path / "user-cache"))
    real_mkdtemp = tempfile.mkdtemp

    def mkdtemp(*args, dir=None, **kwargs):
        if dir is not None and str(dir).startswith(str(built.path)):
            raise PermissionError(13, "Permission denied", str(dir))
        return real_mkdtemp(*args, dir=dir, **kwargs)

    monkeypatch.setattr(part_cache.tempfile, "mkdtemp", mkdtemp)
    with ToolContext(built.path) as ctx:
        expected = tmp_path / "user-cache" / "tools" / manifest_hash(ctx.index)
        assert [d.parent for d in ctx.store.dirs] == [expected]
        assert [h.chunk_id for h in ctx.call("keyword_search", {"keywords": ["lothair"]}).results] == ["0#1"]
    assert not (built.path / "tools_cache" / "part-00000").exists()


def test_explicit_cache_dir(tmp_path):
    built = make_index(tmp_path / "index", EDGE_DOCS[:2])
    with ToolContext(built.path, cache_dir=tmp_path / "c") as ctx:
        assert ctx.store.dirs == [tmp_path / "c" / "part-00000"]
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


def test_rows_read_without_arrow_equal_arrow_take(tmp_path, monkeypatch):
    """`PartCache.rows` reads values from views of the mapped file (no Arrow call per read): the
    same values as Arrow's take, across record batches, in any order, with repeats, multi-byte
    text and a null title; rows outside the part are an error, not a wrapped-around read."""
    monkeypatch.setattr(part_cache, "READ_BATCH", 2)
    built = make_index(tmp_path / "index", EDGE_DOCS)
    chunks = sorted((built.path / "chunks").glob("*.parquet"))[0]
    table = pq.read_table(chunks)
    titles = table.column("title").to_pylist()
    titles[1] = None
    pq.write_table(table.set_column(2, "title", [titles]), chunks)
    columns = ["chunk_id", "doc_id", "title", "position", "text", "n_tokens"]
    with ToolContext(built.path, encoder=fake_encode) as ctx:
        part = ctx.store.parts[0]
        assert part.table.column("text").num_chunks > 2 and part.rows([1], ["title"]) == {"title": [None]}
        rng = np.random.default_rng(0)
        for n in (0, 1, 3, 20):
            rows = rng.integers(0, part.num_chunks, n).tolist()
            assert part.rows(rows, columns) == part.table.select(columns).take(pa.array(rows, type=pa.int64())).to_pydict(), rows
        assert any(ord(ch) > 127 for t in part.rows(list(range(part.num_chunks)), ["text"])["text"] for ch in t)
        for bad in ([-1], [part.num_chunks]):
            with pytest.raises(IndexError, match="out of range"):
                part.rows(bad, ["text"])


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


def test_the_same_chunks_in_fewer_parts_answer_the_same(tmp_path):
    """What a larger corpus.part_size_mb changes is the parts, not the answers: keyword_search's top
    chunks and scores, chunk and sentence reads, and FAISS ids mapped back to the same sentences."""
    write_synthetic_index(tmp_path / "six", num_chunks=1200, sentences_per_chunk=5, parts=6, sentence_pool=3000, log=lambda *_: None)
    write_merged_index(tmp_path / "six", tmp_path / "two", parts=2)
    with ToolContext(tmp_path / "six") as six, ToolContext(tmp_path / "two") as two:
        assert (len(six.store.parts), len(two.store.parts)) == (6, 2)
        assert (six.store.num_chunks, six.store.num_sentences) == (two.store.num_chunks, two.store.num_sentences) == (1200, 7200)
        ords = list(range(0, 1200, 37))
        rows = six.store.chunk_rows(ords, ["chunk_id", "title", "text"])
        assert rows == two.store.chunk_rows(ords, ["chunk_id", "title", "text"])
        words_of = [t.split() for t in rows["text"]]
        queries = [[w[3]] for w in words_of[:8]] + [[" ".join(w[5:7]), w[9]] for w in words_of[8:16]] + [["register"], ["item 7"]]
        for keywords in queries:
            top = six.store.keyword_top(keywords, 10)
            assert top and top == two.store.keyword_top(keywords, 10), keywords
        sentences = list(range(0, 7200, 113))
        assert six.store.sentences_at(sentences) == two.store.sentences_at(sentences)
        ids = [two.store.sentence_ids(r, 1)[0] for r in sentences]
        assert len({i >> 32 for i in ids}) == 2 and two.store.sentence_rows(np.asarray(ids)).tolist() == sentences
