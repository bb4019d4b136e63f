"""Runs tool calls through the authors' A-RAG tools and prints what they returned, parsed.

Run by benchmarks/official_side_by_side.py in a separate process whose PYTHONPATH starts with the
authors' checkout's `src` (their package is also named `arag`, so this file must not import ours):

    python benchmarks/official_tools_driver.py <request.json> <out.jsonl>

request.json: {"checkout": <their checkout>, "chunks_file": ..., "index_dir": ..., "model": <embedder
path>, "calls": [{"key": ..., "tool": "keyword_search"|"semantic_search"|"read_chunk", "args": {...}}]}.
Every call gets a fresh AgentContext (nothing counts as read before), like a first call in an episode.
Each output line: key, tool, text (their tool's answer as the model would see it), log (their tool
log), ids (chunk ids in their order), scores (similarities as printed; None for keyword_search,
whose text shows none), snippets (per chunk, the sentences shown), texts ({id: full text} of
read_chunk).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

_KEYWORD_HIT = re.compile(r"^Chunk ID: (?P<id>.*?), Matched keywords in chunk: (?P<body>.*)$", re.S)
_SEMANTIC_HIT = re.compile(r"^Chunk ID: (?P<id>.*?) \(Similarity: (?P<score>-?[0-9.]+)\)\nMatched: (?P<body>.*)$", re.S)
_READ_BLOCK = re.compile(r"\[Chunk (?P<id>[^\]\n]*)\]\n-{80}\n(?P<text>.*?)\n={80}", re.S)


def snippet_sentences(body: str) -> list[str]:
    """The sentences of a "... a ... b ..." snippet (their splitter cuts at every '.', so no
    sentence holds "...")."""
    body = body.strip()
    if not body.startswith("..."):
        return []
    return [s.strip() for s in body.strip(".").split(" ... ") if s.strip()]


def parse(tool: str, text: str) -> dict:
    ids: list[str] = []
    scores: list[float] | None = [] if tool == "semantic_search" else None
    snippets: list[list[str]] = []
    texts: dict[str, str] = {}
    if tool == "read_chunk":
        for m in _READ_BLOCK.finditer(text):
            ids.append(m["id"])
            texts[m["id"]] = m["text"]
        return {"ids": ids, "scores": None, "snippets": [], "texts": texts}
    pattern = _SEMANTIC_HIT if tool == "semantic_search" else _KEYWORD_HIT
    for block in text.split("\n\n"):
        m = pattern.match(block)
        if not m:
            continue
        ids.append(m["id"])
        if scores is not None:
            scores.append(float(m["score"]))
        snippets.append(snippet_sentences(m["body"]))
    return {"ids": ids, "scores": scores, "snippets": snippets, "texts": texts}


def main(request_path: str, out_path: str) -> int:
    request = json.loads(Path(request_path).read_text(encoding="utf-8"))
    import arag  # theirs: PYTHONPATH puts their src first
    from arag.core.context import AgentContext
    from arag.tools.keyword_search import KeywordSearchTool
    from arag.tools.read_chunk import ReadChunkTool
    from arag.tools.semantic_search import SemanticSearchTool

    here = Path(arag.__file__).resolve()
    if Path(request["checkout"]).resolve() not in here.parents:
        print(f"imported arag from {here}, not from the authors' checkout {request['checkout']}", file=sys.stderr)
        return 2
    tools = {
        "keyword_search": KeywordSearchTool(chunks_file=request["chunks_file"]),
        "read_chunk": ReadChunkTool(chunks_file=request["chunks_file"]),
        "semantic_search": SemanticSearchTool(chunks_file=request["chunks_file"], index_dir=request["index_dir"], model_name=request["model"], device="cpu"),
    }
    with open(out_path, "w", encoding="utf-8") as out:
        for call in request["calls"]:
            text, log = tools[call["tool"]].execute(AgentContext(), **call["args"])
            out.write(json.dumps({"key": call["key"], "tool": call["tool"], "text": text, "log": log, **parse(call["tool"], text)}, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
