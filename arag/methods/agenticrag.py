"""AgenticRAG: document-level search, in-document find, line-windowed open, summarize; cited answers
(docs/agents.md, "AgenticRAG")."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar

from arag.methods.base import Method
from arag.strict_settings import field_names
from arag.tools import DocumentSession, DocumentToolSettings, get_tool, tool_schemas
from arag.tools.documents import check_document_index

CITATIONS_LINE = re.compile(r"^\s*\**\s*citations?\s*\**\s*:(.*)$", re.I | re.M)
CITATION = re.compile(r"(turn\d+search\d+)(?:\s*[(\[:=]\s*(?:score\s*[:=]?\s*)?([0-9]*\.?[0-9]+)\s*[)\]]?)?")


@dataclass
class AgenticRagMethod(Method):
    tools_per_step: int | None = None  # several tool calls of one reply all run
    # The paper judges the answer and ranks the cited documents (R@1); the citations line is no part
    # of the answer, and its ids (turn1search2) would match a numeric gold answer in Contain-Acc.
    answer_scoring: ClassVar[str] = "whole reply less its Citations line"
    # Context management: at warn_fraction of the budget a warning, at the budget a forced summarize.
    # The budget is min(context_budget, the agent's token_budget), itself capped by the model window.
    context_budget: int | None = 128_000
    warn_fraction: float = 0.9
    # The document tools' settings, given as keys of the method's config (`max_queries: 1`).
    documents: "DocumentToolSettings | None" = None

    @classmethod
    def config_keys(cls) -> tuple[str, ...]:
        return (*(k for k in field_names(cls) if k != "documents"), *field_names(DocumentToolSettings))

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> "AgenticRagMethod":
        tool_keys = set(field_names(DocumentToolSettings))
        own = {k: v for k, v in cfg.items() if k not in tool_keys}
        try:
            documents = DocumentToolSettings(**{k: v for k, v in cfg.items() if k in tool_keys})
        except ValueError as exc:
            raise ValueError(f"method {cfg.get('name')}: {exc}") from None
        return cls(**own, documents=documents)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 < self.warn_fraction <= 1:
            raise ValueError(f"method {self.name}: warn_fraction must be in (0, 1], got {self.warn_fraction}")
        if self.documents is None:
            self.documents = DocumentToolSettings()

    @property
    def manages_context(self) -> bool:
        return any(get_tool(name).compacts_context for name in self.tools)

    def new_episode_state(self) -> "DocumentSession":
        return DocumentSession(settings=self.documents)

    def initial_messages(self, question: str, ctx: Any, tracker: Any) -> tuple[list, list]:
        """As every agent's, after refusing an index the document tools cannot read."""
        if getattr(ctx, "store", None) is not None:  # a served index (RemoteTools) checks on its side
            check_document_index(ctx)
        return super().initial_messages(question, ctx, tracker)

    def tool_schemas(self) -> list[dict[str, Any]]:
        return tool_schemas(list(self.tools), self.chunk_ids, self.documents) if self.tools else []

    def finish_answer(self, text: str, state: Any) -> tuple[str, list[dict[str, Any]]]:
        """The answer without its citations line, and the citations by score, then order."""
        matches = list(CITATIONS_LINE.finditer(text))
        if not matches:
            return text, []
        last = matches[-1]
        answer = (text[: last.start()] + text[last.end() :]).strip()
        refs = getattr(state, "refs", {})
        cited: dict[str, dict[str, Any]] = {}  # the first mention of each reference
        for ref_id, score in CITATION.findall(last.group(1)):
            ref = refs.get(ref_id)
            cited.setdefault(ref_id, {"ref_id": ref_id, "score": float(score) if score else None, "doc_id": ref.doc_id if ref else None, "title": ref.title if ref else None})
        # sorted() is stable: equal scores keep the order they were cited in.
        return answer or text.strip(), sorted(cited.values(), key=lambda c: (c["score"] is None, -(c["score"] or 0.0)))

    def describe(self) -> dict[str, Any]:
        own = {k: getattr(self, k) for k in ("tools_per_step", "context_budget", "warn_fraction")}
        return {**super().describe(), "cites": True, **own, **self.documents.to_dict()}
