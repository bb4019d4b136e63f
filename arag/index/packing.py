"""Packed chunking (`index.chunking=packed`): the A-RAG paper's corpora, cut the LinearRAG way into
token windows of whole sentences that run across documents in corpus order and overlap.

The defaults, 1,000 tokens and 100 of overlap, are LinearRAG's chunk_token_size and
chunk_overlap_token_size (DEEP-PolyU/LinearRAG src/config.py @ 4ecfa25), whose released chunks the
A-RAG authors use. What a window records and the evidence: docs/indexing.md, "Index format" (Chunks)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from arag.corpus.documents import Document
from arag.index.chunking import Chunk, SentenceSource, sentence_units
from arag.index.sentences import sentence_spans
from arag.index.tokens import count_tokens

DOCUMENT_SEPARATOR = "\n\n"
# Between the document ids and between the titles of one window (arag.evaluation.evidence splits on it).
COVERED_SEPARATOR = "\n"
# Estimated tokens of DOCUMENT_SEPARATOR before a document's first sentence; the exact count of each window's text decides in the end.
SEPARATOR_TOKENS = 1


def packed_chunk_id(part: int, window: int) -> str:
    return f"{part}:{window}"


@dataclass(slots=True)
class _Unit:
    doc: Document
    start: int  # characters of doc.text
    end: int
    tokens: int  # estimate: counted with the white space (or document separator) before it
    ordinal: int  # the unit's place in its document (SentenceSource.ordinal)


class WindowPacker:
    """Packs the documents of one part, given in corpus order, into overlapping windows (the sizes
    as arag.index.parts.ChunkingSettings checks them)."""

    def __init__(self, part: int, chunk_tokens: int = 1000, chunk_overlap: int = 100, language: str = "en"):
        self.part, self.chunk_tokens, self.chunk_overlap, self.language = part, chunk_tokens, chunk_overlap, language
        self.window: list[_Unit] = []
        self.tokens = 0  # estimated tokens of the window
        self.carried = 0  # leading units of the window repeated from the previous window
        self.emitted = 0

    def add(self, doc: Document) -> list[Chunk] | None:
        """The windows this document completed (often none); None when it has no sentences."""
        spans, counts = sentence_units(doc.text, sentence_spans(doc.text, self.language), self.chunk_tokens)
        if not spans:
            return None
        out: list[Chunk] = []
        for i, (span, n) in enumerate(zip(spans, counts)):
            self._push(_Unit(doc, span.start, span.end, n + (SEPARATOR_TOKENS if i == 0 else 0), i), out)
        return out

    def finish(self) -> list[Chunk]:
        """The last windows, once every document of the part was added."""
        out: list[Chunk] = []
        while len(self.window) > self.carried:
            for unit in self._emit(out):
                self._push(unit, out)
        return out

    def _push(self, unit: _Unit, out: list[Chunk]) -> None:
        if len(self.window) > self.carried and self.tokens + unit.tokens > self.chunk_tokens:
            for overflow in self._emit(out):
                self._push(overflow, out)
            self._push(unit, out)
            return
        # Only carried sentences can stand in the way now: the overlap gives way to new text.
        while self.window and self.tokens + unit.tokens > self.chunk_tokens:
            self.tokens -= self.window.pop(0).tokens
            self.carried -= 1
        self.window.append(unit)
        self.tokens += unit.tokens

    def _emit(self, out: list[Chunk]) -> list[_Unit]:
        """Write the window as a chunk and keep its tail as the next window's start; return the units
        that did not fit after all (the estimates were short)."""
        overflow: list[_Unit] = []
        text = self._text()
        n_tokens = count_tokens(text)
        while n_tokens > self.chunk_tokens and len(self.window) > 1:
            if len(self.window) - self.carried > 1:
                overflow.insert(0, self.window.pop())
            else:  # one new unit left: the overlap gives way
                self.window.pop(0)
                self.carried -= 1
            text = self._text()
            n_tokens = count_tokens(text)
        out.append(self._chunk(text, n_tokens))
        tail: list[_Unit] = []
        kept = 0
        for unit in reversed(self.window):
            if kept + unit.tokens > self.chunk_overlap:
                break
            tail.insert(0, unit)
            kept += unit.tokens
        self.window, self.tokens, self.carried = tail, kept, len(tail)
        return overflow

    def _segments(self) -> list[tuple[Document, int, int]]:
        """(document, start, end) of each run of the window's units from one document."""
        runs = [list(run) for _, run in itertools.groupby(self.window, key=lambda u: id(u.doc))]
        return [(run[0].doc, run[0].start, run[-1].end) for run in runs]

    def _text(self) -> str:
        return DOCUMENT_SEPARATOR.join(doc.text[a:b] for doc, a, b in self._segments())

    def _chunk(self, text: str, n_tokens: int) -> Chunk:
        docs = [doc for doc, _, _ in self._segments()]
        position = self.emitted
        self.emitted += 1
        return Chunk(
            chunk_id=packed_chunk_id(self.part, position),
            doc_id=COVERED_SEPARATOR.join(d.doc_id for d in docs),
            title=COVERED_SEPARATOR.join(dict.fromkeys(d.title for d in docs if d.title)),
            position=position,
            text=text,
            n_tokens=n_tokens,
            sentences=[u.doc.text[u.start : u.end] for u in self.window],
            sources=[SentenceSource(u.doc.doc_id, u.doc.title, u.ordinal) for u in self.window],
        )
