"""Write a Markdown report (tables + PNG plots) from a results tree:
`python -m pipelines.report results.path=<dir>` → `<dir>/report/report.md` and its plots."""

from __future__ import annotations

from pipelines.command_line import pipeline_main
from arag.config.schemas import ReportPipeline
from arag.report import build_report
from pipelines.errors import exit_on_error


@pipeline_main("report")
def main(config: ReportPipeline) -> None:
    with exit_on_error():  # a bad report.where filter among them: DuckDB's message names the problem
        report = build_report(config.results.path, config.report.path, where=config.report.where, title=config.report.title, paper_columns=config.report.paper_columns)
    print(f"report: {report.path} ({report.rows} episodes; plots: {', '.join(p.name for p in report.plots)})")


if __name__ == "__main__":
    main()
