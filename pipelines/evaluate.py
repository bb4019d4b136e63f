"""Evaluate a method on benchmark questions:
`python -m pipelines.evaluate +corpus=2wikimultihopqa index.path=<dir> method=arag_full results.path=<dir> [limit=N]`.

The config becomes its typed settings, checked (pipelines.config_checks), its model endpoints are
asked (pipelines.endpoints), then arag.runtime.evaluate.evaluate runs (or finishes) the run.
Rerunning the same command finishes what is missing; `-m` sweeps run every combination into the
same results tree.

Exit status 1 when the run is not complete: questions without a stored result, or failed episodes
(the line names how many and their most common causes; rerunning retries them). A sweep runs every
combination first and then exits 1 if any of them ended so.
"""

from __future__ import annotations

from omegaconf import DictConfig

from pipelines.command_line import pipeline_main
from arag.config.schemas import EvaluatePipeline
from arag.evaluation.summary import unfinished
from pipelines.config_checks import checked_settings
from pipelines.endpoints import check_model_endpoints
from pipelines.errors import exit_on_error, exit_with_errors, print_error

# Runs of this sweep that ended incomplete (their error lines are printed as each ends).
INCOMPLETE: list[str] = []


def hydra_job() -> tuple[list[str], bool]:
    """This job's command-line overrides (a sweep's settings among them) and whether it is one run of
    a sweep; none and False outside Hydra's main."""
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        job = HydraConfig.get()
        return list(job.overrides.task), job.mode == RunMode.MULTIRUN
    except Exception:
        return [], False


def evaluate_settings(cfg: DictConfig) -> EvaluatePipeline:
    """The one conversion to typed settings, checked; then the model endpoints are asked, before Ray
    and the run folder: a server not running is named at once."""
    config = checked_settings(cfg)
    check_model_endpoints(cfg)
    return config


@pipeline_main("evaluate", settings=evaluate_settings)
def main(config: EvaluatePipeline) -> None:
    from arag.runtime.evaluate import evaluate

    with exit_on_error(interrupted="the episodes received so far are stored; rerun the same command to finish"):
        overrides, sweep = hydra_job()
        summary = evaluate(config, overrides=overrides)
    missing = summary["questions"] - summary["stored"]
    if missing > 0:
        problem = f"{missing} questions have no stored result; rerun the same command to finish them"
    elif problem := unfinished(summary):
        problem = f"{problem}; rerun the same command to retry them"
    if problem and sweep:  # the sweep's other runs still run
        print_error(problem)
        INCOMPLETE.append(problem)
    elif problem:
        exit_with_errors([problem])


def run() -> None:
    main()
    if INCOMPLETE:
        exit_with_errors([f"{len(INCOMPLETE)} runs of the sweep are incomplete (each named above); rerun the same command to finish them"])


if __name__ == "__main__":
    run()
