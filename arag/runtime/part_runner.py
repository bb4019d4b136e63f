"""Run a job's parts on Ray Data (the index and graph builds): each part not yet committed is one task
writing its files where it runs and returning a small commit record; the driver holds only
descriptors and records."""

from __future__ import annotations

import logging
import pickle
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence, TypeVar

from arag.runtime.progress import progress_bar
from arag.verbosity import verbose

P = TypeVar("P")  # a planned part: anything with an int `.part`
R = TypeVar("R")  # its commit record


@dataclass(frozen=True)
class PartTasks:
    num_cpus: float = 1
    num_gpus: float = 0
    max_in_flight: int = 64  # tasks running at a time (a task whose worker died is run again by Ray Data: parts are idempotent)

    def __post_init__(self) -> None:
        if self.max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {self.max_in_flight}")


def ray_data_for_parts() -> None:
    """No bars or banners of Ray Data's own (the jobs show theirs); results in submission order; no
    limit on a part's time: Ray Data fails a dataset that moves nothing for 30 min, and one part
    can take longer (a 64 MiB part embedded by MiniLM on 2 busy cores). A failed task is still retried."""
    import ray.data

    ctx = ray.data.DataContext.get_current()
    ctx.execution_no_progress_timeout_s = -1
    ctx.enable_progress_bars = False
    ctx.execution_options.preserve_order = True
    ctx.print_on_execution_start = False
    logging.getLogger("ray.data").setLevel(logging.WARNING if verbose() else logging.ERROR)


def _apply(row: dict, task: Callable[..., Any], shared: Mapping[str, Any]) -> dict:
    """One pickled part in, its task's result out. An exception comes back as the row's `error`: Ray
    Data's UserCodeException would lose it, and the CLIs print a part's own error as it is."""
    try:
        return {"result": pickle.dumps(task(pickle.loads(row["part"]), **shared)), "error": None}
    except Exception as exc:  # noqa: BLE001 - handed to the driver, raised there
        try:
            error = pickle.dumps(exc)
            pickle.loads(error)
        except Exception:  # noqa: BLE001 - an exception that does not survive pickling
            error = pickle.dumps(RuntimeError("".join(traceback.format_exception(exc)).rstrip()))
        return {"result": None, "error": error}


def run_part_tasks(task: Callable[..., Any], parts: Sequence[P], shared: Mapping[str, Any], tasks: PartTasks) -> Iterator[Any]:
    """`task(part, **shared)` per part, yielded as they finish; a task's exception is raised as itself."""
    import ray.data

    if not parts:
        return
    ray_data_for_parts()
    rows = [{"part": pickle.dumps(p)} for p in parts]  # small descriptors (file, byte range), never data
    ds = ray.data.from_items(rows, override_num_blocks=len(rows)).map(
        _apply,
        fn_kwargs={"task": task, "shared": dict(shared)},
        num_cpus=tasks.num_cpus,
        num_gpus=tasks.num_gpus or None,
        concurrency=min(tasks.max_in_flight, len(rows)),
    )
    for row in ds.iter_rows():
        if row["error"] is not None:
            raise pickle.loads(row["error"])  # leaving the iteration stops the parts still running
        yield pickle.loads(row["result"])


def run_parts(plan: Sequence[P], done: Mapping[int, R], task: Callable[..., R], shared: Mapping[str, Any], *, tasks: PartTasks = PartTasks(),
              progress: bool = True, desc: str = "parts", unit: str = "part", size: Callable[[P], int] = lambda part: 1,
              totals: Mapping[str, str] | None = None) -> list[R]:
    """Every part's record in plan order: `done`'s as they are, the others `task(part, **shared)`'s.
    size: a part's progress units; totals: {label: record attribute} summed beside the bar."""
    records: dict[int, R] = dict(done)
    pending = [p for p in plan if p.part not in records]  # type: ignore[attr-defined]
    sums = {label: sum(getattr(r, attr) for r in records.values()) for label, attr in (totals or {}).items()}
    with progress_bar(sum(size(p) for p in plan), desc, progress, unit=unit) as bar:
        bar.update(sum(size(p) for p in plan if p.part in records))  # type: ignore[attr-defined]
        by_part = {p.part: p for p in pending}  # type: ignore[attr-defined]
        for record in run_part_tasks(task, pending, shared, tasks):
            records[record.part] = record  # type: ignore[attr-defined]
            for label, attr in (totals or {}).items():
                sums[label] += getattr(record, attr)
            bar.update(size(by_part[record.part]))  # type: ignore[attr-defined]
            if sums:
                bar.set_postfix(sums)
    return [records[p.part] for p in plan]  # type: ignore[attr-defined]
