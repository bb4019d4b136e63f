"""Re-judging, the library call behind `python -m pipelines.rejudge` (docs/evaluation.md,
"Re-judging"). It runs no Ray; it lives here for the judge backend's limits, which evaluation
workers get the same way (evaluate_job)."""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from typing import Any

from omegaconf import DictConfig, OmegaConf

from arag.evaluation.rejudge import RejudgeError, checked_judge, find_runs, rejudge_run, rejudged_settings
from arag.evaluation.results import RunStore
from arag.evaluation.summary import format_summary, summarize_run
from arag.llm.factory import backend_caps, default_concurrency, make_backend
from arag.llm.instrument import judge_model_config
from arag.runtime.progress import progress_bar


def rejudge(cfg: DictConfig, *, out=sys.stdout) -> list[dict[str, Any]]:
    """Re-judge the runs `cfg` (conf/rejudge.yaml) names, printing each to `out`; their summaries."""
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
    with contextlib.ExitStack() as closing:
        for source in sources:
            settings = rejudged_settings(source, judge, judge_model)
            # By default each run's own model at the model's defaults: a sweep's runs share one judge.
            model_cfg = judge_model if judge_model is not None else judge_model_config(source.settings.model)
            key = json.dumps(model_cfg, sort_keys=True, default=str)
            concurrency = int(cfg.concurrency) if cfg.concurrency is not None else default_concurrency(model_cfg)
            if key not in backends:
                # No limit of the judge's backend hides below `concurrency` (as in an evaluation).
                caps, warnings = backend_caps(model_cfg, concurrency, concurrency, role="judge.model" if judge_model is not None else "model")
                for warning in warnings:
                    logging.getLogger("arag.rejudge").warning("%s", warning)
                backends[key] = closing.enter_context(contextlib.closing(make_backend({**model_cfg, **caps})))
            with progress_bar(None, f"{source.run_id} → {settings.run_id}", bool(cfg.progress), unit="ep") as bar:
                counts = rejudge_run(source, target, settings, backends[key], concurrency=concurrency, batch_size=int(cfg.batch_size), on_row=bar.update)
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
    return summaries
