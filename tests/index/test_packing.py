"""Packed chunking (index.chunking=packed): windows cover the corpus in order, overlap by about
chunk_overlap tokens of whole sentences, never exceed chunk_tokens, and record the documents and
titles they cover."""

from __future__ import annotations

import random

import pytest

from arag.corpus.documents import Document
from arag.index.packing import COVERED_SEPARATOR, DOCUMENT_SEPARATOR, WindowPacker
from arag.index.parts import ChunkingSettings
from arag.index.tokens import count_tokens

WORDS = ["alpha", "beta", "gamma", "delta", "river", "castle", "Lothair", "queen", "born", "died", "1875", "Tours"]


def make_corpus(seed: int, n_docs: int = 40) -> list[Document]:
    """Documents of 1-12 sentences of 3-20 words; every sentence is unique (it names its document
    and its number), so a sentence tells which document it came from."""
    rng = random.Random(seed)
    docs = []
    for d in range(n_docs):
        sentences = [f"D{d} s{k} " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 20))) + "." for k in range(rng.randint(1, 12))]
        title = f"Title {d // 2}" if d % 5 else ""  # pairs share a title; some documents have none
        docs.append(Document(doc_id=f"doc{d}", title=title, text=" ".join(sentences), source="c.jsonl", line=d + 1))
    return docs


def pack(docs: list[Document], chunk_tokens: int, chunk_overlap: int, part: int = 0):
    packer = WindowPacker(part, chunk_tokens, chunk_overlap)
    chunks = []
    for doc in docs:
        done = packer.add(doc)
        assert done is not None
        chunks += done
    return chunks + packer.finish()


def shared(prev: list[str], nxt: list[str]) -> int:
    """How many sentences at the end of `prev` start `nxt`."""
    for n in range(min(len(prev), len(nxt)), 0, -1):
        if prev[-n:] == nxt[:n]:
            return n
    return 0


def source_doc(sentence: str) -> int:
    return int(sentence.split(" ", 1)[0][1:])


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("chunk_tokens, chunk_overlap", [(120, 30), (300, 60), (1000, 100)])
def test_windows_cover_the_corpus_in_order_with_the_stated_overlap(seed, chunk_tokens, chunk_overlap):
    docs = make_corpus(seed)
    chunks = pack(docs, chunk_tokens, chunk_overlap)
    corpus_sentences = [s for d in docs for s in d.text.replace(". D", ".\nD").split("\n")]
    longest = max(count_tokens(s) for s in corpus_sentences)

    assert [c.chunk_id for c in chunks] == [f"0:{i}" for i in range(len(chunks))]
    assert [c.position for c in chunks] == list(range(len(chunks)))
    new_sentences = list(chunks[0].sentences)
    for prev, nxt in zip(chunks, chunks[1:]):
        k = shared(prev.sentences, nxt.sentences)
        assert k < len(nxt.sentences)  # every window brings new text
        new_sentences += nxt.sentences[k:]
        overlap = sum(count_tokens(s) for s in nxt.sentences[:k])
        # about chunk_overlap: whole sentences, at most the overlap (+1 token per sentence for the
        # white space they were counted with), at least the overlap less one sentence
        assert overlap <= chunk_overlap + k
        assert overlap > chunk_overlap - longest - k
    # nothing lost, nothing repeated outside the overlaps, corpus order kept
    assert new_sentences == corpus_sentences

    for c in chunks:
        assert c.n_tokens == count_tokens(c.text) <= chunk_tokens
        covered = list(dict.fromkeys(source_doc(s) for s in c.sentences))
        assert c.doc_id.split(COVERED_SEPARATOR) == [f"doc{d}" for d in covered]
        assert (c.title.split(COVERED_SEPARATOR) if c.title else []) == list(dict.fromkeys(docs[d].title for d in covered if docs[d].title))
        # the text: each covered document's span of sentences, documents a blank line apart
        segments = c.text.split(DOCUMENT_SEPARATOR)
        assert len(segments) == len(covered)
        for segment, d in zip(segments, covered):
            assert segment in docs[d].text
            assert segment == " ".join(s for s in c.sentences if source_doc(s) == d)


def test_titles_list_every_covered_document_once():
    docs = [
        Document("a", "Lothair II", "Lothair II was a king. He ruled Lotharingia.", "c", 1),
        Document("b", "Ermengarde of Tours", "Ermengarde of Tours was his mother. She died in 851.", "c", 2),
        Document("c", "Ermengarde of Tours", "A second passage on her.", "c", 3),
        Document("d", "", "An untitled passage.", "c", 4),
    ]
    (chunk,) = pack(docs, 1000, 100)
    assert chunk.doc_id == "a\nb\nc\nd"
    assert chunk.title == "Lothair II\nErmengarde of Tours"
    assert chunk.text == "Lothair II was a king. He ruled Lotharingia.\n\nErmengarde of Tours was his mother. She died in 851.\n\nA second passage on her.\n\nAn untitled passage."


def test_a_sentence_longer_than_a_window_is_cut_and_every_window_fits():
    long = " ".join(f"word{i}" for i in range(400)) + "."
    docs = [Document("a", "A", "A short start. " + long + " A short end.", "c", 1), Document("b", "B", "Next document here.", "c", 2)]
    chunks = pack(docs, 64, 16)
    assert all(c.n_tokens == count_tokens(c.text) <= 64 for c in chunks)
    text = "".join(s for c in chunks for s in c.sentences).replace(" ", "")
    for piece in ("Ashortstart.", "word0", "word399.", "Ashortend.", "Nextdocumenthere."):
        assert piece in text
    assert chunks[-1].title.endswith("B")


def test_a_document_without_sentences_is_reported_not_packed():
    packer = WindowPacker(3, 100, 10)
    assert packer.add(Document("x", "X", "   ", "c", 1)) is None
    assert packer.add(Document("y", "Y", "One sentence.", "c", 2)) == []
    (chunk,) = packer.finish()
    assert (chunk.chunk_id, chunk.doc_id, chunk.title) == ("3:0", "y", "Y")


def test_windows_are_the_same_on_every_run():
    docs = make_corpus(7)
    a, b = pack(docs, 200, 40, part=2), pack(docs, 200, 40, part=2)
    assert [(c.chunk_id, c.text) for c in a] == [(c.chunk_id, c.text) for c in b]
    assert a[0].chunk_id == "2:0"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(mode="packd"), "index.chunking must be one of per_document, packed"),
        (dict(mode="packed", chunk_tokens=100, chunk_overlap=100), "index.chunk_overlap"),
        (dict(mode="packed", chunk_overlap=-1), "index.chunk_overlap"),
        (dict(chunk_tokens=2), "index.chunk_tokens"),
    ],
)
def test_bad_chunking_settings_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ChunkingSettings(**kwargs)


def test_the_overlap_is_part_of_the_identity_only_when_packing():
    assert "chunk_overlap" not in ChunkingSettings(chunk_overlap=50).identity()
    assert ChunkingSettings(mode="packed", chunk_overlap=50).identity() != ChunkingSettings(mode="packed", chunk_overlap=60).identity()
    assert ChunkingSettings(mode="packed").identity()["mode"] == "packed"


@pytest.mark.parametrize("seed", range(3))
def test_each_sentence_records_its_source_document_and_ordinal(seed):
    """A window's sentences name their own document and their place in it; the copies in the
    overlap carry the same source; each document's sentences, by ordinal and without copies, are
    exactly its sentences in order (what AgenticRAG's document tools rebuild)."""
    from arag.index.chunking import chunk_document

    docs = make_corpus(seed)
    chunks = pack(docs, 120, 30)
    by_doc: dict[str, dict[int, str]] = {}
    copies = 0
    for c in chunks:
        assert len(c.sources) == len(c.sentences)
        covered = c.doc_id.split(COVERED_SEPARATOR)
        for s, src in zip(c.sentences, c.sources):
            assert src.doc_id in covered and source_doc(s) == int(src.doc_id[3:])
            assert src.title == docs[int(src.doc_id[3:])].title
            seen = by_doc.setdefault(src.doc_id, {})
            copies += src.ordinal in seen
            assert seen.setdefault(src.ordinal, s) == s  # a repeated ordinal is the same sentence
    assert copies > 0  # the windows overlap
    for d in docs:
        lines = by_doc[d.doc_id]
        assert sorted(lines) == list(range(len(lines)))
        assert " ".join(lines[k] for k in sorted(lines)) == d.text
    # Per-document chunks record the same: ordinals run on over a document's chunks.
    for d in docs[:5]:
        parts = chunk_document(d, 40)
        assert [src.ordinal for c in parts for src in c.sources] == list(range(sum(len(c.sentences) for c in parts)))
        assert {src.doc_id for c in parts for src in c.sources} == {d.doc_id}


def test_the_overlap_default_is_linearrags_and_the_docs_cite_it():
    """LinearRAG's config (DEEP-PolyU/LinearRAG src/config.py @ 4ecfa25) states chunk_token_size 1000
    and chunk_overlap_token_size 100; A-RAG uses LinearRAG's released chunks (A-RAG paper §3.1)."""
    from pathlib import Path

    from arag.config.schemas import IndexBuild

    repo = Path(__file__).resolve().parents[2]
    assert ChunkingSettings().chunk_overlap == 100 and WindowPacker(0).chunk_overlap == 100 and WindowPacker(0).chunk_tokens == 1000
    assert IndexBuild().chunk_overlap == 100 and IndexBuild().chunk_tokens == 1000  # the index pipeline's defaults
    schemas = (repo / "arag" / "config" / "schemas.py").read_text(encoding="utf-8")
    source = "DEEP-PolyU/LinearRAG"
    assert source in schemas and "chunk_overlap_token_size" in schemas
    docs = (repo / "docs" / "indexing.md").read_text(encoding="utf-8")
    assert source in docs and "4ecfa25170711da9a0bf2a9a923867cc0f8d3525" in docs and "chunk_overlap_token_size: int = 100" in docs
