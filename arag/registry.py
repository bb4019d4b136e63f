"""One registry for the plugins (tools, backends, method kinds), each under its name. A plugin states
its own facts where it is defined and registers itself; every list elsewhere (evidence recall, result
columns, report tables, tool sets, run-time keys) is read from here, so a new plugin shows up everywhere.
The built-in plugins register when arag.tools.registry, arag.llm.factory or arag.methods is imported;
this module imports none of them, so any module can use it.

An installed package registers its plugins as Python entry points named as the plugin, in the group
of its kind (ENTRY_POINT_GROUPS), loaded the first time that kind is read: importing arag imports no
plugin package.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from importlib.metadata import entry_points
from typing import Any, TypeVar

T = TypeVar("T")

TOOL = "tool"
BACKEND = "backend"
METHOD = "method"
KINDS = (TOOL, BACKEND, METHOD)
# The entry point group an installed package declares its plugins of each kind in.
ENTRY_POINT_GROUPS = {TOOL: "arag.tools", BACKEND: "arag.backends", METHOD: "arag.methods"}


class PluginLoadError(ValueError):
    pass


class _Entries(Mapping):
    """One kind's plugins by name, in registration order (result columns and report tables keep that
    order); reading it first loads the installed packages' entry points of the kind, once."""

    def __init__(self, kind: str):
        self.kind, self.held, self.discovered = kind, {}, False

    def discover(self) -> None:
        if self.discovered:
            return
        self.discovered = True  # first: a plugin's module may read the registry while it loads
        group = ENTRY_POINT_GROUPS[self.kind]
        for point in entry_points(group=group):
            if point.name in self.held:
                continue
            try:
                loaded = point.load()
            except Exception as exc:
                raise PluginLoadError(f"the {self.kind} {point.name!r} of entry point group {group} ({point.value}) did not load: {type(exc).__name__}: {exc}") from None
            register(self.kind, point.name, loaded)

    def loaded(self) -> dict[str, Any]:
        self.discover()
        return self.held

    def __getitem__(self, name: str) -> Any:
        return self.loaded()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self.loaded()))

    def __len__(self) -> int:
        return len(self.loaded())

    def __repr__(self) -> str:
        return f"<{self.kind} plugins: {', '.join(self.held)}>"


_PLUGINS: dict[str, _Entries] = {kind: _Entries(kind) for kind in KINDS}


def _entries(kind: str) -> _Entries:
    try:
        return _PLUGINS[kind]
    except KeyError:
        raise ValueError(f"unknown plugin kind {kind!r}; kinds: {', '.join(KINDS)}") from None


def discover(kind: str | None = None) -> None:
    """Load the installed packages' entry points of `kind` (every kind when None) again: a package
    installed, or put on sys.path, after the registry was first read."""
    for entries in [_entries(kind)] if kind is not None else _PLUGINS.values():
        entries.discovered = False
        entries.discover()


def register(kind: str, name: str, plugin: T) -> T:
    """Register `plugin` as the `kind` named `name`; returns it. Registering the same object again
    is a no-op (a module imported twice); another object under a taken name is an error."""
    entries = _entries(kind).held
    if not isinstance(name, str) or not name:
        raise ValueError(f"a {kind} needs a non-empty name, got {name!r}")
    held = entries.get(name)
    if held is not None and held is not plugin and held != plugin:
        raise ValueError(f"{kind} {name!r} is registered already ({held!r})")
    entries[name] = plugin
    return plugin


def unregister(kind: str, name: str) -> None:
    """Take a plugin out again (tests that register a plugin of their own)."""
    _entries(kind).held.pop(name, None)


def plugins(kind: str) -> Mapping[str, Any]:
    """The registered plugins of `kind` by name, in registration order: the registry's own mapping,
    so it follows later registrations and includes the installed packages' (add through `register`)."""
    return _entries(kind)


def plugin(kind: str, name: Any) -> Any:
    """The `kind` registered as `name`; an unknown name is an error listing the known ones."""
    entries = _entries(kind)
    if isinstance(name, str) and name in entries:
        return entries[name]
    raise ValueError(f"unknown {kind} {name!r}; known: {', '.join(entries) or 'none'}")
