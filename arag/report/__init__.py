"""Reports over a results tree (plain Python and DuckDB, no Ray): Markdown tables, intervals, paired
comparisons and PNG plots. It reads runs only through arag.evaluation.results.

    build.py      `build_report`: the sections in order, written as report.md beside its plots
    episodes.py   the `episodes` table every section queries: the settings that vary, method order and labels
    pivots.py     the pivot tables (settings × methods by dataset): main results, ablations, retrieved tokens
    run_tables.py the tables with a row per run: details, cost, tool use, AgenticRAG
    figures.py    the PNG plots: accuracy against a swept setting, tool use
    facts.py      each episode's facts counted from its trajectory
    format.py     what every table shares: Markdown tables, number formats, the scored-questions rule
    tables.py     how a table fits a page: constant columns stated once above, wide tables split by topic
    intervals.py  how much an accuracy could move by chance: one accuracy's interval, two runs' paired test
    paired.py     two runs compared question by question on the questions both scored
    sweeps.py     test-time scaling: accuracy and cost against one swept setting
    a2rag.py      A2RAG beside A-RAG (Full) and Naive RAG, and what its controller did
    protocol.py   each run's protocol card against its paper's, the deviation notes
    paper.py      the A-RAG paper's published numbers, shown beside ours on request
    rejudges.py   re-judged runs, and their episodes counted once

`python -m pipelines.report` is the command.
"""

from arag.report.build import Report, build_report

__all__ = ["Report", "build_report"]
