"""Reasoning effort (`minimal | low | medium | high`, or null: the model's default) mapped per model
family onto what the model supports; the table is in docs/agents.md, "Model backends: internals".
A backend that cannot enforce a thinking budget refuses the level, never ignores it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from arag.llm.types import ConfigurationError

LEVELS = ("minimal", "low", "medium", "high")
FAMILIES = ("gpt-oss", "openai-reasoning", "qwen3", "none")
QWEN3_THINKING_BUDGET = {"low": 512, "medium": 2048, "high": 8192}


@dataclass(frozen=True)
class ReasoningSetting:
    requested: str | None
    family: str
    supported: bool
    request: dict[str, Any] = field(default_factory=dict)  # extra top-level request fields
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)  # e.g. {"enable_thinking": False}
    thinking_budget: int | None = None  # a cap on thinking tokens the backend must enforce
    note: str = ""


def family_of(model: str) -> str:
    """The family guessed from a model name (configs may name it instead)."""
    m = model.lower()
    if "gpt-oss" in m:
        return "gpt-oss"
    if "qwen3" in m and "coder" not in m:
        return "qwen3"
    base = m.rsplit("/", 1)[-1]
    if base.startswith(("o1", "o3", "o4", "gpt-5")):
        return "openai-reasoning"
    return "none"


def resolve(level: str | None, family: str, *, on_unsupported: str = "error") -> ReasoningSetting:
    if family not in FAMILIES:
        raise ConfigurationError(f"unknown model family {family!r} for reasoning effort; known: {', '.join(FAMILIES)}")
    if on_unsupported not in ("error", "record"):
        raise ConfigurationError(f"on_unsupported must be 'error' or 'record', got {on_unsupported!r}")
    if level is None:
        return ReasoningSetting(None, family, True, note="model default")
    if level not in LEVELS:
        raise ConfigurationError(f"reasoning effort must be one of {', '.join(LEVELS)} or null, got {level!r}")

    if family == "openai-reasoning" or (family == "gpt-oss" and level != "minimal"):
        return ReasoningSetting(level, family, True, request={"reasoning_effort": level})
    if family == "qwen3":
        if level == "minimal":
            return ReasoningSetting(level, family, True, chat_template_kwargs={"enable_thinking": False}, note="thinking off")
        return ReasoningSetting(level, family, True, chat_template_kwargs={"enable_thinking": True}, thinking_budget=QWEN3_THINKING_BUDGET[level])

    why = {"gpt-oss": "gpt-oss has no level below 'low'", "none": "this model has no reasoning mode"}[family]
    if on_unsupported == "error":
        raise ConfigurationError(f"reasoning effort {level!r} is not supported for family {family!r}: {why}")
    return ReasoningSetting(level, family, False, note=f"unsupported, running at the model default: {why}")
