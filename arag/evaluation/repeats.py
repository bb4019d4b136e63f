"""Repeated tool calls: identical to an earlier call of the episode in tool name and normalised
arguments (docs/evaluation.md, "Tool errors and repeated calls")."""

from __future__ import annotations

import json
from typing import Any, Iterable

from arag.tools.registry import TOOLS


def normalised(value: Any) -> Any:
    if isinstance(value, str):
        return " ".join(value.split())
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {str(k): normalised(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalised(v) for v in value]
    return value


def with_defaults(name: str, arguments: Any) -> Any:
    spec = TOOLS.get(name)
    if spec is None or not isinstance(arguments, dict):
        return arguments
    defaults = {k: p["default"] for k, p in spec.parameters.get("properties", {}).items() if isinstance(p, dict) and "default" in p}
    return {**defaults, **arguments}


def call_key(name: str, arguments: Any) -> str:
    return json.dumps([name, normalised(with_defaults(name, arguments))], sort_keys=True, ensure_ascii=False, default=str)


def repeated_flags(calls: Iterable[tuple[str, Any]]) -> list[bool]:
    """Per (tool name, arguments) of an episode's calls: whether an earlier call was identical."""
    seen: set[str] = set()
    flags = []
    for name, arguments in calls:
        key = call_key(str(name), arguments)
        flags.append(key in seen)
        seen.add(key)
    return flags
