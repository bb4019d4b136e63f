"""Episode records: everything one question's run produced, JSON-able, one Parquet row per episode."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from arag.methods.tool_calls import ToolCallRecord

# Episode.status values.
ANSWERED = "answered"  # the model gave an answer (possibly forced: see `forced`)
EPISODE_FAILED = "failed"  # no answer: the LLM kept failing, or a non-retryable error; never scored


@dataclass
class ModelCallRecord:
    step: int
    prompt_tokens: int | None
    completion_tokens: int | None
    reasoning_tokens: int | None
    latency_s: float  # at the model (retries and their backoff included), not waiting for a backend slot
    attempts: int = 1  # 1 + retries
    finish_reason: str | None = None
    final: bool = False  # the tool-less call asking for the answer
    error: str | None = None
    raw: str = ""  # the reply text (JSON actions, answers); tool calls are in ToolCallRecord
    queued_s: float = 0.0  # waiting for a slot under the backend's own limit on requests in flight (arag.llm.slots)


@dataclass
class Episode:
    question: str
    method: str
    protocol: str
    backend: dict[str, Any]
    question_id: str | None = None
    status: str = ANSWERED
    answer: str | None = None
    forced: bool = False
    forced_reason: str | None = None  # "max_steps" | "token_budget"
    answer_cut_off: bool = False  # the answering reply stopped at the reply-length limit: the answer as far as it went
    failure: str | None = None
    steps: int = 0
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    model_calls: list[ModelCallRecord] = field(default_factory=list)
    invalid_replies: int = 0
    refused_calls: int = 0  # tool calls after the first in one reply: not run (one tool per step)
    truncated_observations: int = 0  # tool results cut to fit the context window
    context_warnings: int = 0  # methods with summarize: warnings near the context budget
    forced_summaries: int = 0  # methods with summarize: summaries the loop asked for at the budget
    citations: list[dict[str, Any]] = field(default_factory=list)  # cited reference ids, best first
    guard_rails: dict[str, Any] = field(default_factory=dict)
    guard_rail_events: list[str] = field(default_factory=list)
    agent: dict[str, Any] = field(default_factory=dict)  # loop settings (max_steps, token budget, …)
    wall_s: float = 0.0
    trace: dict[str, Any] = field(default_factory=dict)  # a controller method's own record (A2RAG: stages, checks, rewrites)
    messages: list[dict[str, Any]] = field(default_factory=list)

    @property
    def retrieved_tokens(self) -> int:
        return sum(c.retrieved_tokens for c in self.tool_calls)

    def token_totals(self) -> dict[str, int]:
        keys = ("prompt_tokens", "completion_tokens", "reasoning_tokens")
        return {key: sum(getattr(m, key) or 0 for m in self.model_calls) for key in keys}

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["retrieved_tokens"] = self.retrieved_tokens
        out.update(self.token_totals())
        return out

    def to_row(self) -> dict[str, Any]:
        """Flat columns for a Parquet row: scalars stay, nested values become JSON text."""
        return {k: json.dumps(v, ensure_ascii=False, default=str) if isinstance(v, (list, dict)) else v for k, v in self.to_json().items()}


# A stored trajectory holds each tool result once: in its tool call's `text`. The message that
# showed it to the model keeps the words around it and points at the call (about 40% of the
# characters of real A-RAG trajectories were the second copy).
CONTENT_FROM = "content_from"
MIN_SHARED_CHARS = 32  # shorter results stay in their message: the pointer would be as long


def pack_messages(messages: list[dict[str, Any]], tool_calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` (OpenAI form) with each tool result that is a tool call's `text` replaced by
    {"content": None, "content_from": {"tool_call": i, "before": ..., "after": ...}};
    `unpack_messages` restores them exactly. A message takes the first unused call whose text it
    holds once; a result cut to fit the context window (not the call's text) stays as it is."""
    used: set[int] = set()
    out = []
    for message in messages:
        content = message.get("content")
        found = None
        if isinstance(content, str) and message.get("role") in ("tool", "user") and len(content) >= MIN_SHARED_CHARS:
            texts = ((i, call.get("text") or "") for i, call in enumerate(tool_calls) if i not in used)
            found = next((i for i, text in texts if len(text) >= MIN_SHARED_CHARS and content.count(text) == 1), None)
        if found is None:
            out.append(message)
            continue
        used.add(found)
        before, after = content.split(tool_calls[found]["text"])
        out.append({**message, "content": None, CONTENT_FROM: {"tool_call": found, "before": before, "after": after}})
    return out


def unpack_messages(trajectory: dict[str, Any]) -> list[dict[str, Any]]:
    """A stored trajectory's messages with every tool result in place (older unpacked ones as they are)."""
    calls = trajectory.get("tool_calls") or []
    out = []
    for message in trajectory.get("messages") or []:
        if (ref := message.get(CONTENT_FROM)) is None:
            out.append(message)
            continue
        restored = {k: v for k, v in message.items() if k != CONTENT_FROM}
        restored["content"] = ref["before"] + (calls[ref["tool_call"]].get("text") or "") + ref["after"]
        out.append(restored)
    return out
