"""Which of an episode's results hold gold evidence, for every method: the chunks whose title is a
supporting title (matched as arag.evaluation.evidence matches them) and, for the document tools, the
reference ids whose document is one."""

from __future__ import annotations

import re
from typing import Any, Iterable

from arag.evaluation.evidence import TITLE_SEPARATOR, gold_chunks, titles_covered

TITLES_RECORDED = "chunk titles as recorded with the run"
TITLES_FROM_TEXT = "chunk titles read from the tool results' headers (the run did not record them)"
TITLES_MISSING = "the run recorded no chunk titles and its tool results show none: gold chunks cannot be marked"
# A hit's header line in an A-RAG tool result (arag.tools.render): "chunk_id: <id> | title: <t1>; <t2> | ...".
HEADER_TITLE = re.compile(r"chunk_id: (?P<id>[^\s|\]]+) \| title: (?P<title>[^|\]\n]+?)\s*(?:\||\]|$)", re.MULTILINE)
# A document's header line in a search result of the document tools (arag.tools.doc_search):
# "[turn1search2] | title: <title> | document: <doc id> | lines 0-N ...".
DOCUMENT_HEADER = re.compile(r"^\[(?P<ref>[^\]\s]+)\] \| title: (?P<title>[^|\n]+?) \| document: ", re.MULTILINE)


def _reference_titles(calls: list[dict[str, Any]], titles: dict[str, str]) -> dict[str, str]:
    """{reference id: its document's title}, from the search results' headers, else their chunks' titles."""
    found: dict[str, str] = {}
    for call in calls:
        refs, ids = call.get("ref_ids") or [], call.get("chunk_ids") or []
        for m in DOCUMENT_HEADER.finditer(call.get("text") or ""):
            found.setdefault(m["ref"], m["title"].strip())
        if len(refs) == len(ids):  # a search: one chunk per reference, in order
            for ref, chunk in zip(refs, ids):
                if chunk in titles:
                    found.setdefault(ref, titles[chunk])
    return found


def chunk_titles(trajectory: dict[str, Any]) -> tuple[dict[str, str], str]:
    """{chunk id: title field} of the chunks an episode saw, and where they come from: the titles the runner
    recorded, else (older runs) the tool results' headers (a find or open's chunks are its reference's)."""
    if "chunk_titles" in trajectory:
        return dict(trajectory.get("chunk_titles") or {}), TITLES_RECORDED
    calls = [c for c in trajectory.get("tool_calls") or [] if isinstance(c, dict)]
    found: dict[str, str] = {}
    for call in calls:
        ids = set(call.get("chunk_ids") or [])
        for m in HEADER_TITLE.finditer(call.get("text") or ""):
            if m["id"] in ids:
                found.setdefault(m["id"], TITLE_SEPARATOR.join(m["title"].split("; ")))
    refs = _reference_titles(calls, {})
    for call in calls:
        named, ids = call.get("ref_ids") or [], call.get("chunk_ids") or []
        pairs = zip(named, ids) if len(named) == len(ids) else ((named[0], c) for c in ids) if len(named) == 1 else ()
        for ref, chunk in pairs:
            if ref in refs:
                found.setdefault(chunk, refs[ref])
    return found, TITLES_FROM_TEXT if found else TITLES_MISSING


def gold_marks(trajectory: dict[str, Any], titles: dict[str, str], supporting: Iterable[str]) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """({chunk id: the supporting titles it covers}, {reference id: the same}) of the gold ones."""
    wanted = [t for t in supporting if t and t.strip()]
    chunks = gold_chunks(titles, wanted)
    calls = [c for c in trajectory.get("tool_calls") or [] if isinstance(c, dict)]
    refs = {r: [t for t in titles_covered(title) if t in {w.strip() for w in wanted}] for r, title in _reference_titles(calls, titles).items()}
    return chunks, {r: found for r, found in refs.items() if found}
