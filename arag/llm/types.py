"""What the agent loop and the LLM backends exchange: messages (OpenAI's chat format), tool calls,
completions, errors."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ToolCall:
    """A function call the model proposed; `arguments` is its raw JSON text, parsed by the tool."""

    name: str
    arguments: str
    id: str = ""

    def to_openai(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass
class Message:
    role: str  # system | user | assistant | tool
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None  # role == "tool": the call this observation answers
    name: str | None = None  # role == "tool": the tool's name

    def to_openai(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [c.to_openai() for c in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None and self.role == "tool":
            out["name"] = self.name
        return out


@dataclass
class Completion:
    """One model reply; a token count None was not reported (the loop then estimates it)."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    finish_reason: str | None = None
    reasoning: str | None = None


class LLMError(Exception):
    """A failed model call: `retryable` ones are retried with backoff, the others fail the episode."""

    def __init__(self, message: str, *, retryable: bool = True):
        super().__init__(message)
        self.retryable = retryable


class ConfigurationError(ValueError):
    """A backend was asked for something it cannot do (e.g. a reasoning level, a protocol)."""
