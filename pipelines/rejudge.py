"""Score finished runs' answers again with another judge, as new runs, without re-running agents:
`python -m pipelines.rejudge results.path=<dir> judge=strict [runs=[<run id>]] [+model@judge.model=openai ...]`.

For each source run (arag.evaluation.rejudge): the re-judged run's id (the source identity with the
judge replaced) → its folder under `out` (default: beside the source) → the source's answered
episodes not judged there yet → the judge → Parquet rows. Rerunning finishes what is missing and
picks up episodes the source run finished since.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

from omegaconf import DictConfig, OmegaConf

from arag.config.cli import pipeline_main
from arag.evaluation.rejudge import RejudgeError, checked_judge, find_runs, rejudge_run, rejudged_settings
from arag.evaluation.results import RunLockedError, RunStore
from arag.evaluation.summary import format_summary, summarize_run
from arag.llm.factory import make_backend
from arag.llm.instrument import judge_model_config
from pipelines.config_checks import check_rejudge_config


def rejudge(cfg: DictConfig, *, out=sys.stdout) -> list[dict[str, Any]]:
    """Re-judge the runs `cfg` names; returns each new run's summary."""
    from arag.runtime.evaluate_job import backend_caps, default_concurrency

    check_rejudge_config(cfg)
    judge = OmegaConf.to_container(cfg.judge, resolve=True)
    judge_model = judge.pop("model", None)
    judge_name = checked_judge(judge).name  # before any run is read
    if cfg.runs is not None and not OmegaConf.is_list(cfg.runs):
        raise RejudgeError(f"runs must be a list of run ids, e.g. runs=[{cfg.runs}], got {cfg.runs!r}")
    runs = None if cfg.runs is None else [str(r) for r in cfg.runs]
    sources = find_runs(str(cfg.results.path), runs)
    target = str(cfg.out if cfg.out is not None else cfg.results.path)
    backends: dict[str, Any] = {}  # one judge backend per model config, shared by the runs it judges
    summaries = []
    try:
        for source in sources:
            settings = rejudged_settings(source, judge, judge_model)
            # By default each run's own model at the model's defaults (arag.llm.instrument): the runs of a
            # sweep over the agent's settings share one judge.
            model_cfg = judge_model if judge_model is not None else judge_model_config(source.settings.model)
            key = json.dumps(model_cfg, sort_keys=True, default=str)
            concurrency = int(cfg.concurrency) if cfg.concurrency is not None else default_concurrency(model_cfg)
            if key not in backends:
                # No limit of the judge's backend hides below `concurrency` (as in an evaluation).
                caps, warnings = backend_caps(model_cfg, concurrency, concurrency, role="judge.model" if judge_model is not None else "model")
                for warning in warnings:
                    logging.getLogger("arag.rejudge").warning("%s", warning)
                backends[key] = make_backend({**model_cfg, **caps})
            bar = None
            if cfg.progress:
                from tqdm import tqdm

                bar = tqdm(desc=f"{source.run_id} → {settings.run_id}", unit="ep", file=sys.stderr)
            try:
                counts = rejudge_run(source, target, settings, backends[key], concurrency=concurrency, batch_size=int(cfg.batch_size), on_row=bar.update if bar else None)
            finally:
                if bar is not None:
                    bar.close()
            print(
                f"run {source.run_id} ({settings.dataset}, {settings.method_name}) re-judged as {settings.run_id} (judge {judge_name}"
                + (f", from the original run {settings.rejudged_from['run_id']}" if source.is_rejudged else "")
                + (f" by {model_cfg.get('model')}" if judge_model is not None else "")
                + f"): {counts.source_episodes} answered episodes, {counts.already_judged} judged before, {counts.judged} judged now"
                + (f" ({counts.judge_failed} without a verdict)" if counts.judge_failed else "")
                + f", {counts.failed_copied} failed episodes copied, {counts.wall_s:.1f}s",
                file=out,
            )
            # read only (not its lock): every question stored in the new run
            summary = summarize_run(RunStore(target, settings.run_id)) | {"rejudged_from": settings.rejudged_from["run_id"]}
            print(format_summary(summary), file=out)
            summaries.append(summary)
    finally:
        for backend in backends.values():
            backend.close()
    return summaries


@pipeline_main("rejudge")
def main(cfg: DictConfig) -> None:
    try:
        rejudge(cfg)
    except (RejudgeError, RunLockedError, FileNotFoundError, ImportError, ValueError) as exc:
        sys.exit(f"error: {exc}")
    except KeyboardInterrupt:
        print("interrupted: the verdicts written so far are stored; rerun the same command to finish", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
