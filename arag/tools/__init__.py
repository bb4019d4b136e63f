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
"""

from __future__ import annotations

from arag.tools import chunk_read, doc_find, doc_open, doc_search, keyword, naive, semantic, summarize
from arag.tools.base import Hit, ToolArgumentError, ToolOptions, ToolResult, ToolSpec
from arag.tools.context import ToolContext
from arag.tools.documents import DocumentSession, DocumentToolSettings
from arag.tools.tracker import ReadTracker

TOOLS: dict[str, ToolSpec] = {
    spec.name: spec for spec in (keyword.SPEC, semantic.SPEC, chunk_read.SPEC, naive.SPEC, doc_search.SPEC, doc_find.SPEC, doc_open.SPEC, summarize.SPEC)
}

# Tool sets of the A-RAG methods. The ablations that drop the snippet level use the same tools
# with `full_text=True` in `ToolContext.call` / `ToolOptions`.
TOOL_SETS: dict[str, tuple[str, ...]] = {
    "arag_full": ("keyword_search", "semantic_search", "chunk_read"),
    "arag_naive": ("naive_embedding_search", "chunk_read"),
    "arag_no_keyword": ("semantic_search", "chunk_read"),
    "arag_no_semantic": ("keyword_search", "chunk_read"),
    "arag_no_chunk_read": ("keyword_search", "semantic_search"),
    "agenticrag": ("search", "find", "open", "summarize"),
}


def get_tool(name: str) -> ToolSpec:
    try:
        return TOOLS[name]
    except KeyError:
        raise KeyError(f"unknown tool {name!r}; known: {', '.join(TOOLS)}") from None


def tool_schemas(tool_set: str | list[str] | tuple[str, ...]) -> list[dict]:
    names = TOOL_SETS[tool_set] if isinstance(tool_set, str) else tool_set
    return [get_tool(n).schema() for n in names]


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
    "tool_schemas",
]
