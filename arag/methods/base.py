"""A method = a system prompt + a tool set + tool options (+ optionally a one-shot context).

The agent loop only talks to this interface, so a new method (AgenticRAG, A2RAG, …) is a subclass
registered under a name, with its prompts in `conf/method/<name>.yaml`; the loop stays untouched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from arag.llm.types import Message
from arag.methods.records import ToolCallRecord

if TYPE_CHECKING:
    from arag.tools import ReadTracker, ToolContext, ToolResult

DEFAULT_FINAL_PROMPT = "No more tools are available. From what you have gathered so far, give your final answer now, as briefly as possible."


@dataclass
class Method:
    name: str
    system_prompt: str
    tools: tuple[str, ...] = ()
    full_text: bool = False  # search tools return whole chunks instead of snippets
    user_template: str = "Question: {question}"
    final_prompt: str = DEFAULT_FINAL_PROMPT

    def tool_schemas(self) -> list[dict[str, Any]]:
        from arag.tools import tool_schemas

        return tool_schemas(list(self.tools)) if self.tools else []

    def needs_index(self) -> bool:
        return bool(self.tools)

    def initial_messages(self, question: str, ctx: "ToolContext | None", tracker: "ReadTracker") -> tuple[list[Message], list[ToolCallRecord]]:
        """The conversation before the first model call, and any retrieval done to build it."""
        return [Message("system", self.system_prompt), Message("user", self.user_template.format(question=question))], []

    async def run_episode(self, question: str, ctx: "ToolContext | None", tracker: "ReadTracker", episode: Any, call: Any, messages: list[Message]) -> bool:
        """A method with its own controller (A2RAG) runs the whole episode here, calling the model
        through `call(messages, response_schema, final)`, and returns True; the default returns
        False and the agent loop runs the episode."""
        return False

    def call_tool(self, ctx: "ToolContext", name: str, arguments: Any, tracker: "ReadTracker") -> "ToolResult":
        return ctx.call(name, arguments, tracker=tracker, full_text=self.full_text)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "class": type(self).__name__, "tools": list(self.tools), "full_text": self.full_text}
