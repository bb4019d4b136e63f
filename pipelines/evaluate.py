"""Evaluate a method on benchmark questions:
`python -m pipelines.evaluate +corpus=2wikimultihopqa index.path=<dir> method=arag_full results.path=<dir> [limit=N]`.

Config → `RunSettings` (arag.evaluation.run_config; the run id) → the run's folder under `results.path` → the questions not yet
answered there → Ray workers (arag.runtime.evaluate_job) → Parquet rows. Rerunning the same command
finishes what is missing; `-m` sweeps run every combination into the same results tree.
"""

from __future__ import annotations

import datetime as dt
import logging
import sys
import time
from typing import Any

from omegaconf import DictConfig, OmegaConf

from arag.config.cli import pipeline_main
from arag.evaluation.questions import QuestionFileError, load_questions
from arag.evaluation.results import RunLockedError, RunStore
from arag.evaluation.run_config import run_info, run_settings
from arag.evaluation.summary import format_summary, summarize_run
from arag.index.store import IncompleteIndexError
from pipelines.config_checks import check_evaluate_config

log = logging.getLogger("pipelines.evaluate")


def task_overrides() -> list[str]:
    """The command-line overrides of this job (a sweep's settings among them); none outside Hydra's main."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return list(HydraConfig.get().overrides.task)
    except Exception:
        return []


def evaluate(cfg: DictConfig, *, out=sys.stdout) -> dict[str, Any]:
    """Run (or finish) the evaluation `cfg` describes; returns the run's summary."""
    from arag.runtime.cluster import init_ray
    from arag.runtime.evaluate_job import EvalRuntime, run_episodes

    started = time.time()
    check_evaluate_config(cfg)
    questions_path = OmegaConf.select(cfg, "questions.path", throw_on_resolution_failure=False)
    if not questions_path:
        raise QuestionFileError("choose the benchmark with +corpus=<name> (its questions.jsonl in data_dir) or give questions.path=<file>")
    question_set = load_questions(str(questions_path), str(cfg.questions.on_bad_line))
    if question_set.rejects:
        print(f"{len(question_set.rejects)} bad lines in {question_set.path} were skipped (questions.on_bad_line=skip):", file=out)
        for reject in question_set.rejects[:5]:
            print(f"  {reject.describe(question_set.path)}", file=out)
    settings = run_settings(cfg, question_set)
    overrides = task_overrides()
    runtime = EvalRuntime.from_dict(OmegaConf.to_container(cfg.runtime, resolve=True))
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
            counts = run_episodes(settings, todo, store, runtime, attempts=attempts, overrides=overrides, progress=bool(cfg.progress))
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
                "runtime": OmegaConf.to_container(cfg.runtime, resolve=True),
                "overrides": overrides,
            }
        )
    summary.update(ran=counts.ran if counts else 0, wall_s=counts.wall_s if counts else 0.0)
    summary["per_min"] = counts.per_min if counts else 0.0
    summary["requeued"] = counts.requeued if counts else 0
    summary["workers_lost"] = counts.workers_lost if counts else 0
    print(format_summary(summary), file=out)
    return summary


@pipeline_main("evaluate")
def main(cfg: DictConfig) -> None:
    from arag.runtime.evaluate_job import EvaluationError
    from arag.serve.client import ToolServerError

    try:
        summary = evaluate(cfg)
    except (QuestionFileError, RunLockedError, EvaluationError, IncompleteIndexError, FileNotFoundError, ImportError, ValueError, ToolServerError) as exc:
        sys.exit(f"error: {exc}")
    except KeyboardInterrupt:
        print("interrupted: the episodes received so far are stored; rerun the same command to finish", file=sys.stderr)
        sys.exit(130)
    if summary["stored"] < summary["questions"]:
        sys.exit(f"error: {summary['questions'] - summary['stored']} questions have no stored result; rerun the same command to finish them")


if __name__ == "__main__":
    main()
