"""Write a Markdown report (tables + PNG plots) from a results tree:
`python -m pipelines.report results.path=<dir>` → `<dir>/report/report.md` and its plots."""

from __future__ import annotations

from omegaconf import DictConfig

from arag.config.cli import pipeline_main
from arag.report import build_report
from pipelines.config_checks import check_report_config
from pipelines.errors import exit_on_error


@pipeline_main("report")
def main(cfg: DictConfig) -> None:
    with exit_on_error():  # a bad report.where filter among them: DuckDB's message names the problem
        check_report_config(cfg)
        report = build_report(str(cfg.results.path), cfg.report.path, where=cfg.report.where, title=str(cfg.report.title), paper_columns=bool(cfg.report.paper_columns))
    print(f"report: {report.path} ({report.rows} episodes; plots: {', '.join(p.name for p in report.plots)})")


if __name__ == "__main__":
    main()
