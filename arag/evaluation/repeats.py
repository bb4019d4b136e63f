"""Repeated tool calls: a call identical to an earlier call of the same episode, in tool name and
normalised arguments.

Normalised: object keys in any order; an argument left out equals its default in the tool's
parameter schema (`keyword_search` with no `top_k` equals one with `top_k: 5`); a whole number
written as a float (5.0) equals the integer; strings compared with their whitespace stripped and
runs of it as one space. Case and list order count: `["Paris"]` and `["paris"]`, or the same
keywords in another order, are different calls. Arguments that were not valid JSON (kept as raw
text) are compared as normalised strings.
"""

from __future__ import annotations

import json
from typing import Any, Iterable


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
    """`arguments` with the defaults of the registered tool `name` filled in (unchanged for any other)."""
    from arag.tools.registry import TOOLS

    spec = TOOLS.get(name)
    if spec is None or not isinstance(arguments, dict):
        return arguments
    defaults = {k: p["default"] for k, p in spec.parameters.get("properties", {}).items() if isinstance(p, dict) and "default" in p}
    return {**defaults, **arguments}


def call_key(name: str, arguments: Any) -> str:
    """What two identical calls share."""
    return json.dumps([name, normalised(with_defaults(name, arguments))], sort_keys=True, ensure_ascii=False, default=str)


def repeated_flags(calls: Iterable[tuple[str, Any]]) -> list[bool]:
    """Per (tool name, arguments) of an episode's calls in order: whether an earlier call was identical."""
    seen: set[str] = set()
    flags = []
    for name, arguments in calls:
        key = call_key(str(name), arguments)
        flags.append(key in seen)
        seen.add(key)
    return flags
