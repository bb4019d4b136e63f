"""What a tool call leaves behind, whether the model or the method made it; below the agent, which
imports methods."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ToolCallRecord:
    step: int
    name: str
    arguments: Any  # as the model wrote them (a dict, or raw text when it was not valid JSON)
    text: str  # what the model was shown
    retrieved_tokens: int = 0
    latency_s: float = 0.0
    error: str | None = None
    failure: str | None = None  # why the model could not use the result (FAILURE_KINDS); set with every `error`
    unknown_id_count: int = 0  # chunk_read: ids it named that do not exist (the call may still have read others)
    chunk_ids: list[str] = field(default_factory=list)
    neighbour_ids: list[str] = field(default_factory=list)  # chunk_read: the previous/next chunk ids its result named
    ref_ids: list[str] = field(default_factory=list)  # document tools: the reference ids the result is about
