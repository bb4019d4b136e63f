"""A method = a system prompt + a tool set + tool options (+ optionally a one-shot context): the one
interface the agent loop talks to; a new method is a subclass with its prompts in `conf/method/<name>.yaml`."""

from __future__ import annotations

import asyncio
import copy
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

from arag.index.chunk_ids import ChunkIdFormat
from arag.llm.types import Message
from arag.methods.tool_calls import ToolCallRecord
from arag.strict_settings import field_names
from arag.tools import ReadTracker, ToolContext, ToolResult, result_settings_of, tool_schemas
from arag.tools.base import ResultFormat

# Per dataset (`corpus.answer_style`); the papers' prompts have no such sentence, so the `{answer_style}`
# slots are filled only under the `short_answer` prompt variant (docs/agents.md, "Paper-faithful defaults").
ANSWER_STYLES: dict[str, str] = {
    "short": "Give the answer only: a name, a date, a number, a short phrase, or yes/no, with no explanation.",
    "free_form": "Answer in a few complete sentences that state every fact the question asks for, taken from what you read.",
}
ANSWER_STYLE_SLOT = "{answer_style}"
PAPER_PROMPTS = "paper"
SHORT_ANSWER_PROMPTS = "short_answer"
PROMPT_VARIANTS = (PAPER_PROMPTS, SHORT_ANSWER_PROMPTS)
# A slot on a line of its own goes with its line; one inside a line, with the spaces before it.
_SLOT_LINE = re.compile(r"\n[ \t]*\{answer_style\}[ \t]*(?=\n|$)")
_SLOT_IN_LINE = re.compile(r"[ \t]*\{answer_style\}")

# The A-RAG authors' agent's forced answer, in our words: no more tools, answer from what was gathered, directly.
DEFAULT_FINAL_PROMPT = (
    "You have reached the limit of tool use: no more tools are available. Do not ask for more. From the "
    "information you have gathered so far, give your final answer now, putting together what you found "
    "and answering directly. {answer_style}"
)


def fill_answer_style(text: str, sentence: str | None) -> str:
    return text.replace(ANSWER_STYLE_SLOT, sentence) if sentence is not None else _SLOT_IN_LINE.sub("", _SLOT_LINE.sub("", text)).rstrip()


@dataclass
class Method:
    name: str
    system_prompt: str
    tools: tuple[str, ...] = ()
    full_text: bool = False  # search tools return whole chunks instead of snippets
    # How the A-RAG tools show results (docs/tools.md; the defaults are the official tools').
    snippets_per_chunk: int | None = 5
    result_titles: bool = False
    user_template: str = "Question: {question}"
    final_prompt: str = DEFAULT_FINAL_PROMPT
    answer_style: str = "short"  # a key of ANSWER_STYLES
    prompt_variant: str = PAPER_PROMPTS  # one of PROMPT_VARIANTS
    tools_per_step: int | None = 1  # tool calls of one reply that run (A-RAG: one); None: all
    # The opened index's chunk-id form for the texts' slots; not a config key: set by `for_index`.
    chunk_ids: "ChunkIdFormat | None" = field(default=None, init=False, repr=False)
    # Retrieval records under a name no tool has: how their chunks count as evidence (READ / SNIPPET).
    evidence_records: ClassVar[Mapping[str, str]] = {}
    # How the scored answer is taken from the final reply: A-RAG's evaluation code scores all of it.
    answer_scoring: ClassVar[str] = "whole reply"

    @classmethod
    def config_keys(cls) -> tuple[str, ...]:
        return field_names(cls)

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> "Method":
        return cls(**cfg)

    def __post_init__(self) -> None:
        if self.answer_style not in ANSWER_STYLES:
            raise ValueError(f"method {self.name}: unknown answer_style {self.answer_style!r}; known: {', '.join(ANSWER_STYLES)}")
        if self.prompt_variant not in PROMPT_VARIANTS:
            raise ValueError(f"method {self.name}: unknown prompt_variant {self.prompt_variant!r}; known: {', '.join(PROMPT_VARIANTS)}")
        try:
            self.result_format
        except ValueError as exc:
            raise ValueError(f"method {self.name}: {exc}") from None

    @property
    def result_format(self) -> "ResultFormat":
        return ResultFormat(snippets_per_chunk=self.snippets_per_chunk, result_titles=self.result_titles)

    def shows_tool_results(self) -> bool:
        """Whether the model reads A-RAG tool results, so their result settings enter the run's identity."""
        return bool(result_settings_of(self.tools))

    def for_index(self, chunk_ids: "ChunkIdFormat | None") -> "Method":
        bound = copy.copy(self)
        bound.chunk_ids = chunk_ids
        return bound

    def styled(self, text: str) -> str:
        """A prompt with its answer-style slots filled as the variant says, and its chunk-id slots."""
        text = fill_answer_style(text, ANSWER_STYLES[self.answer_style] if self.prompt_variant == SHORT_ANSWER_PROMPTS else None)
        return self.chunk_ids.fill(text) if self.chunk_ids is not None else text

    @property
    def system_text(self) -> str:
        return self.styled(self.system_prompt)

    @property
    def final_text(self) -> str:
        return self.styled(self.final_prompt)

    def tool_schemas(self) -> list[dict[str, Any]]:
        return tool_schemas(list(self.tools), self.chunk_ids) if self.tools else []

    def needs_index(self) -> bool:
        return bool(self.tools)

    @property
    def manages_context(self) -> bool:
        """True: the loop warns near the budget and compacts on summarize instead of forcing an answer."""
        return False

    def new_episode_state(self) -> Any:
        return ReadTracker()

    def finish_answer(self, text: str, state: Any) -> tuple[str, list[dict[str, Any]]]:
        return text, []

    def initial_messages(self, question: str, ctx: "ToolContext | None", tracker: "ReadTracker") -> tuple[list[Message], list[ToolCallRecord]]:
        return [Message("system", self.system_text), Message("user", self.user_template.format(question=question))], []

    async def run_episode(self, question: str, ctx: "ToolContext | None", tracker: "ReadTracker", episode: Any, call: Any, messages: list[Message]) -> bool:
        """A method with its own controller (A2RAG) runs the episode here and returns True."""
        return False

    def call_tool(self, ctx: "ToolContext", name: str, arguments: Any, tracker: "ReadTracker") -> "ToolResult":
        return ctx.call(name, arguments, tracker=tracker, full_text=self.full_text, result_format=self.result_format)

    async def acall_tool(self, ctx: "ToolContext", name: str, arguments: Any, tracker: "ReadTracker") -> "ToolResult":
        """On the context's bounded pool where it has one: a thousand episodes are a queue, not threads."""
        acall = getattr(ctx, "acall", None)
        if acall is not None and type(self).call_tool is Method.call_tool:
            return await acall(name, arguments, tracker=tracker, full_text=self.full_text, result_format=self.result_format)
        return await asyncio.to_thread(self.call_tool, ctx, name, arguments, tracker)

    def describe(self) -> dict[str, Any]:
        shape = {"snippets_per_chunk": self.snippets_per_chunk, "result_titles": self.result_titles} if self.shows_tool_results() else {}
        return {
            "name": self.name, "class": type(self).__name__, "tools": list(self.tools), "full_text": self.full_text,
            "answer_style": self.answer_style, "prompt_variant": self.prompt_variant, "answer_scoring": self.answer_scoring, **shape,
        }

    def texts(self) -> dict[str, str]:
        """Every text of this method the model can see (with the answer style in place): part of a run's identity."""
        return {"system": self.system_text, "user_template": self.user_template, "final": self.final_text}
