"""One evaluation, the library call behind `python -m pipelines.evaluate` (tests and benchmarks call it too).

Config → `RunSettings` and the index it reads, opened once (arag.evaluation.run_config; the run id)
→ the run's folder under `results.path` → the questions not yet answered there → Ray workers
(arag.runtime.evaluate_job), each opening the index itself → Parquet rows. Calling it again with the
same config finishes what is missing.
"""

from __future__ import annotations

import datetime as dt
import sys
import time
from typing import Any

from omegaconf import DictConfig, OmegaConf

from arag.evaluation.questions import QuestionFileError, load_questions
from arag.evaluation.results import RunStore
from arag.evaluation.run_config import run_info, run_setup
from arag.evaluation.summary import format_summary, summarize_run


def evaluate(cfg: DictConfig, *, overrides: list[str] | None = None, out=None) -> dict[str, Any]:
    """Run (or finish) the evaluation `cfg` (conf/evaluate.yaml, its keys already checked) describes;
    `overrides`: the command line's, recorded with the run. Prints what it does to `out` (None: the
    sys.stdout of the moment); returns the run's summary."""
    from arag.runtime.cluster import init_ray
    from arag.runtime.evaluate_job import EvalRuntime, run_episodes

    out = sys.stdout if out is None else out
    started = time.time()
    overrides = list(overrides or [])
    questions_path = OmegaConf.select(cfg, "questions.path", throw_on_resolution_failure=False)
    if not questions_path:
        raise QuestionFileError("choose the benchmark with +corpus=<name> (its questions.jsonl in data_dir) or give questions.path=<file>")
    question_set = load_questions(str(questions_path), str(cfg.questions.on_bad_line))
    if question_set.rejects:
        print(f"{len(question_set.rejects)} bad lines in {question_set.path} were skipped (questions.on_bad_line=skip):", file=out)
        for reject in question_set.rejects[:5]:
            print(f"  {reject.describe(question_set.path)}", file=out)
    settings, index = run_setup(cfg, question_set)
    runtime_cfg = OmegaConf.to_container(cfg.runtime, resolve=True)
    runtime = EvalRuntime.from_dict(runtime_cfg)
    limit = cfg.get("limit")
    selected = question_set.questions[: int(limit)] if limit is not None else question_set.questions
    with RunStore(str(cfg.results.path), settings.run_id) as store:
        store.write_run_info(run_info(settings, question_set, cfg, overrides))
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
            init_ray(num_cpus=cfg.runtime.num_cpus)  # logs the cluster it joined or started
            counts = run_episodes(settings, todo, store, runtime, attempts=attempts, overrides=overrides, progress=bool(cfg.progress), server_info=index.server_info)
        summary = summarize_run(store, [q.id for q in selected])
        store.log_invocation(
            {
                "started": dt.datetime.fromtimestamp(started, dt.timezone.utc).isoformat(),
                "finished": dt.datetime.now(dt.timezone.utc).isoformat(),
                "selected": len(selected),
                "to_run": len(todo),
                "ran": counts.ran if counts else 0,
                "ok": counts.ok if counts else 0,
                "failed": counts.failed if counts else 0,
                "requeued": counts.requeued if counts else 0,
                "workers_lost": counts.workers_lost if counts else 0,
                "wall_s": counts.wall_s if counts else 0.0,
                "runtime": runtime_cfg,
                "overrides": overrides,
            }
        )
    summary.update(ran=counts.ran if counts else 0, wall_s=counts.wall_s if counts else 0.0)
    summary["per_min"] = counts.per_min if counts else 0.0
    summary["requeued"] = counts.requeued if counts else 0
    summary["workers_lost"] = counts.workers_lost if counts else 0
    print(format_summary(summary), file=out)
    return summary
