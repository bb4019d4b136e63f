"""Settings are strict: a key that no settings object knows is an error that names it and lists the
valid ones, never silently dropped (a misspelled `+embedder.batchsize=8` would otherwise run as if
nothing was said) and never a `TypeError` traceback from a constructor.

Every config group is read through `check_keys` (the valid keys given by name) or `from_settings`
(the valid keys are a dataclass's fields)."""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from typing import Any, Iterable, Mapping, TypeVar

T = TypeVar("T")


class UnknownSettingError(ValueError):
    """A config names a key that the settings it configures do not have."""


def check_keys(group: str, given: Mapping[str, Any], known: Iterable[str]) -> None:
    """Raise `UnknownSettingError` when `given` has a key outside `known`; `group` is the config
    path of `given` ("embedder", "agent.guard_rails", "" for the top level)."""
    known = sorted(set(known))
    unknown = sorted(str(k) for k in given if k not in known)
    if not unknown:
        return
    where = f"{group}." if group else ""
    named = ", ".join(f"{where}{k}" for k in unknown)
    hints = [f"{where}{close[0]}" for k in unknown if (close := difflib.get_close_matches(k, known, n=1, cutoff=0.6))]
    hint = f" (did you mean {', '.join(hints)}?)" if hints else ""
    valid = ", ".join(known) or "none"
    raise UnknownSettingError(f"unknown setting{'s' if len(unknown) > 1 else ''} {named}{hint}; valid keys of {group or 'the config'}: {valid}")


def field_names(cls: type) -> tuple[str, ...]:
    """The keys a dataclass takes in its constructor."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.init)


def from_settings(cls: type[T], cfg: Mapping[str, Any], group: str, **converted: Any) -> T:
    """`cls(**cfg)` for a dataclass, after checking every key of `cfg` is one of its fields;
    `converted` replaces values that need building first (e.g. a nested settings object)."""
    check_keys(group, cfg, field_names(cls))
    return cls(**{**dict(cfg), **converted})


def constructor_keys(cls: type) -> tuple[str, ...]:
    """The keyword arguments `cls(...)` accepts, following `**kwargs` up to the base classes that
    receive them."""
    keys: list[str] = []
    for klass in cls.__mro__:
        if klass is object or "__init__" not in vars(klass):
            continue
        params = list(inspect.signature(klass.__init__).parameters.values())[1:]
        keys += [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            break
    return tuple(dict.fromkeys(keys))
