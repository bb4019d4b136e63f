"""Score a finished run's answers again with another judge, as a new run, without re-running agents
(docs/evaluation.md, "Re-judging"). A re-judge of a re-judge starts from the original run, so the
identity does not grow with every judge tried."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
import time
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, Callable, Iterable

import pyarrow.parquet as pq

from arag.evaluation.judge import Judge, JudgeConfig
from arag.evaluation.protocol import protocol_card
from arag.evaluation.rows import OK, ROW_FAILED, row_schema
from arag.evaluation.results import RUN_INFO, RunStore, find_run_dirs
from arag.evaluation.run_settings import RunSettings
from arag.llm.base import LLMBackend


class RejudgeError(ValueError):
    """A source run that cannot be re-judged (missing, incomplete description)."""


@dataclass(frozen=True)
class SourceRun:
    path: Path
    run_id: str
    settings: RunSettings
    identity: dict[str, Any]

    @classmethod
    def open(cls, path: str | Path) -> "SourceRun":
        path = Path(path)
        info_file = RunStore.at(path).info_path
        if not info_file.is_file():
            raise RejudgeError(f"{path} is not a run folder (no {info_file.name}): give results.path=<results tree> and runs=[<run id>, ...]")
        try:
            info = json.loads(info_file.read_text(encoding="utf-8"))
            settings = RunSettings.from_json(info["settings"])
            return cls(path, str(info["run_id"]), settings, dict(info["identity"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise RejudgeError(f"{info_file}: not a run description this version can read ({type(exc).__name__}: {exc})") from exc

    @property
    def is_rejudged(self) -> bool:
        return self.settings.rejudged_from is not None

    def origin(self) -> dict[str, Any]:
        return self.settings.rejudged_from or {"run_id": self.run_id, "identity": self.identity}

    @property
    def store(self) -> RunStore:
        """Read only: its lock is not taken, it may still be evaluated."""
        return RunStore.at(self.path)


def find_runs(results_root: str | Path, run_ids: Iterable[str] | None = None) -> list[SourceRun]:
    """The runs named, or every run under `results_root` that is not itself a re-judge."""
    root = Path(results_root)
    if not root.is_dir():
        raise RejudgeError(f"no results folder at {root}")
    if run_ids is not None:
        if not run_ids:
            raise RejudgeError("runs=[] names no run: give runs=[<run id>, ...], or runs=null for every run under results.path")
        if missing := [r for r in run_ids if not RunStore(root, r).has_info()]:
            known = [p.name for p in find_run_dirs(root, nested=False)]
            raise RejudgeError(f"no run {', '.join(missing)} under {root}; its runs: {', '.join(known) or 'none'}")
        return [SourceRun.open(root / r) for r in run_ids]
    runs = [SourceRun.open(p) for p in find_run_dirs(root, nested=False)]
    if not runs:
        raise RejudgeError(f"no runs (folders with {RUN_INFO}) under {root}")
    originals = [r for r in runs if not r.is_rejudged]
    if not originals:
        raise RejudgeError(f"every run under {root} is itself a re-judge; name the ones to judge again with runs=[<run id>, ...]")
    return originals


def checked_judge(judge: dict[str, Any]) -> JudgeConfig:
    config = JudgeConfig.from_dict(judge)
    if not config.enabled:
        raise RejudgeError("judge.enabled=false: re-judging needs a judge")
    return config


def rejudged_settings(source: SourceRun, judge: dict[str, Any], judge_model: dict[str, Any] | None) -> RunSettings:
    checked_judge(judge)
    return dataclasses.replace(source.settings, judge=dict(judge), judge_model=judge_model, rejudged_from=source.origin())


@dataclass
class RejudgeCounts:
    source_episodes: int = 0
    already_judged: int = 0
    judged: int = 0
    judge_failed: int = 0
    failed_copied: int = 0
    wall_s: float = 0.0


def rejudge_run(source: SourceRun, results_root: str | Path, settings: RunSettings, backend: LLMBackend, *, concurrency: int = 1,
                batch_size: int = 25, on_row: Callable[[], None] | None = None) -> RejudgeCounts:
    """Judge the source's answered episodes the new run lacks, copy its failed ones, log the invocation.
    `settings`: the new run's (rejudged_settings)."""
    started = time.time()
    judge = Judge(backend, JudgeConfig.from_dict(settings.judge))
    settings_json = settings.identity_json
    counts = RejudgeCounts()
    with RunStore(results_root, settings.run_id) as store:
        info = {
            "run_id": settings.run_id,
            "created": dt.datetime.now(dt.timezone.utc).isoformat(),
            "identity": settings.identity(),
            "settings": settings.to_json(),
            "rejudged_from": settings.rejudged_from["run_id"],
            "source_path": str(source.path.resolve()),
        }
        store.write_run_info({**info, "protocol": protocol_card(info).to_json()})
        done = store.done_ids()
        counts.already_judged = len(done)
        gate = asyncio.Semaphore(max(1, concurrency))

        async def judged(row: dict[str, Any]) -> dict[str, Any]:
            async with gate:
                verdict = await judge.judge(row["question"], row["gold_answers"] or [], row["prediction"], exact=row["exact_match"] == 1.0)
            counts.judge_failed += verdict.llm_acc is None
            if on_row is not None:
                on_row()
            return row | verdict.columns() | {
                "run_id": settings.run_id, "settings": settings_json,
                # an episode's wall time includes its judge's: this judge's now
                "wall_s": (row["wall_s"] or 0.0) - (row["judge_s"] or 0.0) + verdict.latency_s,
            }

        async def judge_all() -> set[str]:  # one event loop: an endpoint client keeps its connections
            answered = set(done)
            rows = (row for part in source.store.part_files() for row in pq.read_table(part, schema=row_schema()).to_pylist()
                    if row["question_id"] not in done and row["status"] == OK)
            while batch := list(islice(rows, max(batch_size, concurrency))):  # a batch keeps `concurrency` calls in flight
                answered.update(r["question_id"] for r in batch)
                new_rows = await asyncio.gather(*(judged(r) for r in batch))
                store.claim_failed(r["question_id"] for r in new_rows)  # a question is never both answered and failed
                store.write(new_rows)
                counts.judged += len(new_rows)
            return answered

        seen_ok = asyncio.run(judge_all())
        counts.source_episodes = len(seen_ok)
        source_failed = source.store.failed_table()
        if source_failed is not None:
            failed = [
                r | {"run_id": settings.run_id, "settings": settings_json}
                for r in source_failed.to_pylist()
                if r["question_id"] not in seen_ok and r["status"] == ROW_FAILED
            ]
            store.write(failed)  # replaces the same questions' rows from an earlier re-judge
            counts.failed_copied = len(failed)
        counts.wall_s = time.time() - started
        store.log_invocation({
            "started": dt.datetime.fromtimestamp(started, dt.timezone.utc).isoformat(),
            "finished": dt.datetime.now(dt.timezone.utc).isoformat(),
            "rejudged_from": settings.rejudged_from["run_id"],
            **dataclasses.asdict(counts),
        })
    return counts
