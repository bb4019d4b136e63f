"""The report over one results tree: its sections in order, written as report.md beside its PNG plots.

Runs are never averaged together: a table cell holds one run, and two runs that would share one but
differ in anything else of their identity are refused (docs/evaluation.md, "Report"; counting rules:
"Metrics")."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from arag.report.a2rag import a2rag_section
from arag.report.episodes import check_one_run_per_cell, connect, method_label, method_order, varying_settings
from arag.report.figures import draw_plots, paper_figure_section, plots_section
from arag.report.paired import paired_section
from arag.report.paper import PAPER_ABLATIONS_FILE, PaperResults, PaperTokens
from arag.report.pivots import ablation_table, accuracy_pivot, tokens_pivot
from arag.report.protocol import protocol_section, run_cards
from arag.report.rejudges import rejudge_section
from arag.report.run_tables import agentic_table, cost_table, details_table, tool_table
from arag.report.sweeps import SWEEPABLE, sweep_table


@dataclass
class Report:
    markdown: str
    path: Path
    plots: list[Path] = field(default_factory=list)
    rows: int = 0


def build_report(results_path: str | Path, out_dir: str | Path | None = None, *, where: str | None = None, title: str = "Evaluation report", paper_columns: bool = False) -> Report:
    results_path = Path(results_path)
    con = connect(results_path, where)  # first: a missing results folder must not be created
    out = Path(out_dir) if out_dir else results_path / "report"
    out.mkdir(parents=True, exist_ok=True)
    n, runs, failed, judge_failed = con.execute(
        "SELECT count(*), count(DISTINCT run_id), count(*) FILTER (status = 'failed'), count(*) FILTER (judge_status = 'failed') FROM episodes"
    ).fetchone()
    if n == 0:
        raise ValueError(f"no episodes under {results_path}" + (f" matching {where}" if where else ""))
    check_one_run_per_cell(con)
    varying = varying_settings(con)
    sweeps = [sweep_table(con, x, varying, method_label) for x in SWEEPABLE]  # before any file: it may refuse unlike runs
    plots = draw_plots(con, out)
    if paper_columns:  # the paper's Figure 4 beside our sweep tables
        figure, drawn = paper_figure_section(con, varying, out, method_label)
        sweeps.append(figure)
        plots += drawn
    cards = run_cards(con, results_path)
    methods = method_order([m for (m,) in con.execute("SELECT DISTINCT method FROM episodes").fetchall()])
    parts = [
        f"# {title}",
        "",
        f"{n:,} episodes in {runs} runs from `{results_path}`" + (f" (filter: `{where}`)" if where else "") + f"; {failed:,} failed episodes and {judge_failed:,} judge failures (both left out of LLM-Acc and Cont-Acc; failed episodes named in each cell).",
        "",
        rejudge_section(con, method_label),
        accuracy_pivot(con, [m for m in methods if not m.startswith(("arag_no_", "agenticrag_"))], "Main results",
                       paper=PaperResults.load() if paper_columns else None, cards=cards),
        ablation_table(con, paper=PaperResults.load(table=PAPER_ABLATIONS_FILE) if paper_columns else None, cards=cards),
        paired_section(con, varying, method_label),  # beside the tables whose comparisons it tests
        *sweeps,
        agentic_table(con),
        a2rag_section(con, varying),
        details_table(con),
        tokens_pivot(con, [m for m in methods if not m.startswith("agenticrag")], paper=PaperTokens.load() if paper_columns else None, cards=cards),
        cost_table(con),
        tool_table(con),
        protocol_section(con, cards, method_label),
        plots_section([p.name for p in plots]),
    ]
    markdown = "\n".join(parts)
    path = out / "report.md"
    path.write_text(markdown, encoding="utf-8")
    return Report(markdown, path, plots, n)
