"""arag.runtime.part_runner: parts as Ray Data tasks with bounded in-flight, committed ones kept,
records in plan order, a task's own error raised as itself."""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

from arag.corpus.readers import CorpusError
from arag.runtime.part_runner import PartTasks, run_part_tasks, run_parts


@dataclass(frozen=True)
class Part:
    part: int
    size: int


@dataclass(frozen=True)
class Record:
    part: int
    doubled: int
    pid: int


def double(part: Part, *, factor: int) -> Record:
    if part.size < 0:
        raise CorpusError(f"part {part.part}: a negative size")
    return Record(part.part, part.size * factor, os.getpid())


def test_runs_pending_parts_keeps_committed_ones_in_plan_order(ray_local):
    plan = [Part(i, i + 1) for i in range(7)]
    committed = {2: Record(2, -1, 0), 5: Record(5, -1, 0)}
    records = run_parts(plan, committed, double, {"factor": 2}, tasks=PartTasks(max_in_flight=2), progress=False, size=lambda p: p.size, totals={"doubled": "doubled"})
    assert [r.part for r in records] == list(range(7))
    assert [r.doubled for r in records] == [2, 4, -1, 8, 10, -1, 14]  # committed records are not run again
    assert {r.pid for r in records if r.pid} and os.getpid() not in {r.pid for r in records}  # ran in Ray workers


def test_a_task_error_is_raised_as_itself(ray_local):
    plan = [Part(0, 1), Part(1, -1), Part(2, 3)]
    with pytest.raises(CorpusError, match="^part 1: a negative size$") as err:
        run_parts(plan, {}, double, {"factor": 2}, progress=False)
    assert type(err.value) is CorpusError  # not Ray's wrapper: the CLIs print its message as it is


def test_in_flight_must_be_positive():
    with pytest.raises(ValueError, match="max_in_flight must be at least 1"):
        PartTasks(max_in_flight=0)


def slow_double(part: Part, *, factor: int, seconds: float) -> Record:
    import time

    time.sleep(seconds)
    return double(part, factor=factor)


def test_a_part_may_take_longer_than_ray_datas_no_progress_limit(ray_local):
    """Ray Data fails a dataset that moves nothing for its limit (30 min by default); a part is the
    unit of progress and a large one may take longer, so the part runner lifts it."""
    import ray.data

    ray.data.DataContext.get_current().execution_no_progress_timeout_s = 1  # as if 30 min had passed
    rows = list(run_part_tasks(slow_double, [Part(0, 3)], {"factor": 2, "seconds": 4.0}, PartTasks()))
    assert [r.doubled for r in rows] == [6]

