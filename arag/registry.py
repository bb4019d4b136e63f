"""One registry for the plugins: tools, backends and method kinds, each registered under its name.

A plugin states its own facts where it is defined (a tool: its name, schema, texts and how its
results count as evidence; a backend: its protocols, default concurrency and run-time keys; a
method kind: its class, whose configs in conf/method declare their label and tools) and registers
itself with `register`; every list elsewhere (evidence recall, result columns, report tables, tool
sets, run-time keys) is read from here, so a new plugin shows up everywhere by being registered.

The built-in plugins register when their package's listing module is imported (arag.tools.registry,
arag.llm.factory, arag.methods); this module imports none of them, so any module can use it.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

T = TypeVar("T")

TOOL = "tool"
BACKEND = "backend"
METHOD = "method"
KINDS = (TOOL, BACKEND, METHOD)

# kind -> {name: plugin}, in registration order (result columns and report tables keep that order).
_PLUGINS: dict[str, dict[str, Any]] = {kind: {} for kind in KINDS}


def _entries(kind: str) -> dict[str, Any]:
    try:
        return _PLUGINS[kind]
    except KeyError:
        raise ValueError(f"unknown plugin kind {kind!r}; kinds: {', '.join(KINDS)}") from None


def register(kind: str, name: str, plugin: T) -> T:
    """Register `plugin` as the `kind` named `name`; returns it. Registering the same object again
    is a no-op (a module imported twice); another object under a taken name is an error."""
    entries = _entries(kind)
    if not isinstance(name, str) or not name:
        raise ValueError(f"a {kind} needs a non-empty name, got {name!r}")
    held = entries.get(name)
    if held is not None and held is not plugin and held != plugin:
        raise ValueError(f"{kind} {name!r} is registered already ({held!r})")
    entries[name] = plugin
    return plugin


def registers(kind: str, name: str) -> Callable[[T], T]:
    """`register` as a class or function decorator."""
    return lambda plugin: register(kind, name, plugin)


def unregister(kind: str, name: str) -> None:
    """Take a plugin out again (tests that register a plugin of their own)."""
    _entries(kind).pop(name, None)


def plugins(kind: str) -> dict[str, Any]:
    """The registered plugins of `kind` by name, in registration order: the registry's own mapping,
    so it follows later registrations (add to it through `register`, which checks the name)."""
    return _entries(kind)


def plugin(kind: str, name: Any) -> Any:
    """The `kind` registered as `name`; an unknown name is an error listing the known ones."""
    entries = _entries(kind)
    if isinstance(name, str) and name in entries:
        return entries[name]
    raise ValueError(f"unknown {kind} {name!r}; known: {', '.join(entries) or 'none'}")
