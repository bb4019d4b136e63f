"""AgenticRAG's document tools on a packed index (windows across documents, with overlap): search
returns source documents, one each, with their own titles; open and find work on a document's own
lines, each sentence once though windows repeat it; an index without the sentence sources is
refused with a clear error. Built with the pipeline's part builder and real window packer."""

from __future__ import annotations

import json

import pytest

from arag.index.packing import COVERED_SEPARATOR
from arag.index.sentences import sentence_spans
from arag.index.store import open_index
from arag.tools import DocumentSession, DocumentToolSettings, ToolContext
from arag.tools.packed_documents import keyword_documents, semantic_documents
from arag.tools.sentence_sources import MissingSentenceSourcesError
from tests.support.tiny_index import Doc, fake_encode, make_index, make_packed_index
from tests.tools.test_tools_documents import ref_of, search

LOTHAIR = [
    "Lothair II was a king of Lotharingia.",
    "He was born in the year 835.",
    "His father was the emperor Lothair I.",
    "His mother was Ermengarde of Tours.",
    "He married Teutberga in 855.",
    "The marriage produced no children.",
    "He tried for years to divorce Teutberga.",
    "Pope Nicholas I refused to annul the marriage.",
    "Lothair II travelled to Italy in 869.",
    "He died of a fever at Piacenza.",
]
SHORT = [
    ("Ermengarde of Tours", ["Ermengarde of Tours was a Frankish noblewoman.", "She died on 20 March 851."]),
    ("Teutberga", ["Teutberga was a queen of Lotharingia.", "She died in 875."]),
    ("Piacenza", ["Piacenza is a city in Emilia.", "It lies on the river Po."]),
    ("Zyzzyva", ["The zyzzyva is a weevil.", "It lives in South America."]),
    ("Gdańsk", ["Gdańsk is a port on the Baltic.", "Amber is traded there."]),
    ("Kraków", ["Kraków was a royal capital.", "Wawel castle stands above the Vistula."]),
    ("Tours", ["Tours is a city on the Loire.", "Its cathedral is Gothic."]),
]
DOCUMENTS = [{"doc_id": "s0", "title": SHORT[0][0], "text": " ".join(SHORT[0][1])}, {"doc_id": "lothair", "title": "Lothair II", "text": " ".join(LOTHAIR)}] + [
    {"doc_id": f"s{i}", "title": t, "text": " ".join(s)} for i, (t, s) in enumerate(SHORT[1:], 1)
]
TITLES = {d["doc_id"]: d["title"] for d in DOCUMENTS}


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    root = make_packed_index(tmp_path_factory.mktemp("packed") / "index", DOCUMENTS, chunk_tokens=60, chunk_overlap=15)
    with ToolContext(root, encoder=fake_encode) as c:
        yield c


def windows_of(ctx, doc_id):
    rows = ctx.store.chunk_rows(list(range(ctx.store.num_chunks)), ["doc_id"])["doc_id"]
    return [o for o, f in enumerate(rows) if doc_id in f.split(COVERED_SEPARATOR)]


def test_fixture_is_packed_with_overlap_and_a_document_over_several_windows(ctx):
    assert open_index(ctx.store.index.root).chunking_mode == "packed"
    fields = ctx.store.chunk_rows(list(range(ctx.store.num_chunks)), ["doc_id"])["doc_id"]
    assert max(len(f.split(COVERED_SEPARATOR)) for f in fields) >= 3  # windows cover several documents
    assert len(windows_of(ctx, "lothair")) >= 2
    rows = ctx.store.chunk_rows(windows_of(ctx, "lothair"), ["s_start", "s_count"])
    sentences = ctx.store.sentences_at([r for start, n in zip(rows["s_start"], rows["s_count"]) for r in range(start, start + n)])
    assert len(sentences) > len(set(sentences))  # the overlap repeats some of its sentences


def test_search_returns_source_documents_once_each_with_their_titles(ctx):
    session = DocumentSession()
    r = search(ctx, session, "Lothair II mother", "Ermengarde of Tours")
    docs = r.details["documents"]
    assert docs and len(docs) == len(set(docs)) and set(docs) <= set(TITLES)  # documents, not windows
    assert {"lothair", "s0"} <= set(docs)
    for hit, ref_id in zip(r.results, r.details["ref_ids"]):
        ref = session.refs[ref_id]
        assert hit.title == ref.title == TITLES[hit.doc_id] and COVERED_SEPARATOR not in hit.title
        assert ref.n_lines == len(sentence_spans(next(d["text"] for d in DOCUMENTS if d["doc_id"] == hit.doc_id)))
        assert ref.anchor in windows_of(ctx, hit.doc_id)
    assert f"[{ref_of(session, 'lothair')}] | title: Lothair II | document: lothair | lines 0-{len(LOTHAIR) - 1} | snippet at line " in r.text
    # The snippet's line is its line in the document, where open starts with it (over the windows' overlap).
    for ref_id, hit, start in zip(r.details["ref_ids"], r.results, r.details["snippet_lines"]):
        assert ctx.call("open", {"ref_id": ref_id, "line": start}, tracker=session).text.splitlines()[1] == f"{start}: {hit.snippets[0]}"
    # Citations name the document's own title, so citation recall credits exactly it.
    _, cited = __import__("arag.methods", fromlist=["load_method"]).load_method("agenticrag").finish_answer(f"x\nCitations: {ref_of(session, 'lothair')}", session)
    assert cited[0]["title"] == "Lothair II" and cited[0]["doc_id"] == "lothair"


def test_a_window_match_counts_only_for_the_documents_that_match(ctx):
    # "zyzzyva" is in one short document; its window covers others, which are no keyword hit.
    window = windows_of(ctx, "s3")
    assert any(len(ctx.store.chunk_rows([o], ["doc_id"])["doc_id"][0].split(COVERED_SEPARATOR)) > 1 for o in window)
    found = keyword_documents(ctx, ctx.store.keyword_top(["zyzzyva"], 10), ["zyzzyva"])
    assert [c.doc_id for c in found] == ["s3"] and found[0].title == "Zyzzyva" and found[0].sentences == ["The zyzzyva is a weevil."]
    # A sentence hit counts for its own document, its best sentence first.
    scores, sids = ctx.vectors.search(fake_encode(["Amber is traded there."]), 6)
    ranked = semantic_documents(ctx, scores, sids)
    assert ranked[0].doc_id == "s4" and ranked[0].sentences[0] == "Amber is traded there."
    assert len({c.doc_id for c in ranked}) == len(ranked)


def test_open_shows_a_document_over_two_windows_once_in_order(ctx):
    session = DocumentSession(settings=DocumentToolSettings(open_window_lines=6))
    search(ctx, session, "Lothair II king of Lotharingia")
    ref = ref_of(session, "lothair")
    first = ctx.call("open", {"ref_id": ref}, tracker=session)
    assert first.error is None and first.text.splitlines()[0].endswith(f"Viewing lines [0–5] of {len(LOTHAIR)}")
    rest = ctx.call("open", {"ref_id": ref, "line": 6}, tracker=session)
    lines = [line.split(": ", 1)[1] for r in (first, rest) for line in r.text.splitlines()[1:] if line[:1].isdigit()]
    assert lines == LOTHAIR  # every sentence once, in order, none of the neighbours'
    doc = session.documents["lothair"]
    assert len(set(doc.chunk_ids)) >= 2 and len(doc.sentence_ids) == len(set(doc.sentence_ids)) == len(LOTHAIR)
    err = ctx.call("open", {"ref_id": ref, "line": len(LOTHAIR)}, tracker=session).error
    assert err and f"0–{len(LOTHAIR) - 1}" in err


def test_find_lexical_and_semantic_inside_a_packed_document(ctx):
    session = DocumentSession(settings=DocumentToolSettings(find_context_lines=0))
    search(ctx, session, "Lothair II")
    ref = ref_of(session, "lothair")
    lexical = ctx.call("find", {"ref_id": ref, "patterns": ["piacenza", "Baltic"]}, tracker=session)
    assert lexical.error is None and "match for 'piacenza' at line 9:\n9: He died of a fever at Piacenza." in lexical.text
    assert "no match for 'Baltic'" in lexical.text  # a neighbour's sentence in the same window is not this document's
    for i, sentence in enumerate(LOTHAIR):  # every line's sentence id points at a vector of one of its copies
        semantic = ctx.call("find", {"ref_id": ref, "patterns": [sentence], "mode": "semantic"}, tracker=session)
        assert semantic.error is None and f"at line {i}:\n{i}: {sentence}" in semantic.text


def test_packed_index_without_sentence_sources_is_refused_clearly(tmp_path):
    root = make_packed_index(tmp_path / "old", DOCUMENTS, chunk_tokens=60, chunk_overlap=15, sentence_sources=False)
    with ToolContext(root, encoder=fake_encode) as c:
        r = c.call("search", {"queries": ["Lothair II"]}, tracker=DocumentSession())
        assert r.error and f"rebuild the index {root}" in r.error
        # An AgenticRAG episode fails at once with the whole reason (not the agent's tool calls).
        from arag.methods import load_method

        with pytest.raises(MissingSentenceSourcesError, match="doc_id, doc_title, doc_sentence") as info:
            load_method("agenticrag").initial_messages("q", c, DocumentSession())
        assert str(root) in str(info.value) and "pipelines.index" in str(info.value)


def test_per_document_index_without_sentence_sources_still_works(tmp_path):
    """An index of format 1 (sentence rows without their sources), per-document chunking: the
    document tools read documents from their chunks as before."""
    built = make_index(tmp_path / "v1", [Doc("a", "Alpha", [["Alpha one.", "Alpha two."], ["Alpha three."]]), Doc("b", "Beta", [["Beta one."]])], sentence_sources=False)
    manifest = json.loads((built.path / "manifest.json").read_text())
    (built.path / "manifest.json").write_text(json.dumps({**manifest, "format_version": 1}))
    with ToolContext(built.path, encoder=fake_encode) as c:
        session = DocumentSession()
        r = search(c, session, "Alpha")
        ref = ref_of(session, "a")
        assert session.refs[ref].n_lines == 3 and session.refs[ref].title == "Alpha"
        assert "2: Alpha three." in c.call("open", {"ref_id": ref}, tracker=session).text
        assert "at line 1" in c.call("find", {"ref_id": ref, "patterns": ["two"]}, tracker=session).text
        assert r.details["documents"][0] == "a"
