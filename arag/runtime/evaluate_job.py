"""Evaluation on Ray: `EpisodeWorker` actors run episodes; the driver feeds them and writes results.

Each worker holds one `arag.evaluation.runner.EpisodeRunner` (the index opened and the backend built
once) and runs up to `concurrency` episodes at once on its event loop. The driver keeps every worker's
slots full and writes rows in batches (at `batch_size` rows, or every `flush_s` seconds) through
`RunStore`. A dead worker's questions in flight go back to the queue and a replacement starts (up to
`max_worker_restarts`); a question in flight on `max_losses` dead workers is recorded as failed. Nothing
returned is written twice, and a killed driver loses only its unwritten batch, which the rerun runs again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections import Counter, deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

import ray

from arag.config.schemas import EvalRuntime
from arag.evaluation.questions import Question
from arag.evaluation.rows import OK
from arag.evaluation.results import RunStore
from arag.evaluation.runner import EpisodeRunner, failed_row
from arag.evaluation.run_settings import RunSettings
from arag.llm.factory import backend_caps, default_concurrency, worker_overrides
from arag.open_files import ensure_open_files
from arag.runtime.faults import hold_at_fault_point
from arag.runtime.progress import progress_bar

log = logging.getLogger("arag.runtime.evaluate")


class EvaluationError(RuntimeError):
    pass


def tool_server_caps(settings: RunSettings, in_flight: int, server_info: dict[str, Any] | None = None) -> list[str]:
    """A served index (index.url) takes `serve.max_connections` connections at once and answers 503
    beyond them; each episode in flight may hold one. A warning when the run may open more.
    `server_info`: the server's description as the run's setup read it (else it is asked now)."""
    if not settings.index_url:
        return []
    if server_info is None:
        from arag.serve.client import open_tools

        with open_tools(index_url=settings.index_url, token_env=settings.index_token_env) as served:
            server_info = served.info
    limit = server_info.get("max_connections")
    if limit is None or int(limit) >= in_flight:
        return []
    return [
        f"the tool server (index.url) takes {limit} connections at once (its serve.max_connections) and this run has {in_flight} episodes "
        f"in flight (runtime.workers x runtime.concurrency), each of which may hold one: calls beyond it are answered 503 and retried, "
        f"and an episode whose retries run out fails; start the server with serve.max_connections={in_flight} or more"
    ]


class EpisodeWorker:
    """A Ray actor (async): one EpisodeRunner, up to `max_concurrency` episodes at once."""

    def __init__(self, settings: dict[str, Any], overrides: list[str], episode_timeout_s: float | None,
                 model_overrides: dict[str, Any] | None = None, secrets: dict[str, str] | None = None, episodes_at_once: int | None = None):
        # One model connection and one tool-server connection per episode in flight.
        if short := ensure_open_files(2 * max(1, int(episodes_at_once or 1)), f"runtime.concurrency={episodes_at_once} episodes in flight"):
            log.warning("%s", short)
        # The driver's secrets (the tool server's token, API keys): a worker on another node does
        # not have the environment the driver was started with. Arguments, not a runtime_env, so
        # they are not shown with the actor's options.
        os.environ.update(secrets or {})

        self.node = ray.get_runtime_context().get_node_id()
        self.threads = max(32, int(episodes_at_once or 1) + 4)
        self.runner = EpisodeRunner(
            RunSettings.from_json(settings), overrides=overrides, episode_timeout_s=episode_timeout_s, model_overrides=model_overrides, episodes_at_once=episodes_at_once
        )

    async def ready(self) -> str:
        # Blocking steps of an episode (a served index's tool calls, naive RAG's retrieval, evidence
        # recall, reaching a vLLM engine) run in the event loop's default executor, which asyncio sizes
        # to the machine's cores (at most 32 threads): with more episodes in flight they queued for a
        # thread. One thread per episode in flight, since an episode runs one such step at a time.
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="arag-episode"))
        return self.node

    async def run(self, question: dict[str, Any], attempt: int) -> dict[str, Any]:
        row = await self.runner.run(Question.from_json(question), attempt, self.node)
        return row.to_record()


@dataclass
class _Worker:
    handle: Any
    slot: int  # a replacement takes the slot (and so the engine) of the worker it replaces
    ready: bool = False
    inflight: set = field(default_factory=set)


@dataclass
class EvalCounts:
    ran: int = 0
    ok: int = 0
    failed: int = 0
    requeued: int = 0  # questions put back after their worker died
    workers_lost: int = 0
    batches: int = 0
    wall_s: float = 0.0

    @property
    def per_min(self) -> float:
        return 60.0 * self.ran / self.wall_s if self.wall_s > 0 else 0.0


def run_episodes(settings: RunSettings, questions: list[Question], store: RunStore, runtime: EvalRuntime, **options: Any) -> EvalCounts:
    """Run `questions` on EpisodeWorker actors (Ray must be initialised) and store every row.
    `options`: attempts, overrides, progress, on_row, server_info (see EpisodeScheduler)."""
    return EpisodeScheduler(settings, questions, store, runtime, **options).run()


class EpisodeScheduler:
    """One call of `run_episodes`: the workers, the questions waiting and in flight, and the rows not
    yet written. `run` loops: fill every ready worker's slots, wait for whatever finishes first (a
    worker becoming ready, or an episode), handle it, write a batch when one is due."""

    def __init__(self, settings: RunSettings, questions: list[Question], store: RunStore, runtime: EvalRuntime, *,
                 attempts: dict[str, int] | None = None, overrides: list[str] | None = None, progress: bool = True,
                 on_row: Callable[[dict[str, Any]], None] | None = None, server_info: dict[str, Any] | None = None):
        self.settings, self.store, self.runtime, self.on_row = settings, store, runtime, on_row
        self.server_info = server_info  # a served index's description, read when the run was set up
        self.attempts = dict(attempts or {})
        self.overrides = list(overrides or [])
        self.settings_json = settings.to_worker_json()  # the run id as computed here, not per worker
        self.secrets = {name: os.environ[name] for name in settings.secret_env_names() if os.environ.get(name)}
        self.engines = runtime.engines or max(1, runtime.workers)
        self.actor_cls = ray.remote(EpisodeWorker)
        self.concurrency = max(1, int(runtime.concurrency or default_concurrency(settings.model)))
        self.model_caps = self.raise_caps()
        self.counts = EvalCounts()
        self.started = time.monotonic()
        self.progress = progress

        self.pending: deque[Question] = deque(questions)
        self.losses: Counter = Counter()  # question id -> dead workers it was in flight on
        self.workers: dict[int, _Worker] = {}
        self.ready_refs: dict[Any, int] = {}  # a worker's ready() call -> its id
        self.inflight: dict[Any, tuple[int, Question]] = {}  # an episode's call -> (worker id, question)
        self.buffer: list[dict[str, Any]] = []  # rows received, not yet written
        self.restarts_left = runtime.max_worker_restarts
        self.ever_ready = False
        self.next_id = 0
        self.last_flush = time.monotonic()
        self.idle_since: float | None = None
        self.bar: Any = None

    # -- the loop ----------------------------------------------------------------------------------
    def run(self) -> EvalCounts:
        for slot in range(max(1, self.runtime.workers)):
            self.spawn(slot)
        self.bar = progress_bar(len(self.pending), self.settings.method_name, self.progress, unit="ep", smoothing=0.1)
        try:
            while self.pending or self.inflight:
                self.dispatch()
                self.check_progress_possible()
                for ref in self.wait_for_some():
                    if ref in self.ready_refs:
                        self.on_ready(ref)
                    else:
                        self.on_episode(ref)
                    # Checked per episode, not per wait: several episodes can finish together, and a part holds at most batch_size rows.
                    if len(self.buffer) >= self.runtime.batch_size:
                        self.flush()
                if self.buffer and time.monotonic() - self.last_flush >= self.runtime.flush_s:
                    self.flush()
        finally:
            self.close()
        return self.counts

    def dispatch(self) -> None:
        for wid, worker in list(self.workers.items()):
            while worker.ready and len(worker.inflight) < self.concurrency and self.pending:
                q = self.pending.popleft()
                ref = worker.handle.run.remote(q.to_json(), self.attempts.get(q.id, 0) + 1)
                self.inflight[ref] = (wid, q)
                worker.inflight.add(ref)

    def check_progress_possible(self) -> None:
        """Fail when no worker is left, or none has become ready for `start_timeout_s`."""
        if not self.inflight and not self.ready_refs:
            raise EvaluationError(f"no evaluation worker is left ({self.counts.workers_lost} lost, no restarts left); {len(self.pending)} questions not run")
        if self.inflight:
            self.idle_since = None
            return
        self.idle_since = self.idle_since or time.monotonic()
        if time.monotonic() - self.idle_since > self.runtime.start_timeout_s:
            raise EvaluationError(
                f"no evaluation worker became ready in {self.runtime.start_timeout_s:g}s (does the cluster have "
                f"{self.runtime.worker_cpus:g} CPUs / {self.runtime.worker_gpus:g} GPUs free for one?)"
            )

    def wait_for_some(self) -> list[Any]:
        """The calls finished now: at least one (within a second), and every other already done."""
        waiting = list(self.inflight) + list(self.ready_refs)
        done, rest = ray.wait(waiting, num_returns=1, timeout=1.0)
        if done and rest:
            more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
            done += more
        return done

    # -- what finished -----------------------------------------------------------------------------
    def on_ready(self, ref: Any) -> None:
        wid = self.ready_refs.pop(ref)
        try:
            ray.get(ref)
        except ray.exceptions.RayError as exc:
            if not self.ever_ready:
                raise EvaluationError(f"the evaluation worker could not start: {summarize_error(exc)}") from None
            self.lose(wid, f"failed to start: {summarize_error(exc)}")
            return
        if wid in self.workers:
            self.workers[wid].ready = self.ever_ready = True

    def on_episode(self, ref: Any) -> None:
        wid, q = self.inflight.pop(ref)
        worker = self.workers.get(wid)
        if worker is not None:
            worker.inflight.discard(ref)
        attempt = self.attempts.get(q.id, 0) + 1
        try:
            row = ray.get(ref)
        except ray.exceptions.RayTaskError as exc:  # a bug in the worker code: record, go on
            row = failed_row(self.settings, q, f"worker error: {summarize_error(exc)}", attempt, overrides=self.overrides).to_record()
        except ray.exceptions.RayError as exc:  # the worker or its node is gone
            self.losses[q.id] += 1
            self.lose(wid, summarize_error(exc))
            if self.losses[q.id] < self.runtime.max_losses:
                self.pending.appendleft(q)
                self.counts.requeued += 1
                return
            row = failed_row(self.settings, q, f"lost with its worker {self.losses[q.id]} times (last: {summarize_error(exc)})", attempt, overrides=self.overrides).to_record()
        self.record(row)

    # -- workers -----------------------------------------------------------------------------------
    def raise_caps(self) -> dict[str, Any]:
        """The agent model's overrides from `backend_caps` (the judge's own model, when it has one,
        gets its own in the settings the workers receive); each limit kept below is logged once."""
        warnings = tool_server_caps(self.settings, max(1, self.runtime.workers) * self.concurrency, self.server_info)
        per_engine = -(-max(1, self.runtime.workers) // self.engines) * self.concurrency
        model_caps, model_warnings = backend_caps(self.settings.model, self.concurrency, per_engine)
        warnings += model_warnings
        judge_model = self.settings.judge_model
        if judge_model is not None:
            judge_caps, judge_warnings = backend_caps(judge_model, self.concurrency, per_engine, role="judge.model")
            self.settings_json["judge_model"] = {**judge_model, **judge_caps}  # runtime keys: the run id stays
            warnings += judge_warnings
        for warning in warnings:
            log.warning("%s", warning)
        return model_caps

    def spawn(self, slot: int) -> None:
        runtime = self.runtime
        options: dict[str, Any] = {"num_cpus": runtime.worker_cpus, "num_gpus": runtime.worker_gpus, "max_concurrency": self.concurrency, "max_restarts": 0}
        if runtime.spread:
            options["scheduling_strategy"] = "SPREAD"
        model_overrides = {**self.model_caps, **worker_overrides(self.settings.model, slot, self.engines)}
        handle = self.actor_cls.options(**options).remote(
            self.settings_json, self.overrides, runtime.episode_timeout_s, model_overrides, secrets=self.secrets,
            episodes_at_once=self.concurrency,
        )
        self.workers[self.next_id] = _Worker(handle, slot)
        self.ready_refs[handle.ready.remote()] = self.next_id
        self.next_id += 1

    def lose(self, wid: int, why: str) -> None:
        worker = self.workers.pop(wid, None)
        if worker is None:
            return  # already handled (several of its episodes fail together)
        self.counts.workers_lost += 1
        with contextlib.suppress(Exception):
            ray.kill(worker.handle, no_restart=True)
        if self.restarts_left > 0:
            self.restarts_left -= 1
            log.warning("evaluation worker lost (%s); its %d episodes in flight go back to the queue; starting a replacement", why, len(worker.inflight))
            self.spawn(worker.slot)
        else:
            log.warning("evaluation worker lost (%s); no restarts left", why)

    # -- rows --------------------------------------------------------------------------------------
    def record(self, row: dict[str, Any]) -> None:
        counts = self.counts
        self.buffer.append(row)
        counts.ran += 1
        if row["status"] == OK:
            counts.ok += 1
        else:
            counts.failed += 1
        if self.on_row is not None:
            self.on_row(row)
        self.bar.update(1)
        counts.wall_s = time.monotonic() - self.started
        self.bar.set_postfix(ok=counts.ok, failed=counts.failed, per_min=f"{counts.per_min:.0f}", refresh=False)

    def flush(self) -> None:
        self.last_flush = time.monotonic()
        if not self.buffer:
            return
        self.store.write(self.buffer)
        self.buffer.clear()
        self.counts.batches += 1
        hold_at_fault_point("ARAG_FAULT_HANG_AFTER_BATCHES", self.counts.batches, "evaluation")

    def close(self) -> None:
        """Rows already received are whole episodes: keep them even when the loop is interrupted."""
        try:
            self.flush()
        finally:
            if self.bar is not None:
                self.bar.close()
            for worker in self.workers.values():
                with contextlib.suppress(Exception):
                    ray.kill(worker.handle, no_restart=True)
            self.counts.wall_s = time.monotonic() - self.started


def summarize_error(exc: BaseException, limit: int = 400) -> str:
    """The last meaningful line of a Ray error (its traceback ends with the cause)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    cause = next((line for line in reversed(lines) if ":" in line and not line.startswith(("File ", "^"))), lines[-1] if lines else type(exc).__name__)
    return f"{type(exc).__name__}: {cause}"[:limit]
