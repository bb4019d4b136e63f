"""Retrieval tools over an index: A-RAG's keyword_search, semantic_search, chunk_read,
naive_embedding_search, and AgenticRAG's document tools search, find, open, summarize (their
per-episode state is a `DocumentSession`, see arag.tools.documents).

    from arag.tools import ToolContext, ReadTracker, tool_schemas
    ctx = ToolContext("/path/to/index")            # opens the index once (builds its tools cache once)
    tracker = ReadTracker()                        # one per episode
    result = ctx.call("keyword_search", {"keywords": ["Lothair II"], "top_k": 5})
    result.text, result.results, result.retrieved_tokens, result.error
    tool_schemas("arag_full")                      # OpenAI-style function schemas for a method

Tool calls never raise for bad arguments: the error comes back as the result's text and `error`.

One file per tool spec here (keyword.py, semantic.py, naive.py, chunk_read.py, doc_*.py, summarize.py) beside
what they share (base.py, render.py, store.py, tracker.py, documents.py, registry.py); arag.tools.hosting
holds what they run inside (ToolContext, the worker pool, query batching). The keyword engine's read caches
are an index structure: arag.index.keyword.
"""

from __future__ import annotations

from arag.tools.base import Hit, ToolArgumentError, ToolOptions, ToolResult, ToolSpec
from arag.tools.hosting.context import ToolContext
from arag.tools.documents import DocumentSession, DocumentToolSettings
from arag.tools.registry import TOOL_SETS, TOOLS, get_tool, result_settings_of, tool_schemas
from arag.tools.tracker import ReadTracker


__all__ = [
    "TOOLS",
    "TOOL_SETS",
    "DocumentSession",
    "DocumentToolSettings",
    "Hit",
    "ReadTracker",
    "ToolArgumentError",
    "ToolContext",
    "ToolOptions",
    "ToolResult",
    "ToolSpec",
    "get_tool",
    "result_settings_of",
    "tool_schemas",
]
