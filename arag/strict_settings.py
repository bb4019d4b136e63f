"""Settings are strict: a key no settings object knows is an error naming it, the key probably meant and
the valid ones; never silently dropped (a misspelled `+embedder.batchsize=8` would run as if unsaid),
never a constructor's `TypeError` traceback."""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from typing import Any, Iterable, Mapping, TypeVar

T = TypeVar("T")


class UnknownSettingError(ValueError):
    """A config names a key that the settings it configures do not have."""


def unknown_setting(group: str, given: Iterable[str], known: Iterable[str]) -> UnknownSettingError | None:
    """The error for the keys of `given` outside `known`, if any; `group` is `given`'s config path
    ("embedder", "agent.guard_rails", "" for the top level)."""
    known = sorted(set(map(str, known)))
    if not (unknown := sorted(str(k) for k in given if k not in known)):
        return None
    where = f"{group}." if group else ""
    hints = [f"{where}{close[0]}" for k in unknown if (close := difflib.get_close_matches(k, known, n=1, cutoff=0.6))]
    hint = f" (did you mean {', '.join(hints)}?)" if hints else ""
    named = ", ".join(f"{where}{k}" for k in unknown)
    return UnknownSettingError(f"unknown setting{'s' if len(unknown) > 1 else ''} {named}{hint}; valid keys of {group or 'the config'}: {', '.join(known) or 'none'}")


def check_keys(group: str, given: Iterable[str], known: Iterable[str]) -> None:
    if (error := unknown_setting(group, given, known)) is not None:
        raise error


def field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls) if f.init)


def from_settings(cls: type[T], cfg: Mapping[str, Any], group: str, **converted: Any) -> T:
    """`cls(**cfg)` for a dataclass once every key of `cfg` is one of its fields; `converted` replaces
    values built first (e.g. a nested settings object)."""
    check_keys(group, cfg, field_names(cls))
    return cls(**{**dict(cfg), **converted})


def constructor_keys(cls: type) -> tuple[str, ...]:
    """The keyword arguments `cls(...)` accepts, following `**kwargs` up to the base classes that take them."""
    keys: list[str] = []
    for klass in (k for k in cls.__mro__ if k is not object and "__init__" in vars(k)):
        params = list(inspect.signature(klass.__init__).parameters.values())[1:]
        keys += [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            break
    return tuple(dict.fromkeys(keys))
