"""Whether library output a user need not act on is shown: `--verbose` on a pipeline's command
line, or ARAG_VERBOSE=1 in the environment (which the workers a local Ray instance starts inherit).
Quiet by default: the libraries' Python loggers below say only errors, and arag.runtime.quiet
quiets Ray and what its workers load."""

from __future__ import annotations

import logging
import os

VERBOSE_ENV = "ARAG_VERBOSE"
VERBOSE_FLAG = "--verbose"
# Libraries whose info and warnings need no action: faiss's loader reports every CPU-specific build
# it could not load ("Could not load library ... ModuleNotFoundError") before the one it loads.
QUIET_LOGGERS = ("faiss.loader", "ray", "ray.data", "transformers", "sentence_transformers", "httpx")


def verbose() -> bool:
    return os.environ.get(VERBOSE_ENV, "").strip().lower() in ("1", "true", "yes")


def quiet_loggers() -> None:
    """The QUIET_LOGGERS at ERROR, or INFO when verbose."""
    level = logging.INFO if verbose() else logging.ERROR
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(level)


def set_verbosity(argv: list[str]) -> list[str]:
    """`argv` without `--verbose` (a flag of ours, not Hydra's; with it, verbose from now on), the
    library loggers set accordingly."""
    if VERBOSE_FLAG in argv:
        os.environ[VERBOSE_ENV] = "1"
        argv = [a for a in argv if a != VERBOSE_FLAG]
    quiet_loggers()
    return argv
