"""The pipelines' command line: `pipeline_main(name)` is `hydra.main` over conf/<name>.yaml whose
composition errors end the command with one line (pipelines.config_checks names the setting and the
key or choice probably meant, instead of Hydra's advice to add the key with `+` or its search path).
The task receives the pipeline's typed settings, from its one conversion (by default
pipelines.config_checks.checked_settings)."""

from __future__ import annotations

import functools
import os
import sys
from typing import Any, Callable

from omegaconf import DictConfig

from arag.config.files import conf_dir
from arag.verbosity import set_verbosity
from pipelines.config_checks import RUN_FLAGS, check_command_line, checked_settings, explain
from pipelines.errors import exit_on_error


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
