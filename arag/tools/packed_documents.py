"""Source documents on a packed index, for AgenticRAG's document tools (docs/agents.md, "AgenticRAG").

A document is its sentences in ordinal order (arag.tools.sentence_sources), an overlap copy taken once
(its first copy's sentence id names its vector). Its windows are consecutive in one part, so from any
window covering it (the *anchor*, which search knows) the tools walk to its first and last. A sentence
hit counts for its own document; a keyword-matched window for the documents of its keyword sentences.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from arag.index.packing import COVERED_SEPARATOR
from arag.tools.base import ToolHost
from arag.tools.keyword import matching_sentences
from arag.tools.index_cache import ChunkStore

# Windows whose covered documents are read per step of the walk to a document's ends.
WALK_BLOCK = 32


@dataclass
class DocumentCandidate:
    """One document in one ranking: a window covering it, its title and the sentences that matched."""

    doc_id: str
    anchor: int  # chunk ord of a window covering the document
    title: str | None  # None: the window's own title (per-document chunks)
    sentences: list[str] | None  # None: found by keywords, the snippet is cut later


def covers(doc_field: str, doc_id: str) -> bool:
    return doc_id in doc_field.split(COVERED_SEPARATOR)


def _walk(store: ChunkStore, doc_id: str, anchor: int, step: int) -> list[int]:
    """Windows next to `anchor` (step -1: before, +1: after) still covering `doc_id`, nearest first, within its part."""
    w = int(np.searchsorted(store.chunk_offsets, anchor, side="right") - 1)
    lo, hi = int(store.chunk_offsets[w]), int(store.chunk_offsets[w + 1])
    out: list[int] = []
    at = anchor + step
    while lo <= at < hi:
        block = list(range(at, min(hi, at + WALK_BLOCK))) if step > 0 else list(range(at, max(lo - 1, at - WALK_BLOCK), -1))
        for o, field in zip(block, store.chunk_rows(block, ["doc_id"])["doc_id"]):
            if not covers(field, doc_id):
                return out
            out.append(o)
        at = block[-1] + step
    return out


def document_windows(store: ChunkStore, doc_id: str, anchor: int) -> list[int]:
    """Ords of the windows covering `doc_id` around `anchor`, in order."""
    if not covers(store.chunk_rows([anchor], ["doc_id"])["doc_id"][0], doc_id):
        raise ValueError(f"chunk {anchor} does not cover document {doc_id!r}")
    return _walk(store, doc_id, anchor, -1)[::-1] + [anchor] + _walk(store, doc_id, anchor, +1)


def load_lines(store: ChunkStore, doc_id: str, anchor: int) -> tuple[str | None, list[str], list[int], list[str]]:
    """The document's title and lines: its sentences in ordinal order, each overlap copy once, with the
    FAISS id and the window of each line's first copy (the fields of a DocumentLines)."""
    rows = store.chunk_rows(document_windows(store, doc_id, anchor), ["chunk_id", "s_start", "s_count"])
    # The windows are consecutive: their sentence rows are too.
    span = range(int(rows["s_start"][0]), int(rows["s_start"][-1]) + int(rows["s_count"][-1]))
    sources = store.sentence_sources.of_rows(span)
    owners = [cid for cid, n in zip(rows["chunk_id"], rows["s_count"]) for _ in range(int(n))]
    texts = store.sentences_at(span)
    sids = store.sentence_ids(span.start, len(span))
    first: dict[int, int] = {}  # ordinal → row offset of its first copy
    title = None
    for i, (doc, ordinal) in enumerate(zip(sources.doc_ids, sources.ordinals.tolist())):
        if doc == doc_id:
            first.setdefault(ordinal, i)
            title = title or sources.titles[i]
    order = [first[o] for o in sorted(first)]
    return title or None, [texts[i] for i in order], [sids[i] for i in order], [owners[i] for i in order]


def semantic_documents(ctx: ToolHost, scores: np.ndarray, sids: np.ndarray) -> list[DocumentCandidate]:
    """Documents of the matched sentences (best score first): each sentence counts for its own
    document; a document's matched sentences come in its order, each overlap copy once."""
    store = ctx.store
    order = sorted(range(len(sids)), key=lambda i: (-float(scores[i]), int(sids[i])))
    rows = store.sentence_rows(np.asarray(sids)[order])
    ords = store.chunk_of_sentence_rows(rows)
    sources = store.sentence_sources.of_rows(rows)
    found: dict[str, DocumentCandidate] = {}
    matched: dict[str, dict[int, int]] = {}  # doc → {ordinal: sentence row}
    for row, o, doc, title, ordinal in zip(rows.tolist(), ords.tolist(), sources.doc_ids, sources.titles, sources.ordinals.tolist()):
        if doc not in found:
            found[doc] = DocumentCandidate(doc, int(o), title or None, [])
        matched.setdefault(doc, {}).setdefault(ordinal, row)
    for doc, cand in found.items():
        cand.sentences = store.sentences_at([matched[doc][o] for o in sorted(matched[doc])])
    return list(found.values())


def keyword_documents(ctx: ToolHost, scored: list[tuple[int, int]], keywords: list[str]) -> list[DocumentCandidate]:
    """Documents of keyword-matched windows (best window first): within a window, the documents
    whose own sentences hold a keyword, by their share of the keyword score (Σ occurrences × length)."""
    store = ctx.store
    lowered = [k.lower() for k in keywords]
    rows = store.chunk_rows([o for o, _ in scored], ["s_start", "s_count"])
    out: dict[str, DocumentCandidate] = {}
    for (o, _), start, count in zip(scored, rows["s_start"], rows["s_count"]):
        span = range(int(start), int(start) + int(count))
        texts = store.sentences_at(span)
        sources = store.sentence_sources.of_rows(span)
        by_doc: dict[str, list[str]] = {}
        titles: dict[str, str | None] = {}
        for text, doc, title in zip(texts, sources.doc_ids, sources.titles):
            by_doc.setdefault(doc, []).append(text)
            titles.setdefault(doc, title)
        score = {d: sum(" ".join(s).lower().count(k) * len(k) for k in lowered) for d, s in by_doc.items()}
        for doc in sorted((d for d in by_doc if score[d] > 0), key=lambda d: -score[d]):
            if doc not in out:
                out[doc] = DocumentCandidate(doc, int(o), titles[doc] or None, matching_sentences(by_doc[doc], lowered))
    return list(out.values())
