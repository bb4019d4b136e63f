"""The tools by name (arag.registry, kind "tool"): the built-in ones, registered here in a fixed
order that the result columns and report tables keep, and any a plugin registers; and the tool sets,
which the method configs declare (conf/method/*.yaml `tools`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from arag.config.files import method_declarations
from arag.index.chunk_ids import ChunkIdFormat
from arag.registry import TOOL, plugins, register
from arag.tools.base import ToolSpec
from arag.tools.chunk_read import SPEC as CHUNK_READ
from arag.tools.doc_find import SPEC as DOC_FIND
from arag.tools.doc_open import SPEC as DOC_OPEN
from arag.tools.doc_search import SPEC as DOC_SEARCH
from arag.tools.keyword import SPEC as KEYWORD_SEARCH
from arag.tools.naive import SPEC as NAIVE_EMBEDDING_SEARCH
from arag.tools.semantic import SPEC as SEMANTIC_SEARCH
from arag.tools.summarize import SPEC as SUMMARIZE

for _spec in (KEYWORD_SEARCH, SEMANTIC_SEARCH, NAIVE_EMBEDDING_SEARCH, CHUNK_READ, DOC_SEARCH, DOC_FIND, DOC_OPEN, SUMMARIZE):
    register(TOOL, _spec.name, _spec)

# Every registered tool by name, live: a tool registered later is here too.
TOOLS: Mapping[str, ToolSpec] = plugins(TOOL)


class _ToolSets(Mapping):
    """Method name -> the tools its config offers (methods without tools left out). The ablations
    that drop the snippet level use the same tools with `full_text: true`."""

    def _sets(self) -> dict[str, tuple[str, ...]]:
        return {name: d["tools"] for name, d in method_declarations().items() if d["tools"]}

    def __getitem__(self, name: str) -> tuple[str, ...]:
        return self._sets()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._sets())

    def __len__(self) -> int:
        return len(self._sets())


TOOL_SETS: Mapping[str, tuple[str, ...]] = _ToolSets()


def get_tool(name: str) -> ToolSpec:
    try:
        return TOOLS[name]
    except KeyError:
        raise KeyError(f"unknown tool {name!r}; known: {', '.join(TOOLS)}") from None


def result_settings_of(names: Iterable[str]) -> set[str]:
    """The ResultFormat settings the named tools' result texts follow (an unknown name adds none)."""
    return {setting for name in names if name in TOOLS for setting in TOOLS[name].result_settings}


def tool_schemas(tool_set: str | list[str] | tuple[str, ...], chunk_ids: ChunkIdFormat | None = None, documents: Any = None) -> list[dict]:
    """The tools' function schemas; with `chunk_ids` (an opened index's), their texts describe its
    chunk ids, else they keep the `{chunk_id_format}`/`{chunk_id_example}` slots; with `documents`
    (a method's DocumentToolSettings), the document tools' schemas follow its limits."""
    names = TOOL_SETS[tool_set] if isinstance(tool_set, str) else tool_set
    return [get_tool(n).for_index(chunk_ids).schema(documents) for n in names]
