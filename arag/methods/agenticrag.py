"""AgenticRAG: document-level search, in-document find, line-windowed open, summarize; cited answers.

Differences from A-RAG's agent (same loop, index, backends): several tool calls per reply run
(`tools_per_step: null`); the conversation's context is managed (a warning at `warn_fraction` of
the context budget, a forced summarize at the budget, after which the loop goes on) instead of
forcing an answer at the token budget; the final answer ends with a citations line naming the
reference ids it rests on, each optionally with a relevance score, which ranks the cited documents
(Recall@1/@3 in the evaluation).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from arag.methods.base import Method

if TYPE_CHECKING:
    from arag.tools import DocumentSession

CITATIONS_LINE = re.compile(r"^\s*\**\s*citations?\s*\**\s*:(.*)$", re.I | re.M)
CITATION = re.compile(r"(turn\d+search\d+)(?:\s*[(\[:=]\s*(?:score\s*[:=]?\s*)?([0-9]*\.?[0-9]+)\s*[)\]]?)?")


@dataclass
class AgenticRagMethod(Method):
    tools_per_step: int | None = None  # several tool calls of one reply all run
    # Context management: at warn_fraction of the budget a warning, at the budget a forced summarize.
    # The budget is min(context_budget, the agent's token_budget), itself capped by the model window.
    context_budget: int | None = 128_000
    warn_fraction: float = 0.9
    # The document tools' settings (arag.tools.documents.DocumentToolSettings).
    max_queries: int = 5
    search_results: int = 10
    open_window_lines: int = 1800
    find_max_tokens: int = 11_000
    find_passages_per_pattern: int = 2
    find_context_lines: int = 1
    semantic_find: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 < self.warn_fraction <= 1:
            raise ValueError(f"method {self.name}: warn_fraction must be in (0, 1], got {self.warn_fraction}")
        for key in ("max_queries", "search_results", "open_window_lines", "find_max_tokens", "find_passages_per_pattern"):
            if not isinstance(getattr(self, key), int) or getattr(self, key) < 1:
                raise ValueError(f"method {self.name}: {key} must be a whole number >= 1, got {getattr(self, key)!r}")

    @property
    def manages_context(self) -> bool:
        return "summarize" in self.tools

    def new_episode_state(self) -> "DocumentSession":
        from arag.tools import DocumentSession, DocumentToolSettings

        # The method's fields of the same names are the tools' settings.
        return DocumentSession(settings=DocumentToolSettings(**{f.name: getattr(self, f.name) for f in fields(DocumentToolSettings)}))

    def initial_messages(self, question: str, ctx: Any, tracker: Any) -> tuple[list, list]:
        """As every agent's; first, an index the document tools cannot read (a packed index built
        before sentence sources) fails the episode with the reason, not the agent's tool calls."""
        from arag.tools.documents import check_document_index

        if ctx is not None:
            check_document_index(ctx)
        return super().initial_messages(question, ctx, tracker)

    def tool_schemas(self) -> list[dict[str, Any]]:
        """The tools' schemas with this method's limits (the ablations narrow them)."""
        import copy

        schemas = copy.deepcopy(super().tool_schemas())
        for schema in schemas:
            fn = schema["function"]
            props = fn["parameters"]["properties"]
            if fn["name"] == "search":
                props["queries"]["maxItems"] = self.max_queries
                if self.max_queries == 1:
                    props["queries"]["description"] = "Exactly one query."
                    fn["description"] = fn["description"].replace("Give up to 5 different phrasings of what you look for in one call", "Give one phrasing of what you look for per call")
            if fn["name"] == "find" and not self.semantic_find:
                props["mode"]["enum"] = ["lexical"]
                fn["description"] = fn["description"].split(' mode "lexical"')[0] + " It finds lines that contain a pattern literally (case-insensitive)."
        return schemas

    def finish_answer(self, text: str, state: Any) -> tuple[str, list[dict[str, Any]]]:
        """The answer without its citations line, and the citations ranked (by score, then order)."""
        matches = list(CITATIONS_LINE.finditer(text))
        if not matches:
            return text, []
        last = matches[-1]
        answer = (text[: last.start()] + text[last.end() :]).strip()
        refs = getattr(state, "refs", {})
        cited: list[dict[str, Any]] = []
        for ref_id, score in CITATION.findall(last.group(1)):
            if any(c["ref_id"] == ref_id for c in cited):
                continue
            ref = refs.get(ref_id)
            cited.append({"ref_id": ref_id, "score": float(score) if score else None, "doc_id": ref.doc_id if ref else None, "title": ref.title if ref else None})
        order = sorted(range(len(cited)), key=lambda i: (cited[i]["score"] is None, -(cited[i]["score"] or 0.0), i))
        return answer or text.strip(), [cited[i] for i in order]

    def describe(self) -> dict[str, Any]:
        keys = ("tools_per_step", "context_budget", "warn_fraction", "max_queries", "search_results", "open_window_lines", "find_max_tokens", "find_passages_per_pattern", "find_context_lines", "semantic_find")
        return {**super().describe(), "cites": True, **{k: getattr(self, k) for k in keys}}
