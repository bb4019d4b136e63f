"""How every command ends on a problem the user can fix: one line `error: <what and where>` and exit
status 1, no traceback; on Ctrl-C, exit status 130 (after saying what was kept, where that matters).
A task that raised on a Ray worker raises the same error here (arag.runtime.part_runner), so it is
reported the same way."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Iterator, NoReturn

# Bad settings, input, index folder or results folder, an unreachable tool server (the message names
# the setting, file, part or address). Built-in types always count.
BUILTIN_USER_ERRORS: tuple[type[BaseException], ...] = (FileNotFoundError, ImportError, ValueError)
# arag's own, by (module, class): a class counts only once its module is loaded (an error of it cannot
# have been raised before), so a command does not import what it never uses (Ray, the tool-server client).
ARAG_USER_ERRORS = (
    ("arag.corpus.readers", "CorpusError"),
    ("arag.index.build", "IndexDirectoryError"),
    ("arag.index.store", "IncompleteIndexError"),
    ("arag.graph.build", "GraphBuildError"),
    ("arag.evaluation.questions", "QuestionFileError"),
    ("arag.evaluation.results", "RunLockedError"),
    ("arag.runtime.evaluate_job", "EvaluationError"),
    ("arag.serve.client", "ToolServerError"),
    ("duckdb", "Error"),  # e.g. a bad report.where filter: DuckDB's message names the problem
)


def user_errors(also: tuple[type[BaseException], ...] = ()) -> tuple[type[BaseException], ...]:
    loaded = tuple(getattr(sys.modules[module], name) for module, name in ARAG_USER_ERRORS if module in sys.modules and hasattr(sys.modules[module], name))
    return BUILTIN_USER_ERRORS + loaded + tuple(also)


@contextmanager
def exit_on_error(*, interrupted: str | None = None, also: tuple[type[BaseException], ...] = ()) -> Iterator[None]:
    """`also`: more error types this command reports as user errors; `interrupted`: the line printed
    on Ctrl-C (what was kept, how to finish)."""
    try:
        yield
    except KeyboardInterrupt:
        if interrupted:
            print(f"interrupted: {interrupted}", file=sys.stderr)
        sys.exit(130)
    except Exception as exc:
        if isinstance(exc, user_errors(also)):
            sys.exit(f"error: {exc}")
        raise


def print_error(message: str) -> None:
    """One `error: ...` line for an outcome the command reports and goes on from (a sweep's run that
    ended with failed episodes, while the sweep's other runs still run)."""
    print(f"error: {message}", file=sys.stderr)


def exit_with_errors(messages: list[str]) -> NoReturn:
    """Exit status 1 after one `error: ...` line per message: runs ended with failures that remain (the
    command's outcome, not an error raised)."""
    sys.exit("\n".join(f"error: {m}" for m in messages))
