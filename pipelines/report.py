"""Write a Markdown report (tables + PNG plots) from a results tree:
`python -m pipelines.report results.path=<dir>` → `<dir>/report/report.md` and its plots."""

from __future__ import annotations

import sys

from omegaconf import DictConfig

from arag.config.cli import pipeline_main
from arag.report import build_report
from pipelines.config_checks import check_report_config


@pipeline_main("report")
def main(cfg: DictConfig) -> None:
    try:
        check_report_config(cfg)
        report = build_report(str(cfg.results.path), cfg.report.path, where=cfg.report.where, title=str(cfg.report.title), paper_columns=bool(cfg.report.paper_columns))
    except (FileNotFoundError, ValueError) as exc:
        sys.exit(f"error: {exc}")
    except Exception as exc:  # e.g. a bad report.where filter (DuckDB's message names the problem)
        if type(exc).__module__.startswith("duckdb") or type(exc).__module__.startswith("_duckdb"):
            sys.exit(f"error: {exc}")
        raise
    print(f"report: {report.path} ({report.rows} episodes; plots: {', '.join(p.name for p in report.plots)})")


if __name__ == "__main__":
    main()
