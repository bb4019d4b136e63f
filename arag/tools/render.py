"""The text the agent sees, built in one place so every tool speaks the same format.

Shapes, titles, the empty answers and how retrieved tokens are counted (o200k_base, retrieved text
only): docs/tools.md, "What the agent reads, and what counts as retrieved".
"""

from __future__ import annotations

import json
from typing import Iterable

from arag.index.packing import COVERED_SEPARATOR
from arag.index.tokens import count_retrieved_tokens
from arag.tools.base import MAX_TOP_K, Hit, ResultFormat, ToolResult


def content_tokens(pieces: Iterable[str]) -> int:
    """Retrieved tokens of whole texts, each counted on its own."""
    return sum(count_retrieved_tokens(p) for p in pieces)


def search_result(tool: str, text: str, hits: list[Hit], full_text: bool, details: dict) -> ToolResult:
    """A search's result. Retrieved tokens: whole chunks (`full_text`) each counted on its own, else
    the snippet sentences joined by newlines and counted once."""
    pieces = [s for h in hits for s in h.snippets]
    joined = "\n".join(pieces)
    tokens = content_tokens(pieces) if full_text else count_retrieved_tokens(joined) if joined else 0
    return ToolResult(tool=tool, text=text, results=hits, retrieved_tokens=tokens, details=details)


def snippet_block(sentences: list[str]) -> str:
    return "... " + " ... ".join(s.strip() for s in sentences) + " ..."


def _title(hit: Hit, result_format: ResultFormat, shape: str) -> str:
    """`shape` filled with the hit's title where `result_titles` asks for it; a packed chunk's several, "; " between them."""
    return shape.format("; ".join(hit.title.split(COVERED_SEPARATOR))) if result_format.result_titles and hit.title else ""


def _capped_note(details: dict) -> str:
    asked = details.get("top_k_capped_from")
    return "" if asked is None else f"\n\n(top_k was capped at {MAX_TOP_K}; asked {asked})"


def keyword_text(keywords: list[str], hits: list[Hit], full_text: bool, details: dict, result_format: ResultFormat) -> str:
    def block(hit: Hit) -> str:
        head = f"Chunk ID: {hit.chunk_id}{_title(hit, result_format, ' (Title: {})')}"
        if full_text:
            return f"{head}\n{hit.snippets[0]}"
        matched = snippet_block(hit.snippets) if hit.snippets else "(no exact sentence match)"
        return f"{head}, Matched keywords in chunk: {matched}"

    return ("\n\n".join(map(block, hits)) if hits else f"No results found for keywords: {keywords!r}") + _capped_note(details)


def similarity_text(query: str, hits: list[Hit], full_text: bool, details: dict, result_format: ResultFormat) -> str:
    """Agent-facing text of semantic_search and naive_embedding_search (whole chunks: `full_text`)."""
    def block(hit: Hit) -> str:
        head = f"Chunk ID: {hit.chunk_id}{_title(hit, result_format, ' (Title: {})')} (Similarity: {hit.score:.3f})"
        return f"{head}\n{hit.snippets[0]}" if full_text else f"{head}\nMatched: {snippet_block(hit.snippets)}"

    return ("\n\n".join(map(block, hits)) if hits else f"No results for: {query}") + _capped_note(details)


def chunk_header_end(text: str, chunk_id: str) -> int:
    """Where chunk `chunk_id`'s first header id in a result text ends, with the character after it (-1: none)."""
    marks = [f"Chunk ID: {chunk_id}{end}" for end in (",", " ", "\n")] + [f"chunk_id: {chunk_id}{end}" for end in (" ", "]", "\n")]
    return min((i + len(m) for m, i in ((m, text.find(m)) for m in marks) if i >= 0), default=-1)


def chunk_read_text(hits: list[Hit], texts: dict[str, str], unknown: list[str], sequence: str = "document", result_format: ResultFormat = ResultFormat()) -> str:
    """Agent-facing text of chunk_read; `sequence`: what the neighbours run through ("document", or "part")."""
    blocks = []
    for hit in hits:
        prev_ = hit.prev_id or f"none (first chunk of the {sequence})"
        next_ = hit.next_id or f"none (last chunk of the {sequence})"
        head = f"[chunk_id: {hit.chunk_id}{_title(hit, result_format, ' | title: {}')} | previous: {prev_} | next: {next_}]"
        if hit.already_read:
            blocks.append(f"{head}\nAlready read in this episode; its text is earlier in the conversation.")
        else:
            blocks.append(f"{head}\n{texts[hit.chunk_id]}")
    if unknown:
        blocks.append(f"Unknown chunk id{'s' if len(unknown) != 1 else ''} (not in this index): {json.dumps(unknown, ensure_ascii=False)}")
    return "\n\n".join(blocks)
