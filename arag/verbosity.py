"""Library output a user need not act on, off unless `--verbose` or ARAG_VERBOSE=1 (docs/evaluation.md).
The quiet settings are environment variables set before Ray starts, so a local instance's workers
inherit them; a setting the user exported is left as it is."""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
from contextlib import contextmanager
from typing import Iterator

VERBOSE_ENV = "ARAG_VERBOSE"
VERBOSE_FLAG = "--verbose"
# faiss's loader reports every CPU-specific build it could not load before the one it loads.
QUIET_LOGGERS = ("faiss.loader", "ray", "ray.data", "transformers", "sentence_transformers", "httpx")
QUIET_ENV = {
    "TRANSFORMERS_VERBOSITY": "error",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",  # transformers' "Loading weights" bar in every embedding actor
    # A deprecation inside transformers that sentence-transformers triggers in every embedding actor
    # (Python's -W syntax: the module is matched whole).
    "PYTHONWARNINGS": "ignore::FutureWarning:transformers.modeling_utils",
}
# C++ log lines of the driver's Ray core worker that need no action. Ray Data passes its actors'
# constructor arguments by reference and restarts lost actors, and Ray logs that pairing at error
# level for every actor pool (ray-project/ray#53727); the arguments stay referenced for the pool's life.
HARMLESS_RAY_LINES = (
    re.compile(rb"^\[[^\]]*\] core_worker\.cc:\d+: Actor with class name: .* has constructor arguments in the object store and max_restarts > 0"),
)


def verbose() -> bool:
    return os.environ.get(VERBOSE_ENV, "").strip().lower() in ("1", "true", "yes")


def quiet_loggers() -> None:
    level = logging.INFO if verbose() else logging.ERROR
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(level)


def set_verbosity(argv: list[str]) -> list[str]:
    """`argv` without `--verbose` (ours, not Hydra's: verbose from now on); the loggers set accordingly."""
    if VERBOSE_FLAG in argv:
        os.environ[VERBOSE_ENV] = "1"
        argv = [a for a in argv if a != VERBOSE_FLAG]
    quiet_loggers()
    return argv


def quiet_environment() -> dict[str, str]:
    """The variables to set for a quiet run: none when verbose, none the user set."""
    return {} if verbose() else {k: v for k, v in QUIET_ENV.items() if k not in os.environ}


def quiet_libraries() -> dict[str, str]:
    """Set the quiet environment and loggers; the variables set (a cluster's workers need them)."""
    added = quiet_environment()
    os.environ.update(added)
    quiet_loggers()
    return added


def _harmless(line: bytes) -> bool:
    return any(p.search(line) for p in HARMLESS_RAY_LINES)


@contextmanager
def harmless_ray_lines_hidden() -> Iterator[None]:
    """While the block runs, stderr (fd 2, where Ray's C++ code writes) drops HARMLESS_RAY_LINES and
    passes everything else as written (a partial line such as a progress bar's at once)."""
    if verbose():
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)

    def pump() -> None:
        pending = b""
        with os.fdopen(read_end, "rb", buffering=0) as source:
            while chunk := source.read(65536):
                *lines, pending = (pending + chunk).split(b"\n")
                kept = b"".join(line + b"\n" for line in lines if not _harmless(line))
                if pending and not pending.startswith(b"["):  # not the start of a Ray log line: show it now
                    kept, pending = kept + pending, b""
                if kept:
                    os.write(saved, kept)
        if pending and not _harmless(pending):
            os.write(saved, pending)

    thread = threading.Thread(target=pump, name="stderr-filter", daemon=True)
    thread.start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # closes the pipe's last write end: the filter reads to its end and stops
        thread.join(timeout=5)
        os.close(saved)
