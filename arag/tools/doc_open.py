"""open (AgenticRAG): a window of a referenced document's numbered lines (sentences, not file lines).

Bounded by `open_window_lines` lines (paper: 1,800) and `open_max_tokens` tokens of line text
(cl100k_base; paper: ~11k), whichever comes first; the first line is always shown whole
(docs/agents.md, "AgenticRAG").
"""

from __future__ import annotations

from itertools import accumulate
from typing import Any

from arag.tools.base import ToolHost, MAX_CHUNK_ID_CHARS, Hit, ToolArgumentError, ToolOptions, ToolResult, ToolSpec, READ
from arag.tools.documents import load_document, numbered, session_of
from arag.index.tokens import count_tokens_batch
from arag.tools.render import content_tokens


NAME = "open"

DESCRIPTION = (
    "Read a document found by search (by its reference id) as numbered lines (one sentence a line), "
    "from line `line` (0 = the start) on, a window of lines at a time: as many lines as fit a fixed "
    "token budget. The reply says which lines it shows and the line to open next to keep reading. "
    "Use the line numbers from find to jump to a passage."
)

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "ref_id": {"type": "string", "maxLength": MAX_CHUNK_ID_CHARS, "description": "Reference id of a search result, e.g. turn1search2."},
        "line": {"type": "integer", "minimum": 0, "default": 0, "description": "First line to show (0-based)."},
    },
    "required": ["ref_id"],
    "additionalProperties": False,
}


def run(ctx: ToolHost, args: dict[str, Any], options: ToolOptions) -> ToolResult:
    session = session_of(options)
    ref = session.resolve(args["ref_id"].strip())
    line = int(args.get("line", 0))
    doc = load_document(ctx, session, ref.doc_id, ref.anchor)
    n = len(doc.lines)
    if not 0 <= line < n:
        shown = line if abs(line) < 10**12 else "a huge number"
        raise ToolArgumentError(f"line {shown} is out of range: [{ref.ref_id}] has {n} lines, numbered 0–{n - 1}")
    window = token_window(doc.lines[line : line + session.settings.open_window_lines], session.settings.open_max_tokens)
    end = line + len(window)
    title = f" of {doc.title!r}" if doc.title else ""
    head = f"[{ref.ref_id}]{title}: Viewing lines [{line}–{end - 1}] of {n}"
    tail = f"\n(Lines {end}–{n - 1} follow: open with line={end} to read on.)" if end < n else ""
    hit = Hit(chunk_id=doc.chunk_ids[line], snippets=window, title=doc.title, doc_id=doc.doc_id)
    return ToolResult(
        tool=NAME,
        text=f"{head}\n{numbered(window, line)}{tail}",
        results=[hit],
        retrieved_tokens=content_tokens(window),  # o200k_base; the window's cap counts cl100k_base
        details={"ref_ids": [ref.ref_id], "first_line": line, "last_line": end - 1, "lines": n},
    )


def token_window(lines: list[str], max_tokens: int) -> list[str]:
    """The leading lines whose tokens sum to at most `max_tokens` (at least the first line)."""
    totals = accumulate(count_tokens_batch(lines))
    return lines[: next((i for i, total in enumerate(totals) if i and total > max_tokens), len(lines))]


SPEC = ToolSpec(name=NAME, description=DESCRIPTION, parameters=PARAMETERS, fn=run, evidence=READ, unit="document")  # a window of the document's lines
