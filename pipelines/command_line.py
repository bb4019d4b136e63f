"""The pipelines' command line: `pipeline_main(name)` is `hydra.main` over conf/<name>.yaml whose
composition errors (struct mode's unknown key, OmegaConf's ValidationError, a group choice Hydra
cannot find or compose, an override its parser cannot read) end the command with one line naming the
setting and the key or choice probably meant, instead of Hydra's advice to add the key with `+` or its
search path. The task receives the pipeline's typed settings, from its one conversion (by default
pipelines.config_checks.checked_settings)."""

from __future__ import annotations

import difflib
import functools
import os
import re
import sys
from typing import Any, Callable

from omegaconf import DictConfig

from arag.config.files import conf_dir
from arag.config.typed import check_schema_nodes, unknown_key
from arag.verbosity import set_verbosity
from pipelines.config_checks import checked_settings
from pipelines.errors import exit_on_error

RUN_FLAGS = ("-m", "--multirun")  # any other flag is a mode of Hydra's own (help, printing the config)
# Hydra's errors for a group chosen without `+` that the config does not choose, and with `+` one it does.
NOT_CHOSEN = re.compile(r"Could not override '([\w/]+)'\. No match")
ALREADY_CHOSEN = re.compile(r"Multiple values for ([\w/]+)\.|Could not (?:append|add)[^']*'([\w/]+)")


def unknown_choice(group: str, choice: str, options: list[str]) -> str:
    close = difflib.get_close_matches(choice, options, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}?)" if close else ""
    where = f" (conf/{group}/)" if (conf_dir() / group).is_dir() else ""
    return f"unknown {group}={choice}{hint}; the choices of {group}{where}: {', '.join(options) or 'none'}"


def explain(config_name: str, exc: Exception, overrides: list[str], options: Callable[[str], list[str]]) -> ValueError:
    """Hydra's composition error `exc` as one line (an UnknownSettingError for an unknown key)."""
    cause, text = exc.__cause__, str(exc).strip()
    if getattr(exc, "options", None) is not None:  # MissingConfigException: no such group option
        group, _, choice = str(exc.missing_cfg_file).rpartition("/")
        return ValueError(unknown_choice(group, choice, list(exc.options)))
    if isinstance(cause, (KeyError, AttributeError)) and getattr(cause, "full_key", None) and (unknown := unknown_key(cause)):
        return unknown
    if type(cause).__name__ == "ValidationError":
        return ValueError(f"setting {cause.full_key}: {str(cause).splitlines()[0]}")
    chosen = {arg.lstrip("+~").partition("=")[0].split("@")[0]: arg for arg in overrides}
    if (match := NOT_CHOSEN.match(text)) and (group := match[1]) in chosen:
        return ValueError(f"{chosen[group]}: {config_name}'s config chooses no {group} to replace; add one with +{chosen[group]} (the choices of {group}: {', '.join(options(group))})")
    if (match := ALREADY_CHOSEN.match(text)) and (group := match[1] or match[2]) in chosen:
        return ValueError(f"{chosen[group]}: {config_name}'s config chooses a {group} already; replace it with {chosen[group].lstrip('+')}")
    return ValueError(f"{(text.splitlines() or [type(exc).__name__])[0]} (in {', '.join(overrides)})")


def check_command_line(config_name: str, args: list[str]) -> None:
    """Raise ValueError (one line) for what Hydra refuses in `args` (in any run of a sweep), or a key
    `+` adds to a schema node; an override Hydra cannot read, once its key is checked (a misspelled
    key is the likelier mistake)."""
    from hydra import compose, initialize_config_dir
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    if any(a.startswith("-") and a not in RUN_FLAGS for a in args):
        return
    readable, unreadable = [], None
    for arg in (a for a in args if a not in RUN_FLAGS and not a.lstrip("+~").startswith("hydra")):
        try:
            OverridesParser.create().parse_override(arg)
            readable.append(arg)
        except HydraException as exc:
            reason = (str(exc).strip().splitlines() or ["cannot be parsed"])[0]
            unreadable = unreadable or ValueError(f"cannot read the setting {arg!r} ({reason}); quote a value with spaces, quotes or punctuation, e.g. key='...' inside the shell's quotes")
            key, sep, _ = arg.partition("=")
            if sep and not (conf_dir() / key.lstrip("+~").split("@")[0]).is_dir():
                readable.append(f"{key}=x")
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(str(conf_dir()), version_base="1.3"):
            loader = GlobalHydra.instance().config_loader()
            for run in BasicSweeper.split_arguments(OverridesParser.create(config_loader=loader).parse_overrides(readable), None)[0]:
                try:
                    check_schema_nodes(compose(config_name, overrides=run))
                except HydraException as exc:
                    raise explain(config_name, exc, run, loader.get_group_options) from None
    finally:
        GlobalHydra.instance().clear()
    if unreadable:
        raise unreadable


def given_text(key: str, overrides: list[str]) -> str | None:
    """The text the last of `overrides` naming `key` gave it, as typed (Hydra reads an unquoted 1e3 as
    a number, true as a boolean); None when none names it."""
    for override in reversed(overrides):
        name, sep, raw = override.partition("=")
        if sep and name.lstrip("+~") == key:
            return raw
    return None


def pipeline_main(config_name: str, settings: Callable[[Any], Any] = checked_settings) -> Callable[[Callable[[Any], Any]], Callable[..., Any]]:
    """`@hydra.main` for conf/<config_name>.yaml, its composition errors one line each; the task gets
    `settings(cfg)`, the pipeline's one conversion of the composed config to its typed settings (its
    checks among them; a problem it names ends the command with one line)."""
    import hydra
    from hydra.errors import HydraException

    def wrap(task: Callable[[Any], Any]) -> Callable[..., Any]:
        @functools.wraps(task)  # Hydra names the job (its log file) from the task's module
        def run_task(cfg: Any) -> Any:
            with exit_on_error():
                config = settings(cfg)
            return task(config)

        hydra_main = hydra.main(config_path=str(conf_dir()), config_name=config_name, version_base="1.3")(run_task)

        @functools.wraps(task)
        def main(cfg: Any = None) -> Any:
            if cfg is not None:  # a test's: composed, or already the typed settings
                return run_task(cfg) if isinstance(cfg, DictConfig) else task(cfg)
            argv = set_verbosity(sys.argv)
            # -m first, wherever it was given: Hydra's argument parser takes no flag among the overrides
            sys.argv = [argv[0], *(a for a in argv[1:] if a in RUN_FLAGS), *(a for a in argv[1:] if a not in RUN_FLAGS)]
            os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra raises its errors instead of printing them
            try:
                return hydra_main()
            except HydraException as exc:
                with exit_on_error():
                    check_command_line(config_name, sys.argv[1:])  # composed again, to name the mistake
                    raise explain(config_name, exc, sys.argv[1:], lambda group: []) from None

        return main

    return wrap
