"""Evaluate a method on benchmark questions:
`python -m pipelines.evaluate +corpus=2wikimultihopqa index.path=<dir> method=arag_full results.path=<dir> [limit=N]`.

The config's keys are checked, then arag.runtime.evaluate.evaluate runs (or finishes) the run.
Rerunning the same command finishes what is missing; `-m` sweeps run every combination into the
same results tree.
"""

from __future__ import annotations

import sys

from omegaconf import DictConfig

from arag.config.cli import pipeline_main
from pipelines.config_checks import check_evaluate_config
from pipelines.errors import exit_on_error


def task_overrides() -> list[str]:
    """The command-line overrides of this job (a sweep's settings among them); none outside Hydra's main."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return list(HydraConfig.get().overrides.task)
    except Exception:
        return []


@pipeline_main("evaluate")
def main(cfg: DictConfig) -> None:
    from arag.runtime.evaluate import evaluate

    with exit_on_error(interrupted="the episodes received so far are stored; rerun the same command to finish"):
        check_evaluate_config(cfg)
        summary = evaluate(cfg, overrides=task_overrides())
    if summary["stored"] < summary["questions"]:
        sys.exit(f"error: {summary['questions'] - summary['stored']} questions have no stored result; rerun the same command to finish them")


if __name__ == "__main__":
    main()
