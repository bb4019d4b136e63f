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

from omegaconf import DictConfig

from pipelines.command_line import pipeline_main
from arag.evaluation.summary import unfinished
from pipelines.config_checks import checked_settings
from pipelines.endpoints import check_model_endpoints
from pipelines.errors import exit_on_error, exit_with_errors


def rejudge_settings(cfg: DictConfig) -> DictConfig:
    """The composed config, its keys and types checked and the judge's endpoint asked
    (arag.runtime.rejudge reads the composed config)."""
    checked_settings(cfg)
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
