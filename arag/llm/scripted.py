"""`scripted`: a deterministic test double replaying a script of replies, in order (the items it
takes: docs/agents.md, "Model backends: internals"). Every request is kept in `requests`, unless
`replay=True`, which serves concurrent episodes each from the script's start."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, Sequence

from arag.llm.base import LLMBackend
from arag.llm.reasoning import resolve
from arag.llm.types import Completion, LLMError, Message, ToolCall


@dataclass
class Request:
    messages: list[Message]
    tools: list[dict[str, Any]] | None
    response_schema: dict[str, Any] | None
    settings: dict[str, Any] | None = None  # what a real backend would send besides the messages

    @property
    def system_prompt(self) -> str | None:
        return next((m.content for m in self.messages if m.role == "system"), None)


class ScriptedBackend(LLMBackend):
    kind = "scripted"
    runtime_keys = frozenset({"latency_s"})  # the test double's simulated delay

    def __init__(
        self, script: Sequence[Any], model: str = "scripted", *, replay: bool = False, latency_s: float = 0.0, reasoning_effort: str | None = None, **kwargs: Any
    ):
        # One family whatever the effort (null included), so the model at its defaults is this double too.
        kwargs["reasoning"] = resolve(reasoning_effort, "openai-reasoning")
        super().__init__(model, **kwargs)
        self.script = list(script)
        self.position = 0
        self.replay = replay
        self.latency_s = float(latency_s)
        self.requests: list[Request] = []
        self._owner: ScriptedBackend = self

    def share_engine_of(self, owner: "ScriptedBackend") -> None:
        """A view of `owner` (arag.llm.instrument): one script position and request log, its own settings."""
        self._owner = owner._owner

    async def acomplete(self, messages, *, tools=None, response_schema=None, max_tokens=None) -> Completion:
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        owner = self._owner
        if self.replay:
            index = sum(1 for m in messages if m.role == "assistant")
        else:
            settings = {"model": self.model, "reasoning": dict(self.reasoning.request), "temperature": self.temperature, "max_tokens": max_tokens or self.max_tokens}
            owner.requests.append(Request([Message(**vars(m)) for m in messages], tools, response_schema, settings))
            index = owner.position
        if index >= len(self.script):
            raise LLMError("the script has no more replies", retryable=False)
        item = self.script[index]
        owner.position += 1
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, dict) and "error" in item:
            raise LLMError(str(item["error"]), retryable=bool(item.get("retryable", False)))
        # Without a response schema the model acts natively (tool calls, plain-text answers).
        completion = self._render(item, native=response_schema is None)
        if completion.prompt_tokens is None:
            # Something deterministic and monotone in the conversation, so token budgets can be tested.
            completion.prompt_tokens = sum(len(m.content) // 4 + 4 for m in messages)
        if completion.completion_tokens is None:
            completion.completion_tokens = len(completion.text) // 4 + 8 * len(completion.tool_calls)
        return completion

    def _render(self, item: Any, native: bool) -> Completion:
        if isinstance(item, Completion):
            return Completion(**vars(item))
        if isinstance(item, str):
            return Completion(text=item)
        actions = item if isinstance(item, list) else [item]
        if native and all(isinstance(a, dict) and "tool" in a for a in actions):
            calls = []
            for a in actions:
                args = a.get("arguments", {})
                calls.append(ToolCall(name=a["tool"], arguments=args if isinstance(args, str) else json.dumps(args), id=f"call_{self._owner.position}_{len(calls)}"))
            return Completion(tool_calls=calls, finish_reason="tool_calls")
        if native and isinstance(item, dict) and "answer" in item:
            return Completion(text=str(item["answer"]), finish_reason="stop")
        return Completion(text=json.dumps(item), finish_reason="stop")
