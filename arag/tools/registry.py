"""The tools by name, and the tool sets of the A-RAG methods."""

from __future__ import annotations

from typing import TYPE_CHECKING

from arag.tools.base import ToolSpec
from arag.tools.chunk_read import SPEC as CHUNK_READ
from arag.tools.doc_find import SPEC as DOC_FIND
from arag.tools.doc_open import SPEC as DOC_OPEN
from arag.tools.doc_search import SPEC as DOC_SEARCH
from arag.tools.keyword import SPEC as KEYWORD_SEARCH
from arag.tools.naive import SPEC as NAIVE_EMBEDDING_SEARCH
from arag.tools.semantic import SPEC as SEMANTIC_SEARCH
from arag.tools.summarize import SPEC as SUMMARIZE

if TYPE_CHECKING:
    from arag.index.chunk_ids import ChunkIdFormat

TOOLS: dict[str, ToolSpec] = {
    spec.name: spec
    for spec in (KEYWORD_SEARCH, SEMANTIC_SEARCH, CHUNK_READ, NAIVE_EMBEDDING_SEARCH, DOC_SEARCH, DOC_FIND, DOC_OPEN, SUMMARIZE)
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


def tool_schemas(tool_set: str | list[str] | tuple[str, ...], chunk_ids: "ChunkIdFormat | None" = None) -> list[dict]:
    """The tools' function schemas; with `chunk_ids` (an opened index's), their texts describe its
    chunk ids, else they keep the `{chunk_id_format}`/`{chunk_id_example}` slots."""
    names = TOOL_SETS[tool_set] if isinstance(tool_set, str) else tool_set
    return [get_tool(n).for_index(chunk_ids).schema() for n in names]
