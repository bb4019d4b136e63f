"""Failures of what runs the tools, told apart from the model's own bad calls.

A refusal of arguments is text the model reads. Anything else (a server gone after its retries, a lost
worker, a tool's own bug) is not the model's doing: the episode ends `failed` with the cause
(`ToolInfrastructureError`), never scored. Every result the model could not use carries its failure
kind in `details[FAILURE]` (docs/evaluation.md, "Tool errors and repeated calls").
"""

from __future__ import annotations

from typing import Any

# The details key of a tool's own failure: what the operator needs to find it (a traceback, what
# became of a worker process). Servers log it and never send it; its presence marks the failure.
DIAGNOSTICS = "traceback"

# The details key of a result's failure kind, and the kinds.
FAILURE = "failure"
REFUSED = "refused"  # the tool refused its arguments (its error text says why)
UNKNOWN_TOOL = "unknown_tool"  # the model named a tool it is not offered
UNKNOWN_IDS = "unknown_ids"  # every id it named (chunk ids, reference ids) does not exist; nothing read
EMPTY = "empty"  # a search or find that matched nothing
ALREADY_READ = "already_read"  # a chunk_read whose every chunk was read before in the episode: no new text
INFRASTRUCTURE = "infrastructure"  # the tool or what runs it failed (the episode fails with it)
FAILURE_KINDS = (REFUSED, UNKNOWN_TOOL, UNKNOWN_IDS, EMPTY, ALREADY_READ, INFRASTRUCTURE)


class ToolInfrastructureError(RuntimeError):
    """A tool call failed for a reason other than its arguments; the episode fails with this cause.
    The message is for the run's records and names settings (index.url), never a server's address."""


def is_internal_failure(result: Any) -> bool:
    """A tool that failed on its own (a bug, a broken index, a lost worker), not on the caller's arguments."""
    return DIAGNOSTICS in result.details


def checked(result: Any) -> Any:
    """`result` (a ToolResult), unless it is the tool's own failure: that raises ToolInfrastructureError."""
    if is_internal_failure(result):
        raise ToolInfrastructureError(f"{result.tool} failed on its own: {result.error}")
    return result
