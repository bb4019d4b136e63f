"""How the build commands (pipelines.index, pipelines.graph) end on a problem the user can fix: one
line `error: <what and where>` and exit status 1, no traceback. A part's task that raised on a Ray
worker raises the same error here (arag.runtime.part_runner), so it is reported the same way."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Iterator

from arag.corpus.readers import CorpusError
from arag.graph.build import GraphBuildError
from arag.index.build import IndexDirectoryError
from arag.index.store import IncompleteIndexError

# Bad settings, input or index folder (the message names the setting, file or part).
USER_ERRORS = (CorpusError, IndexDirectoryError, GraphBuildError, IncompleteIndexError, FileNotFoundError, ImportError, ValueError)


@contextmanager
def exit_on_user_error() -> Iterator[None]:
    try:
        yield
    except USER_ERRORS as exc:
        sys.exit(f"error: {exc}")
