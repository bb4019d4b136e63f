"""Reports over a results tree (plain Python and DuckDB, no Ray): Markdown tables, intervals, paired
comparisons and PNG plots. It reads runs only through arag.evaluation.results.

    build.py      the report: main and ablation tables, tokens, details, cost, tool use, plots; `build_report`
    format.py     what every table shares: Markdown tables, number formats, the scored-questions rule
    tables.py     how a table fits a page: constant columns stated once above, wide tables split by topic
    intervals.py  how much an accuracy could move by chance: one accuracy's interval, two runs' paired test
    paired.py     two runs compared question by question on the questions both scored
    sweeps.py     test-time scaling: accuracy and cost against one swept setting
    a2rag.py      A2RAG beside A-RAG (Full) and Naive RAG, and what its controller did
    protocol.py   each run's protocol card against its paper's, the deviation notes
    paper.py      the A-RAG paper's published numbers, shown beside ours on request

`python -m pipelines.report` is the command.
"""

from arag.report.build import Report, build_report

__all__ = ["Report", "build_report"]
