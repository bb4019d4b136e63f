"""find (AgenticRAG): passages inside one referenced document that match patterns, lexically
(case-insensitive substring per line) or by meaning (cosine with the index's sentence vectors).

Limits: `find_passages_per_pattern` (paper: 2), `find_context_lines`, `find_max_tokens` (paper: ~11k);
docs/agents.md, "AgenticRAG".
"""

from __future__ import annotations

from itertools import islice
from typing import Any

from arag.index.tokens import count_tokens
from arag.tools.render import content_tokens
from arag.tools.base import ToolHost, MAX_CHUNK_ID_CHARS, MAX_KEYWORD_CHARS, Hit, ToolOptions, ToolResult, ToolSpec, require_vectors, SNIPPET
from arag.tools.documents import DocumentLines, line_similarities, load_document, numbered, session_of


NAME = "find"
MAX_PATTERNS = 10
MODES = ("lexical", "semantic")

DESCRIPTION = (
    "Look inside one document found by search (by its reference id) for passages about your patterns. "
    "mode \"lexical\" (default) finds lines that contain a pattern literally (case-insensitive), for "
    "names, dates and exact phrases; mode \"semantic\" finds the lines closest in meaning to a pattern, "
    "for descriptions and paraphrases. Each pattern gives at most 2 passages with their line numbers; "
    "open the document at a line number to read more around it."
)

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "ref_id": {"type": "string", "maxLength": MAX_CHUNK_ID_CHARS, "description": "Reference id of a search result, e.g. turn1search2."},
        "patterns": {"type": "array", "items": {"type": "string", "maxLength": MAX_KEYWORD_CHARS}, "minItems": 1, "maxItems": MAX_PATTERNS, "description": "Words, phrases or short statements to look for."},
        "mode": {"type": "string", "enum": list(MODES), "default": "lexical", "description": "lexical: literal matches; semantic: matches in meaning."},
    },
    "required": ["ref_id", "patterns"],
    "additionalProperties": False,
}


def matched_lines(doc: DocumentLines, ctx: ToolHost, pattern: str, mode: str, limit: int) -> list[int]:
    if mode == "lexical":
        needle = pattern.lower()
        return list(islice((i for i, line in enumerate(doc.lines) if needle in line.lower()), limit))
    sims = line_similarities(ctx, pattern, doc.sentence_ids)
    scored = sorted((-sims[s], i) for i, s in enumerate(doc.sentence_ids) if s in sims)
    return [i for _, i in scored[:limit]]


def run(ctx: ToolHost, args: dict[str, Any], options: ToolOptions) -> ToolResult:
    session = session_of(options)
    settings = session.settings
    ref = session.resolve(args["ref_id"].strip())
    patterns = args["patterns"]
    mode = args.get("mode", "lexical")
    if mode == "semantic":
        require_vectors(ctx, 'find with mode "semantic"')
    doc = load_document(ctx, session, ref.doc_id, ref.anchor)
    c = settings.find_context_lines
    shown: set[tuple[int, int]] = set()
    blocks: list[str] = []
    hits: list[Hit] = []
    tokens = 0
    left_out = 0
    no_match: list[str] = []
    for pattern in patterns:
        lines = matched_lines(doc, ctx, pattern, mode, settings.find_passages_per_pattern)
        if not lines:
            no_match.append(pattern)
        for line in lines:
            span = (max(0, line - c), min(len(doc.lines), line + c + 1))
            if span in shown:
                continue
            passage = doc.lines[span[0] : span[1]]
            size = sum(count_tokens(p) for p in passage)
            if tokens + size > settings.find_max_tokens:
                left_out += 1
                continue
            shown.add(span)
            tokens += size
            blocks.append(f"match for {pattern[:80]!r} at line {line}:\n{numbered(passage, span[0])}")
            hits.append(Hit(chunk_id=doc.chunk_ids[line], snippets=passage, title=doc.title, doc_id=doc.doc_id))
    head = f"find ({mode}) in [{ref.ref_id}]{' ' + repr(doc.title) if doc.title else ''}, {len(doc.lines)} lines: {len(blocks)} passage{'s' if len(blocks) != 1 else ''}"
    notes = []
    if no_match:
        notes.append(f"no match for {', '.join(repr(p[:80]) for p in no_match)}")
    if left_out:
        notes.append(f"{left_out} more passage{'s' if left_out != 1 else ''} left out: the reply is capped at {settings.find_max_tokens} tokens")
    text = "\n\n".join([head + (f" ({'; '.join(notes)})" if notes else "") + ".", *blocks])
    # The reply's cap counts cl100k_base (AgenticRAG's budget); retrieved tokens are o200k_base, as every tool's.
    return ToolResult(tool=NAME, text=text, results=hits, retrieved_tokens=content_tokens(s for h in hits for s in h.snippets), details={"ref_ids": [ref.ref_id], "left_out": left_out})


def fit_schema(fn: dict[str, Any], documents: Any) -> None:
    """Without `semantic_find` the only mode is lexical, and the description says so."""
    if not documents.semantic_find:
        fn["parameters"]["properties"]["mode"]["enum"] = ["lexical"]
        fn["description"] = fn["description"].split(' mode "lexical"')[0] + " It finds lines that contain a pattern literally (case-insensitive)."


SPEC = ToolSpec(name=NAME, description=DESCRIPTION, parameters=PARAMETERS, fn=run, evidence=SNIPPET, unit="document", encodes_queries=True,
                fit_schema=fit_schema)  # passages around matched lines: pieces of a document, not its chunks' whole text
