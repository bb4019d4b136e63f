"""Retrieval tools over an index: A-RAG's keyword_search, semantic_search, chunk_read,
naive_embedding_search, and AgenticRAG's search, find, open, summarize (docs/tools.md).

One file per tool spec beside what they share; arag.tools.hosting holds what they run inside (the
one call path, ToolContext, the worker pool, query batching).
"""

from __future__ import annotations

from arag.tools.base import Hit, ToolArgumentError, ToolOptions, ToolResult, ToolSpec
from arag.tools.hosting.context import ToolContext
from arag.tools.documents import DocumentSession, DocumentToolSettings
from arag.tools.registry import TOOL_SETS, TOOLS, get_tool, result_settings_of, tool_schemas
from arag.tools.tracker import ReadTracker

__all__ = [
    "TOOLS", "TOOL_SETS", "DocumentSession", "DocumentToolSettings", "Hit", "ReadTracker", "ToolArgumentError",
    "ToolContext", "ToolOptions", "ToolResult", "ToolSpec", "get_tool", "result_settings_of", "tool_schemas",
]
