"""Reports over a results tree (plain Python and DuckDB, no Ray): Markdown tables, intervals, paired
comparisons and PNG plots, read only through arag.evaluation.results. `python -m pipelines.report` is
the command; what each section shows: docs/evaluation.md, "Report"."""

from arag.report.build import Report, build_report

__all__ = ["Report", "build_report"]
