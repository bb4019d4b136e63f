"""The text the agent sees, built in one place so every tool speaks the same format.

Snippets are a chunk's selected sentences joined and framed with "..." to show that text around
them was left out. Every hit starts with its chunk id, so the agent can pass it to chunk_read.

Retrieved tokens (the paper's context-efficiency measure): the cl100k_base token count
(`arag.index.tokens.count_tokens`) of the chunk content a call puts into the agent's context —
each shown snippet sentence, or each whole chunk text — summed over the call. Headers, ids, scores,
notes and error messages are not counted, so the figure compares methods by how much *retrieved
text* they feed the model, whatever the formatting.
"""

from __future__ import annotations

import json
from typing import Iterable

from arag.index.packing import COVERED_SEPARATOR
from arag.index.tokens import count_tokens
from arag.tools.base import MAX_TOP_K, Hit

ELLIPSIS = "..."


def content_tokens(pieces: Iterable[str]) -> int:
    return sum(count_tokens(p) for p in pieces)


def snippet_block(sentences: list[str]) -> str:
    return f"{ELLIPSIS} " + f" {ELLIPSIS} ".join(s.strip() for s in sentences) + f" {ELLIPSIS}"


def _quote_list(items: list[str]) -> str:
    return json.dumps(items, ensure_ascii=False)


def _title_field(title: str | None) -> str:
    """` | title: …` of a header line; a packed chunk's several titles on one line, "; " between them."""
    return f" | title: {'; '.join(title.split(COVERED_SEPARATOR))}" if title else ""


def _header_line(i: int, hit: Hit, score: str) -> str:
    title = _title_field(hit.title)
    return f"[{i}] chunk_id: {hit.chunk_id}{title} | {score}"


def search_text(tool: str, asked: str, hits: list[Hit], full_text: bool, score_label: str, details: dict) -> str:
    """Agent-facing text of keyword_search, semantic_search and naive_embedding_search."""
    notes = []
    if "top_k_capped_from" in details:
        notes.append(f"top_k was capped at {MAX_TOP_K} (asked {details['top_k_capped_from']})")
    note = f" ({'; '.join(notes)})" if notes else ""
    if not hits:
        return f"{tool}: no chunk found for {asked}{note}."
    lines = [f"{tool}: {len(hits)} chunk{'s' if len(hits) != 1 else ''} for {asked}{note}:"]
    for i, hit in enumerate(hits, 1):
        if score_label == "score":
            score = f"score: {int(hit.score)}" if hit.score is not None else ""
        else:
            score = f"{score_label}: {hit.score:.4f}"
        lines.append("")
        lines.append(_header_line(i, hit, score))
        lines.append(hit.snippets[0] if full_text else snippet_block(hit.snippets))
    if not full_text:
        lines.append("")
        lines.append("Snippets show only the matching sentences; use chunk_read with chunk ids to read whole chunks.")
    return "\n".join(lines)


def keywords_phrase(keywords: list[str]) -> str:
    return f"keywords {_quote_list(keywords)}"


def query_phrase(query: str) -> str:
    short = query if len(query) <= 200 else query[:200] + "…"
    return f"query {json.dumps(short, ensure_ascii=False)}"


def chunk_read_text(hits: list[Hit], texts: dict[str, str], unknown: list[str], sequence: str = "document") -> str:
    """Agent-facing text of chunk_read: each chunk with its neighbours, then unknown ids.
    `sequence`: what the neighbours run through ("document"; a packed index's "part")."""
    blocks = []
    for hit in hits:
        prev_ = hit.prev_id or f"none (first chunk of the {sequence})"
        next_ = hit.next_id or f"none (last chunk of the {sequence})"
        title = _title_field(hit.title)
        head = f"[chunk_id: {hit.chunk_id}{title} | previous: {prev_} | next: {next_}]"
        if hit.already_read:
            blocks.append(f"{head}\nAlready read in this episode; its text is earlier in the conversation.")
        else:
            blocks.append(f"{head}\n{texts[hit.chunk_id]}")
    if unknown:
        blocks.append(f"Unknown chunk id{'s' if len(unknown) != 1 else ''} (not in this index): {_quote_list(unknown)}")
    return "\n\n".join(blocks)
