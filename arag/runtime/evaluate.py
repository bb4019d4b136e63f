"""One evaluation, the library call behind `python -m pipelines.evaluate` (tests and benchmarks call it too).

Typed settings (arag.config.schemas.EvaluatePipeline) → `RunSettings` and the index it reads, opened
once (arag.evaluation.run_config; the run id) → the run's folder under `results.path` → the questions
not yet answered there → Ray workers (arag.runtime.evaluate_job), each opening the index itself →
Parquet rows. Calling it again with the same settings finishes what is missing.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import sys
import time
from typing import Any

from arag.config.schemas import EvaluatePipeline
from arag.evaluation.questions import QuestionFileError, load_questions
from arag.evaluation.results import RunStore
from arag.evaluation.run_config import run_info, run_setup
from arag.evaluation.summary import format_summary, summarize_run


def evaluate(config: EvaluatePipeline, *, overrides: list[str] | None = None, out=None) -> dict[str, Any]:
    """Run (or finish) the evaluation `config` describes; `overrides`: the command line's, recorded with the run. Prints what it
    does to `out` (None: the sys.stdout of the moment); returns the run's summary."""
    from arag.runtime.cluster import init_ray
    from arag.runtime.evaluate_job import run_episodes

    out = sys.stdout if out is None else out
    started = time.time()
    overrides = list(overrides or [])
    if not config.questions.path:
        raise QuestionFileError("choose the benchmark with +corpus=<name> (its questions.jsonl in data_dir) or give questions.path=<file>")
    question_set = load_questions(config.questions.path, config.questions.on_bad_line)
    if question_set.rejects:
        print(f"{len(question_set.rejects)} bad lines in {question_set.path} were skipped (questions.on_bad_line=skip):", file=out)
        for reject in question_set.rejects[:5]:
            print(f"  {reject.describe(question_set.path)}", file=out)
    settings, index, method = run_setup(config, question_set)
    selected = question_set.questions[: config.limit] if config.limit is not None else question_set.questions
    with RunStore(config.results.path, settings.run_id) as store:
        store.write_run_info(run_info(settings, question_set, config, overrides, method))
        done = store.done_ids()
        todo = [q for q in selected if q.id not in done]
        attempts = store.claim_failed(q.id for q in todo)
        print(
            f"run {settings.run_id} ({settings.dataset}, {settings.method_name}, {settings.model.get('model')}): "
            f"{len(selected)} questions, {len(selected) - len(todo)} already answered, {len(attempts)} failed before (retrying), {len(todo)} to run",
            file=out,
        )
        counts = None
        if todo:
            init_ray(num_cpus=config.runtime.num_cpus)  # logs the cluster it joined or started
            counts = run_episodes(settings, todo, store, config.runtime, attempts=attempts, overrides=overrides, progress=config.progress, server_info=index.server_info)
        summary = summarize_run(store, [q.id for q in selected])
        ran = {key: getattr(counts, key, 0) for key in ("ran", "ok", "failed", "requeued", "workers_lost")}
        wall_s = counts.wall_s if counts else 0.0
        started_at = dt.datetime.fromtimestamp(started, dt.timezone.utc).isoformat()
        store.log_invocation(
            {"started": started_at, "finished": dt.datetime.now(dt.timezone.utc).isoformat(), "selected": len(selected), "to_run": len(todo),
             **ran, "wall_s": wall_s, "runtime": dataclasses.asdict(config.runtime), "overrides": overrides}
        )
    summary.update(ran=ran["ran"], wall_s=wall_s, per_min=counts.per_min if counts else 0.0, requeued=ran["requeued"], workers_lost=ran["workers_lost"])
    print(format_summary(summary), file=out)
    return summary
