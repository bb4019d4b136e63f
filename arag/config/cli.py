"""The pipelines' command line: `pipeline_main(name)` is `hydra.main` over conf/<name>.yaml, with
the command line's settings checked first, so that a misspelled key (`limt=3`) or an unreadable
value (`qustion=x's y`) stops the command with one line naming it (and the key it was probably
meant to be) instead of Hydra's advice to add the key with `+` or its parser's traceback; and so
that an unknown group choice (`method=nonexistent`, `+corpus=2wiki`) or one Hydra cannot compose
(`smoke=scripted` without `+`) is one line with the group's choices, not Hydra's error with its
search path."""

from __future__ import annotations

import difflib
import functools
import re
import sys
from typing import Any, Callable

from omegaconf import DictConfig, OmegaConf

from arag.config.files import conf_dir
from arag.strict_settings import check_keys
from arag.verbosity import set_verbosity

_ABSENT = object()
# Hydra's flags whose modes (help, printing the config, ...) are Hydra's own; the check only
# accompanies a run (-m / --multirun included).
RUN_FLAGS = ("-m", "--multirun")
# Hydra's composition errors for a group chosen without `+` that the config's defaults do not
# choose, and with `+` one that they do.
NOT_CHOSEN = re.compile(r"Could not override '([\w/]+)")
ALREADY_CHOSEN = re.compile(r"Multiple values for ([\w/]+)\.|Could not (?:append|add)[^']*'([\w/]+)")


def _is_group(key: str) -> bool:
    from hydra.core.config_store import ConfigStore

    if key.startswith("hydra/"):
        return True
    return (conf_dir() / key).is_dir() or ConfigStore.instance().repo.get(key.split("@")[0]) is not None


def _parse(arg: str):
    """Hydra's reading of one override; for one it cannot read, the reading of its key alone
    (the key is checked first: a misspelled key is the likelier mistake) and the one-line error."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    try:
        return parser.parse_override(arg), None
    except HydraException as exc:
        reason = (str(exc).strip().splitlines() or ["cannot be parsed"])[0]
        error = ValueError(f"cannot read the setting {arg!r} ({reason}); quote a value with spaces, quotes or punctuation, e.g. key='...' inside the shell's quotes")
    key, sep, _ = arg.partition("=")
    try:
        return (parser.parse_override(f"{key}=x") if sep else None), error
    except HydraException:
        return None, error


def _group(override) -> str:
    return override.key_or_group.split("@")[0]


def _choices(override) -> list[str]:
    """The option names a group override chooses (each of a sweep's); none for `group=null`, and
    for a sweep Hydra expands against the options itself (`glob(...)`)."""
    try:
        values = list(override.sweep_string_iterator()) if override.is_sweep_override() else [override.get_value_element_as_str()]
    except Exception:
        return []
    return [v for v in values if v not in (None, "null")]


def unknown_choice(group: str, choice: str, options: list[str]) -> str:
    close = difflib.get_close_matches(choice, options, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}?)" if close else ""
    where = f" (conf/{group}/)" if (conf_dir() / group).is_dir() else ""
    return f"unknown {group}={choice}{hint}; the choices of {group}{where}: {', '.join(options) or 'none'}"


def composition_error(config_name: str, exc: Exception, overrides: list[str], options: Callable[[str], list[str]]) -> str:
    """Hydra's composition error as one line: a group chosen without `+` that the config does not
    choose by default, or with `+` one that it does; any other, Hydra's first line."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    text = str(exc).strip()
    chosen = {_group(o): arg for arg, o in zip(overrides, OverridesParser.create().parse_overrides(overrides))}
    if (match := NOT_CHOSEN.match(text)) and (group := match[1]) in chosen:
        return f"{chosen[group]}: {config_name}'s config chooses no {group} to replace; add one with +{chosen[group]} (the choices of {group}: {', '.join(options(group))})"
    if (match := ALREADY_CHOSEN.match(text)) and (group := match[1] or match[2]) in chosen:
        return f"{chosen[group]}: {config_name}'s config chooses a {group} already; replace it with {chosen[group].lstrip('+')}"
    return f"{(text.splitlines() or [type(exc).__name__])[0]} (in {', '.join(overrides)})"


def _composed(config_name: str, group_overrides: list[str], choices: dict[str, list[str]]) -> DictConfig | None:
    """The config the group choices give, before any key is set, after checking each choice (a
    sweep's too) against the group's options as Hydra lists them; ValueError (one line) for an
    unknown choice or a choice Hydra cannot compose. None when it cannot compose for another
    reason: Hydra's own run then says so."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(str(conf_dir()), version_base="1.3"):
            loader = GlobalHydra.instance().config_loader()
            for group, chosen in choices.items():
                options = loader.get_group_options(group)
                for choice in chosen:
                    if choice not in options:
                        raise ValueError(unknown_choice(group, choice, options))
            try:
                return compose(config_name, overrides=group_overrides)
            except HydraException as exc:
                raise ValueError(composition_error(config_name, exc, group_overrides, loader.get_group_options)) from None
    except ValueError:
        raise
    except Exception:
        return None
    finally:
        GlobalHydra.instance().clear()


def _check_key(cfg: DictConfig, key: str, adding: bool, value: Any = _ABSENT) -> None:
    """A key set on the command line must be in the config, or (with +) be added where the
    config's node has no schema that lacks it; a value must have the type its schema gives."""
    current = OmegaConf.select(cfg, key, default=_ABSENT, throw_on_resolution_failure=False)
    if current is not _ABSENT:
        if value is not _ABSENT:
            from omegaconf.errors import ValidationError

            try:
                # a mapping merges into a mapping; into an unset (null) node it is set whole
                OmegaConf.update(cfg, key, value, merge=current is not None)
            except ValidationError as exc:
                raise ValueError(f"setting {key}: {str(exc).splitlines()[0]}") from None
        return
    parent_key, _, name = key.rpartition(".")
    parent = OmegaConf.select(cfg, parent_key, default=_ABSENT, throw_on_resolution_failure=False) if parent_key else cfg
    if not isinstance(parent, DictConfig):
        return  # no mapping to name the keys of: Hydra's message says what is wrong
    if adding and OmegaConf.get_type(parent) in (dict, None):
        return  # +key adds to an open mapping; the pipeline's own check (pipelines.config_checks) names an unknown one
    check_keys(parent_key, {name: None}, [str(k) for k in parent.keys()])


def check_command_line(config_name: str, args: list[str]) -> None:
    """Raise ValueError (one line) for a command-line setting that cannot be read, a group choice
    that does not exist or cannot be composed (Hydra's own error, in one line), or a key that is not
    in the config the command composes."""
    if any(a.startswith("-") and a not in RUN_FLAGS for a in args):
        return
    groups, keys, swept, errors = [], [], set(), []
    choices: dict[str, list[str]] = {}
    for arg in args:
        if arg in RUN_FLAGS:
            continue
        override, error = _parse(arg)
        if error is not None:
            errors.append(error)
        if override is None or override.key_or_group.startswith("hydra.") or override.key_or_group.startswith("hydra/"):
            continue  # Hydra's own settings are Hydra's to check
        if _is_group(override.key_or_group):
            if error is None and not override.is_delete():
                choices.setdefault(_group(override), []).extend(_choices(override))
            if override.is_sweep_override():
                swept.add(override.key_or_group)
            elif error is None:
                groups.append(arg)
        elif not override.is_delete():
            value = override.value() if error is None and not override.is_sweep_override() else _ABSENT
            keys.append((override.key_or_group, override.is_add() or override.is_force_add(), value))
    cfg = _composed(config_name, groups, choices) if keys or choices else None
    for key, adding, value in keys if cfg is not None else ():
        if key.split(".")[0] not in swept:  # a swept group's keys depend on the choice: its runs check them
            _check_key(cfg, key, adding, value)
    if errors:
        raise errors[0]


def pipeline_main(config_name: str) -> Callable[[Callable[[DictConfig], Any]], Callable[..., Any]]:
    """`@hydra.main` for conf/<config_name>.yaml, the command line checked before Hydra runs."""
    import hydra

    def wrap(task: Callable[[DictConfig], Any]) -> Callable[..., Any]:
        hydra_main = hydra.main(config_path=str(conf_dir()), config_name=config_name, version_base="1.3")(task)

        @functools.wraps(task)
        def main(cfg: DictConfig | None = None) -> Any:
            if cfg is not None:
                return task(cfg)
            sys.argv = set_verbosity(sys.argv)
            try:
                check_command_line(config_name, sys.argv[1:])
            except ValueError as exc:
                sys.exit(f"error: {exc}")
            return hydra_main()

        return main

    return wrap
