"""Score finished runs' answers again with another judge, as new runs, without re-running agents:
`python -m pipelines.rejudge results.path=<dir> judge=strict [runs=[<run id>]] [+model@judge.model=openai ...]`.

The config's keys are checked, then arag.runtime.rejudge.rejudge re-judges each run. Rerunning
finishes what is missing and picks up episodes the source run finished since.
"""

from __future__ import annotations

from omegaconf import DictConfig

from arag.config.cli import pipeline_main
from pipelines.config_checks import check_rejudge_config
from pipelines.errors import exit_on_error


@pipeline_main("rejudge")
def main(cfg: DictConfig) -> None:
    from arag.runtime.rejudge import rejudge

    with exit_on_error(interrupted="the verdicts written so far are stored; rerun the same command to finish"):
        check_rejudge_config(cfg)
        rejudge(cfg)


if __name__ == "__main__":
    main()
