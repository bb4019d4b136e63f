"""Context management of methods that summarize (AgenticRAG): warn near the budget, compact on summarize.

The loop tells a `ContextManager` which message holds which tool result and which reference ids
that result is about. A summarize (called by the agent, or forced by the loop once the conversation
reaches the budget) keeps the results of the ids it lists and the notes; every other referenced
result becomes the marker "[removed]" (in a search result, each un-kept result entry does), and the
conversation goes on. Summaries themselves, the question and the assistant turns always stay.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from arag.llm.types import Message
from arag.tools.documents import REF_ID

REMOVED = "[removed]"
SUMMARIZE_TOOL = "summarize"
SEARCH_TOOL = "search"
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

    def observed(self, index: int, observation: Observation) -> None:
        self.observations[index] = observation

    def should_warn(self, conversation: int) -> bool:
        return not self.warned and conversation >= self.warn_fraction * self.budget

    def warning(self, conversation: int) -> Message:
        self.warned = True
        return Message("user", WARNING_TEXT.format(used=conversation, budget=self.budget, share=conversation / self.budget))

    def force_request(self, conversation: int) -> Message:
        return Message("user", FORCE_TEXT.format(used=conversation, budget=self.budget))

    def compact(self, messages: list[Message], keep: set[str]) -> list[str]:
        """Replace, in place, every referenced result not kept by the marker; returns the removed ids.
        Results without a reference id (errors) are removed too; summaries always stay."""
        removed: list[str] = []
        for index, obs in self.observations.items():
            if obs.tool == SUMMARIZE_TOOL or obs.text == REMOVED:
                continue
            if obs.tool == SEARCH_TOOL and obs.ref_ids and keep & set(obs.ref_ids):
                text = keep_search_entries(obs.text, keep)
                removed += [r for r in obs.ref_ids if r not in keep]
            elif keep & set(obs.ref_ids):
                continue
            else:
                text = REMOVED
                removed += obs.ref_ids
            if text != obs.text:
                obs.text = text
                messages[index] = obs.rebuild(text)
        self.warned = False
        return list(dict.fromkeys(removed))


def keep_search_entries(text: str, keep: set[str]) -> str:
    """A search result with the entries of un-kept reference ids replaced by "[<id>] [removed]"."""
    blocks = []
    for block in text.split(BLOCK_SEPARATOR):
        ids = REF_ID.findall(block[: block.find("]") + 1]) if block.startswith("[") else []
        blocks.append(f"[{ids[0]}] {REMOVED}" if ids and ids[0] not in keep else block)
    return BLOCK_SEPARATOR.join(blocks)
