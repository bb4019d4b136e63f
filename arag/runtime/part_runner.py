"""Run a job's parts as Ray tasks: the shape the index build (chunking, input checks) and the graph
build (extraction) share.

Each part not yet committed runs as one task (`task(part, **shared)`, plain Python that writes its
files where it runs and returns a small commit record); at most `max_in_flight` tasks are
submitted at a time, so the driver holds a bounded number of futures however many parts there
are. Records already committed (a resumed build) are kept, not run again. The driver only
collects the records, advances a progress bar and returns them in plan order.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence, TypeVar

from arag.runtime.progress import progress_bar

log = logging.getLogger("arag.runtime")

P = TypeVar("P")  # a planned part: anything with an int `.part`
R = TypeVar("R")  # its commit record


@dataclass(frozen=True)
class PartTasks:
    """How each part's task is scheduled."""

    num_cpus: float = 1
    num_gpus: float = 0
    max_in_flight: int = 64  # tasks submitted at a time
    max_retries: int = 1  # a task whose worker died is run again (parts are idempotent)

    def __post_init__(self) -> None:
        if self.max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {self.max_in_flight}")


def _run(task: Callable[..., Any], part: Any, shared: Mapping[str, Any]) -> Any:
    return task(part, **shared)


def run_part_tasks(task: Callable[..., Any], parts: Sequence[P], shared: Mapping[str, Any], tasks: PartTasks) -> Iterator[Any]:
    """`task(part, **shared)` for every part as a Ray task; yields the results as they finish. An
    exception raised by the task is raised here as itself (not wrapped in Ray's error), so callers
    and the CLIs catch the same errors as without Ray."""
    import ray
    from ray.exceptions import RayTaskError

    remote = ray.remote(num_cpus=tasks.num_cpus, num_gpus=tasks.num_gpus or None, max_retries=tasks.max_retries)(_run)
    shared_ref = ray.put(dict(shared))  # sent to the object store once, not with every task
    queue: deque = deque(parts)
    in_flight: list = []
    try:
        while queue or in_flight:
            while queue and len(in_flight) < tasks.max_in_flight:
                in_flight.append(remote.remote(task, queue.popleft(), shared_ref))
            ready, in_flight = ray.wait(in_flight, num_returns=1)
            try:
                yield ray.get(ready[0])
            except RayTaskError as exc:
                if isinstance(exc.cause, Exception):
                    log.debug("task failed:\n%s", exc)
                    raise exc.cause from None
                raise
    finally:
        for ref in in_flight:  # an error or an abandoned loop: stop what is still running
            ray.cancel(ref)


def run_parts(
    plan: Sequence[P],
    done: Mapping[int, R],
    task: Callable[..., dict],
    shared: Mapping[str, Any],
    to_record: Callable[[dict], R],
    *,
    tasks: PartTasks = PartTasks(),
    progress: bool = True,
    desc: str = "parts",
    unit: str = "part",
    size: Callable[[P], int] = lambda part: 1,
    totals: Mapping[str, str] | None = None,
    after_each: Callable[[int], None] | None = None,
) -> list[R]:
    """The records of every part of `plan`, in plan order: those in `done` as they are, the others
    by running `task` (see `run_part_tasks`) and turning its result into a record (`to_record`).

    size: a part's progress units (e.g. its chunks); totals: {label: record attribute} summed over
    the records and shown beside the bar; after_each(n): called with the number of records held
    after each task finishes (the kill tests' fault points)."""
    records: dict[int, R] = dict(done)
    pending = [p for p in plan if p.part not in records]  # type: ignore[attr-defined]
    sums = {label: sum(getattr(r, attr) for r in records.values()) for label, attr in (totals or {}).items()}
    with progress_bar(sum(size(p) for p in plan), desc, progress, unit=unit) as bar:
        bar.update(sum(size(p) for p in plan if p.part in records))  # type: ignore[attr-defined]
        by_part = {p.part: p for p in pending}  # type: ignore[attr-defined]
        if pending:
            for result in run_part_tasks(task, pending, shared, tasks):
                record = to_record(result)
                records[record.part] = record  # type: ignore[attr-defined]
                for label, attr in (totals or {}).items():
                    sums[label] += getattr(record, attr)
                bar.update(size(by_part[record.part]))  # type: ignore[attr-defined]
                if sums:
                    bar.set_postfix(sums)
                if after_each is not None:
                    after_each(len(records))
    return [records[p.part] for p in plan]  # type: ignore[attr-defined]
