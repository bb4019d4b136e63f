"""Documents as numbered lines (line 0 first), and the per-episode state of the document tools (AgenticRAG).

Per-document chunking: a document's lines are its chunks' sentences in position order (a chunk without
sentences is one line of its text); packed: its own sentences (arag.tools.packed_documents). Reference
ids `turn{t}search{n}` live in a `DocumentSession`, one per episode: a `ReadTracker` that also carries
the method's settings for the tools (docs/agents.md, "AgenticRAG").
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from arag.index.parts import PACKED
import arag.tools.packed_documents as packed_documents
from arag.tools.base import ToolHost, ToolOptions, UnknownIdsError
from arag.tools.tracker import ReadTracker


REF_ID = re.compile(r"turn\d+search\d+")


@dataclass(frozen=True)
class DocumentToolSettings:
    """What the method decides for the document tools; the defaults are the paper's values (token caps in
    cl100k_base). Each is a method setting: docs/configuration.md, "AgenticRAG method settings"."""

    max_queries: int = 5
    search_results: int = 10
    open_window_lines: int = 1800
    open_max_tokens: int = 11_000
    find_max_tokens: int = 11_000
    find_passages_per_pattern: int = 2
    find_context_lines: int = 1
    semantic_find: bool = True

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            least = 0 if f.name == "find_context_lines" else 1
            if f.type == "bool" and not isinstance(value, bool):
                raise ValueError(f"{f.name} must be true or false, got {value!r}")
            if f.type != "bool" and (isinstance(value, bool) or not isinstance(value, int) or value < least):
                raise ValueError(f"{f.name} must be a whole number >= {least}, got {value!r}")

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "DocumentToolSettings":
        """Settings from their JSON form (as a served index receives them); an unknown key is an error."""
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ValueError(f"unknown document tool setting(s) {', '.join(unknown)}; known: {', '.join(known)}")
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class DocumentRef:
    ref_id: str
    doc_id: str
    title: str | None
    n_lines: int
    anchor: int | None = None  # chunk ord of a window covering the document (packed indexes)


@dataclass
class DocumentLines:
    doc_id: str
    title: str | None
    lines: list[str]
    sentence_ids: list[int]  # FAISS id of each line; -1 for a chunk without sentences
    chunk_ids: list[str]  # the chunk each line comes from


@dataclass
class DocumentSession(ReadTracker):
    """One episode's references (ref id → document) and the tools' settings."""

    settings: DocumentToolSettings = field(default_factory=DocumentToolSettings)
    refs: dict[str, DocumentRef] = field(default_factory=dict)
    searches: int = 0
    documents: dict[str, DocumentLines] = field(default_factory=dict, repr=False)  # read once per episode

    def resolve(self, ref_id: str) -> DocumentRef:
        if ref_id not in self.refs:
            known = ", ".join(list(self.refs)[-10:]) or "none yet (call search first)"
            raise UnknownIdsError(f"unknown reference id {ref_id[:60]!r}; ids come from search results, e.g. {known}")
        return self.refs[ref_id]

    def reset(self) -> None:
        super().reset()
        self.refs.clear()
        self.documents.clear()
        self.searches = 0


def session_of(options: ToolOptions) -> DocumentSession:
    """The episode's session; a call without one gets a fresh session, whose ids are forgotten after it."""
    tracker = options.tracker
    return tracker if isinstance(tracker, DocumentSession) else DocumentSession()


def is_packed(ctx: ToolHost) -> bool:
    return ctx.store.index.chunking_mode == PACKED


def check_document_index(ctx: ToolHost) -> None:
    """MissingSentenceSourcesError when a packed index's sentence rows do not record their documents."""
    if is_packed(ctx):
        ctx.store.sentence_sources  # noqa: B018 (opening it checks the files)


def load_document(ctx: ToolHost, session: DocumentSession, doc_id: str, anchor: int | None = None) -> DocumentLines:
    """The document's numbered lines (read once per episode); `anchor`: a window covering it (packed)."""
    if doc_id in session.documents:
        return session.documents[doc_id]
    if is_packed(ctx):
        if anchor is None:
            raise ValueError(f"document {doc_id!r}: a packed index needs a window covering it to find its sentences")
        doc = DocumentLines(doc_id, *packed_documents.load_lines(ctx.store, doc_id, anchor))
    else:
        doc = document_lines(ctx, doc_id)
    session.documents[doc_id] = doc
    return doc


def document_lines(ctx: ToolHost, doc_id: str) -> DocumentLines:
    """A per-document index's document as lines: its chunks' sentences in position order."""
    ords = ctx.store.find_chunks("doc_id", [doc_id]).get(doc_id, [])
    rows = ctx.store.chunk_rows(ords, ["position", "chunk_id", "title", "text", "s_start", "s_count"])
    order = sorted(range(len(ords)), key=lambda i: (rows["position"][i], ords[i]))
    lines: list[str] = []
    sids: list[int] = []
    chunk_ids: list[str] = []
    for i in order:
        start, count = int(rows["s_start"][i]), int(rows["s_count"][i])
        if count:
            lines += ctx.store.sentences_at(range(start, start + count))
            sids += ctx.store.sentence_ids(start, count)
        else:
            lines.append(rows["text"][i])
            sids.append(-1)
        chunk_ids += [rows["chunk_id"][i]] * max(count, 1)
    return DocumentLines(doc_id, rows["title"][order[0]] if ords else None, lines, sids, chunk_ids)


def line_similarities(ctx: ToolHost, query: str, sentence_ids: list[int]) -> dict[int, float]:
    """{sentence id: cosine of `query`} from the sentences' stored unit vectors."""
    wanted = np.asarray(sorted({s for s in sentence_ids if s >= 0}), dtype=np.int64)
    if len(wanted) == 0:
        return {}
    scores = ctx.vectors.scores(ctx.encode_query(query), wanted)
    return {int(i): float(s) for i, s in zip(wanted.tolist(), scores.tolist())}


def numbered(lines: list[str], start: int) -> str:
    return "\n".join(f"{start + i}: {line}" for i, line in enumerate(lines))
