"""Cut documents into sentence-aligned chunks of at most `chunk_tokens` tokens, one document at a time
(`index.chunking=per_document`; docs/indexing.md, "Index format" (Chunks))."""

from __future__ import annotations

from dataclasses import dataclass, field

from arag.corpus.documents import Document
from arag.index.sentences import Span, sentence_spans, trimmed
from arag.index.tokens import count_tokens, count_tokens_batch, split_by_tokens


# A single character can take several tokens; below this a budget cannot always be honoured.
MIN_CHUNK_TOKENS = 8


@dataclass(frozen=True, slots=True)
class SentenceSource:
    """Where a chunk's sentence comes from: its document and its place there (0, 1, … over the
    document's sentence units): the same in both copies of an overlap of two packed windows."""

    doc_id: str
    title: str
    ordinal: int


@dataclass(slots=True)
class Chunk:
    chunk_id: str
    doc_id: str
    title: str
    position: int
    text: str
    n_tokens: int
    sentences: list[str]
    sources: list[SentenceSource] = field(default_factory=list)  # one per sentence


def make_chunk_id(doc_id: str, position: int) -> str:
    return f"{doc_id}#{position}"


def sentence_units(text: str, spans: list[Span], max_tokens: int) -> tuple[list[Span], list[int]]:
    """Sentence spans with their token counts; over-long sentences are cut into pieces."""
    # Count each sentence together with the white space before it: that is how it sits in a chunk.
    pieces = [text[(spans[i - 1].end if i else s.start) : s.end] for i, s in enumerate(spans)]
    counts = count_tokens_batch(pieces)
    units: list[Span] = []
    unit_tokens: list[int] = []
    for span, n in zip(spans, counts):
        if n >= max_tokens - 2:
            # Near the limit the count on its own (no leading space) can differ: a chunk may start here.
            n = max(n, count_tokens(text[span.start : span.end]))
        if n <= max_tokens:
            units.append(span)
            unit_tokens.append(n)
            continue
        pos = span.start
        for piece in split_by_tokens(text[span.start : span.end], max_tokens):
            at = text.find(piece, pos, span.end)
            pos = at + len(piece)
            start, end = trimmed(text, at, pos)
            if end > start:
                units.append(Span(start, end))
                unit_tokens.append(count_tokens(text[start:end]))
    return units, unit_tokens


def chunk_document(doc: Document, chunk_tokens: int = 1000, language: str = "en") -> list[Chunk]:
    """`chunk_tokens` at least MIN_CHUNK_TOKENS (arag.index.parts.ChunkingSettings checks the setting)."""
    text = doc.text
    units, unit_tokens = sentence_units(text, sentence_spans(text, language), chunk_tokens)
    groups: list[list[int]] = []
    current: list[int] = []
    budget = 0
    for i, n in enumerate(unit_tokens):
        if current and budget + n > chunk_tokens:
            groups.append(current)
            current, budget = [], 0
        current.append(i)
        budget += n
    if current:
        groups.append(current)

    chunks: list[Chunk] = []
    pending = groups[::-1]
    while pending:
        group = pending.pop()
        chunk_text = text[units[group[0]].start : units[group[-1]].end]
        n_tokens = count_tokens(chunk_text)
        # Per-sentence counts are an estimate at the joins; the exact count decides.
        while n_tokens > chunk_tokens and len(group) > 1:
            overflow = group.pop()
            if pending:
                pending[-1].insert(0, overflow)  # re-checked when that group's turn comes
            else:
                pending.append([overflow])
            chunk_text = text[units[group[0]].start : units[group[-1]].end]
            n_tokens = count_tokens(chunk_text)
        position = len(chunks)
        chunks.append(
            Chunk(
                chunk_id=make_chunk_id(doc.doc_id, position),
                doc_id=doc.doc_id,
                title=doc.title,
                position=position,
                text=chunk_text,
                n_tokens=n_tokens,
                sentences=[text[units[i].start : units[i].end] for i in group],
                sources=[SentenceSource(doc.doc_id, doc.title, i) for i in group],
            )
        )
    return chunks
