"""Score finished runs' answers again with another judge, as new runs, without re-running agents:
`python -m pipelines.rejudge results.path=<dir> judge=strict [runs=[<run id>]] [+model@judge.model=openai ...]`.

The config's keys and types are checked (pipelines.config_checks), then arag.runtime.rejudge.rejudge re-judges each run. Rerunning
finishes what is missing and picks up episodes the source run finished since.

Exit status 1 when a re-judged run holds failures: questions the judge gave no verdict (rerunning
does not retry them: re-judge into another run, e.g. with another judge model) or failed episodes
copied from the source run (finish the source with pipelines.evaluate, then re-judge again); the
line names how many and their most common causes.
"""

from __future__ import annotations

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from pipelines.command_line import given_text, pipeline_main
from arag.evaluation.summary import unfinished
from pipelines.config_checks import checked_settings
from pipelines.endpoints import check_model_endpoints
from pipelines.errors import exit_on_error, exit_with_errors


def run_ids_as_given(cfg: DictConfig, overrides: list[str]) -> None:
    """runs as the command line's text: a run id is text, but Hydra reads an unquoted 8e500123 as a
    number (infinity)."""
    raw = given_text("runs", overrides)
    if raw is None or cfg.runs is None:
        return
    if raw.startswith("[") and raw.endswith("]") and OmegaConf.is_list(cfg.runs):
        cfg.runs = [part.strip().strip("'\"") for part in raw[1:-1].split(",") if part.strip()]
    elif not OmegaConf.is_list(cfg.runs):
        cfg.runs = raw  # not a list: the runs check names it as typed


def rejudge_settings(cfg: DictConfig) -> DictConfig:
    """The composed config, its keys and types checked and the judge's endpoint asked
    (arag.runtime.rejudge reads the composed config); the run ids as the command line gave them."""
    checked_settings(cfg)
    if HydraConfig.initialized():
        run_ids_as_given(cfg, list(HydraConfig.get().overrides.task))
    check_model_endpoints(cfg, ("judge.model",))
    return cfg


@pipeline_main("rejudge", settings=rejudge_settings)
def main(cfg: DictConfig) -> None:
    from arag.runtime.rejudge import rejudge

    with exit_on_error(interrupted="the verdicts written so far are stored; rerun the same command to finish"):
        summaries = rejudge(cfg)
    problems = [p for p in map(lambda s: unfinished(s, judge_failures=True), summaries) if p]
    if problems:
        exit_with_errors(problems)


if __name__ == "__main__":
    main()
