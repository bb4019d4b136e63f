"""chunk_read: full texts, neighbours at document edges, the per-episode tracker, unknown ids."""

from __future__ import annotations

import pytest

from arag.index.tokens import RETRIEVED_TOKENS_TOKENIZER, count_retrieved_tokens, count_tokens
from arag.tools import ReadTracker, chunk_read


def text_of(index, cid):
    return index.chunk_texts[index.chunk_ids.index(cid)]


def test_reads_full_text_with_neighbours(edge_ctx, edge_index):
    res = edge_ctx.call("chunk_read", {"chunk_ids": ["1#1"]})
    assert res.error is None
    (hit,) = res.results
    assert (hit.chunk_id, hit.prev_id, hit.next_id, hit.title) == ("1#1", "1#0", "1#2", "Aaa")
    assert hit.snippets == [text_of(edge_index, "1#1")]
    assert text_of(edge_index, "1#1") in res.text and "previous: 1#0" in res.text and "next: 1#2" in res.text
    assert res.retrieved_tokens == count_retrieved_tokens(text_of(edge_index, "1#1"))


@pytest.mark.parametrize(
    "cid, prev_id, next_id",
    [("0#0", None, "0#1"), ("0#1", "0#0", None), ("1#2", "1#1", None), ("4#0", None, "4#1"), ("6#0", None, None), ("7#0", None, None), ("5#0", None, "5#1")],
)
def test_document_edges(edge_ctx, cid, prev_id, next_id):
    (hit,) = edge_ctx.call("chunk_read", {"chunk_ids": [cid]}).results
    assert (hit.prev_id, hit.next_id) == (prev_id, next_id)


def test_neighbours_never_cross_documents_or_parts(edge_ctx):
    # 4#1 is the last chunk of part 0 and 5#0 the first of part 1: rows next to each other in order.
    (a,) = edge_ctx.call("chunk_read", {"chunk_ids": ["4#1"]}).results
    (b,) = edge_ctx.call("chunk_read", {"chunk_ids": ["5#0"]}).results
    assert a.next_id is None and b.prev_id is None


def test_tracker_withholds_text_already_read(edge_ctx, edge_index):
    tracker = ReadTracker()
    first = edge_ctx.call("chunk_read", {"chunk_ids": ["0#0", "0#1"]}, tracker=tracker)
    assert first.retrieved_tokens == count_retrieved_tokens(text_of(edge_index, "0#0")) + count_retrieved_tokens(text_of(edge_index, "0#1"))
    second = edge_ctx.call("chunk_read", {"chunk_ids": ["0#1", "1#0"]}, tracker=tracker)
    assert [h.already_read for h in second.results] == [True, False]
    assert "Already read in this episode" in second.text and text_of(edge_index, "0#1") not in second.text
    assert second.retrieved_tokens == count_retrieved_tokens(text_of(edge_index, "1#0"))
    assert tracker.order == ["0#0", "0#1", "1#0"]
    # A new episode (new tracker) reads it again; no tracker means no memory.
    assert not edge_ctx.call("chunk_read", {"chunk_ids": ["0#1"]}, tracker=ReadTracker()).results[0].already_read
    assert not edge_ctx.call("chunk_read", {"chunk_ids": ["0#1"]}).results[0].already_read


def test_duplicates_in_one_call_are_read_once(edge_ctx, edge_index):
    res = edge_ctx.call("chunk_read", {"chunk_ids": ["2#0", "2#0"]}, tracker=ReadTracker())
    assert [h.chunk_id for h in res.results] == ["2#0"] and not res.results[0].already_read
    assert res.retrieved_tokens == count_retrieved_tokens(text_of(edge_index, "2#0"))


def test_unknown_ids_are_named(edge_ctx):
    res = edge_ctx.call("chunk_read", {"chunk_ids": ["nope", "3#0", "3#9", "'; DROP TABLE chunks; --"]})
    assert res.error is None
    assert [h.chunk_id for h in res.results] == ["3#0"]
    assert res.details["unknown_ids"] == ["nope", "3#9", "'; DROP TABLE chunks; --"]
    assert 'Unknown chunk ids (not in this index): ["nope", "3#9", "\'; DROP TABLE chunks; --"]' in res.text
    only_unknown = edge_ctx.call("chunk_read", {"chunk_ids": ["x#1"]})
    assert only_unknown.error is None and only_unknown.results == [] and only_unknown.retrieved_tokens == 0


@pytest.mark.parametrize(
    "args, fragment",
    [
        ({}, "missing required"),
        ({"chunk_ids": "0#0"}, "list of strings"),
        ({"chunk_ids": []}, "empty"),
        ({"chunk_ids": [0]}, "must be a string"),
        ({"chunk_ids": [["0#0"]]}, "must be a string"),
        ({"chunk_ids": [" "]}, "blank"),
        ({"chunk_ids": ["x" * 100_000]}, "characters long"),
        ({"chunk_ids": ["0#0"] * 1000}, "too many"),
        ({"chunk_ids": ["0#0"], "top_k": 3}, "unexpected argument"),
    ],
)
def test_bad_arguments(edge_ctx, args, fragment):
    res = edge_ctx.call("chunk_read", args)
    assert res.error is not None and fragment in res.error, res.error


def test_unknown_tool(edge_ctx):
    res = edge_ctx.call("web_search", {"q": 1})
    assert res.error and "unknown tool" in res.error
    assert edge_ctx.call(None, {}).error  # type: ignore[arg-type]


def test_retrieved_tokens_come_from_the_stored_counts(edge_ctx, edge_index, monkeypatch):
    """The chunker stores each text's token count as n_tokens, with the tokenizer its manifest
    names; chunk_read sums those only where that is the retrieved-token tokenizer (o200k_base),
    and counts the texts where the manifest names another (cl100k_base, today's chunking)."""
    def no_tokenizing(pieces):
        raise AssertionError("chunk_read tokenized a chunk whose count is stored")

    monkeypatch.setattr(chunk_read, "content_tokens", no_tokenizing)
    monkeypatch.setitem(edge_ctx.store.index.manifest["chunking"], "tokenizer", RETRIEVED_TOKENS_TOKENIZER)
    res = edge_ctx.call("chunk_read", {"chunk_ids": ["0#0", "1#1"]})
    assert res.error is None
    assert res.retrieved_tokens == count_tokens(text_of(edge_index, "0#0")) + count_tokens(text_of(edge_index, "1#1"))  # the stored column (the fixture stores cl100k counts)
    monkeypatch.undo()
    assert edge_ctx.store.index.manifest["chunking"]["tokenizer"] == "cl100k_base"
    counted: list[str] = []
    monkeypatch.setattr(chunk_read, "content_tokens", lambda pieces: counted.extend(pieces) or 7)
    assert edge_ctx.call("chunk_read", {"chunk_ids": ["1#1"]}).retrieved_tokens == 7 and counted == [text_of(edge_index, "1#1")]
