"""Context management of methods that summarize (AgenticRAG): warn near the budget, compact on summarize.

A summarize (the agent's, or forced at the budget) keeps the results of the ids it lists and the
notes; every other referenced result (in a search result, each un-kept entry) becomes "[removed]".
The question, the summaries and the assistant turns always stay (docs/agents.md, "AgenticRAG").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from arag.agent.protocols import shown_ids_only
from arag.llm.types import Message
from arag.tools.documents import REF_ID
from arag.tools.registry import TOOLS

REMOVED = "[removed]"
BLOCK_SEPARATOR = "\n\n"

WARNING_TEXT = (
    "Context note: the conversation now holds {used} of its {budget} tokens ({share:.0%}). Call summarize "
    "soon with notes of what you found and the reference ids you still need; at {budget} tokens the "
    "harness will ask you to summarize before going on."
)
FORCE_TEXT = (
    "Context full: the conversation holds {used} of its {budget} tokens. Call summarize now: write notes "
    "of everything you found that matters for the question and list the reference ids whose results you "
    "still need. Results of all other ids will be removed; then you can go on."
)


def compacts_context(tool: str) -> bool:
    """Whether a successful call of `tool` compacts the conversation (ToolSpec.compacts_context: summarize)."""
    spec = TOOLS.get(tool)
    return bool(spec and spec.compacts_context)


def lists_ref_entries(tool: str) -> bool:
    """Whether `tool`'s result is one block per reference id (ToolSpec.ref_entries: search)."""
    spec = TOOLS.get(tool)
    return bool(spec and spec.ref_entries)


@dataclass
class Observation:
    tool: str
    ref_ids: list[str]
    rebuild: Callable[[str], Message]  # the observation message with a new text (same call id / prefix)
    text: str


@dataclass
class ContextManager:
    budget: int
    warn_fraction: float = 0.9
    warned: bool = False
    observations: dict[int, Observation] = field(default_factory=dict)  # by message index

    def should_warn(self, conversation: int) -> bool:
        return not self.warned and conversation >= self.warn_fraction * self.budget

    def warning(self, conversation: int) -> Message:
        self.warned = True
        return Message("user", WARNING_TEXT.format(used=conversation, budget=self.budget, share=conversation / self.budget))

    def force_request(self, conversation: int, shown: list[str]) -> Message:
        """The forced-summarize request; `shown` = shown_ref_ids(), which the caller also needs for the schema."""
        listed = f"\nReference ids whose results are in the conversation: {', '.join(shown)}." if shown else "\nNo referenced result is in the conversation."
        return Message("user", FORCE_TEXT.format(used=conversation, budget=self.budget) + listed)

    def removable(self) -> list[tuple[int, Observation]]:
        """(message index, observation) of the results still in the conversation; summaries always stay."""
        return [(i, obs) for i, obs in self.observations.items() if not compacts_context(obs.tool) and obs.text != REMOVED]

    def shown_ref_ids(self) -> list[str]:
        """Reference ids whose results are still in the conversation (not replaced by the marker)."""
        return list(dict.fromkeys(r for _, obs in self.removable() for r in obs.ref_ids if removed_entry(r) not in obs.text))

    def compact(self, messages: list[Message], keep: set[str]) -> None:
        """Replace, in place, every referenced result not kept by the marker (in a search result, each
        un-kept entry). Results without a reference id (errors) are removed too; summaries always stay."""
        for index, obs in self.removable():
            if not keep & set(obs.ref_ids):
                text = REMOVED
            elif lists_ref_entries(obs.tool):
                text = keep_search_entries(obs.text, keep)
            else:
                continue
            if text != obs.text:
                obs.text = text
                messages[index] = obs.rebuild(text)
        self.warned = False


def forced_summarize_schema(schema: dict, shown: list[str]) -> dict:
    """The summarize schema of a forced summarize: keep_ref_ids may only name ids still shown. Why: at a full
    context a grammar-constrained small model filled keep_ref_ids with invented ids ("turn1search65") until
    the reply limit cut the call, and its one chance to summarize was lost with every result."""
    return shown_ids_only(schema, "keep_ref_ids", shown)


def removed_entry(ref_id: str) -> str:
    return f"[{ref_id}] {REMOVED}"


def keep_search_entries(text: str, keep: set[str]) -> str:
    """A search result with the entries of un-kept reference ids replaced by "[<id>] [removed]"."""
    blocks = []
    for block in text.split(BLOCK_SEPARATOR):
        ids = REF_ID.findall(block[: block.find("]") + 1]) if block.startswith("[") else []
        blocks.append(removed_entry(ids[0]) if ids and ids[0] not in keep else block)
    return BLOCK_SEPARATOR.join(blocks)
