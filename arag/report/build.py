"""A Markdown report with PNG plots from a results tree (every run's Parquet files, read by DuckDB).

Sections: the main table (methods × datasets, LLM-Acc and Contain-Acc, LLM-Acc alone for GraphRAG-Bench,
like Table 1 of the A-RAG paper), the ablation table (A-RAG Full and its `arag_no_*` variants, Table 2's
layout), paired comparisons on shared questions (Table 1's and Table 2's method pairs and runs of one
method, arag.report.paired), test-time scaling (accuracy and cost against max steps, and against reasoning effort, one
setting varied at a time: arag.report.sweeps), retrieved tokens per method and dataset
(Table 3's layout, shaped like the main table), A2RAG beside A-RAG (Full) and Naive RAG with its controller's stage breakdown,
verdicts and rewrites (arag.report.a2rag), details per run (EM, F1,
evidence recall, failures), retrieved tokens and cost per method, tool use, and plots of accuracy
against the step limit and against reasoning effort, and of tool-use distributions. Every table
fits a page (arag.report.tables): columns the same on every row are stated once above it, and a
table wider than MAX_COLUMNS is split by topic.

Counting rule (the same as a plain DuckDB query over the files): each row is one question of one
run; LLM-Acc and Cont-Acc average over the same questions: every completed episode except those
whose judge gave no verdict (counted beside them in "judge failed"). A failed episode (an outage, a
timeout, a lost worker) has no result: it is never scored, and every accuracy cell names the failed
episodes beside it with their most frequent cause; a cell whose episodes all failed shows only that.
Calls per tool, tool errors by kind, repeated calls and evidence seen and read are counted from each
row's trajectory (arag.report.facts, the viewer's count), not read from the columns a run stored.

Runs are never averaged together: a table cell holds one run. Results holding two runs for the same
(dataset, model, method, shown settings) that differ in anything else of their identity (judge,
protocol, index, prompts, code version, ...) are refused with the run ids named; pick one with
`report.where="run_id IN (...)"`.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import duckdb

from arag.config.files import method_declarations
from arag.report.intervals import LEGEND, Proportion, proportion
from arag.report.intervals import cell as accuracy_cell
from arag.report.intervals import failures_text
from arag.evaluation.rows import CALLS_OTHER, counted_tools, failure_kinds
from arag.report.a2rag import a2rag_section
from arag.report.facts import create_views
from arag.report.format import ANSWERED, FAILED, OF_ANSWERED, OF_ATTEMPTED, UnlikeRunsError, accuracy_sql, failures_sql, markdown_table
from arag.report.format import format_value as _fmt
from arag.report.format import pyplot as _pyplot
from arag.report.paired import Comparison, comparisons, paired_section
from arag.report.paper import PAPER_ABLATIONS_FILE, PaperResults, PaperTokens
from arag.report.rejudges import counted_once_sql, rejudge_section
from arag.report.protocol import block_runs, deviation_note, judge_label_sql, protocol_section, reference_rows, run_cards
from arag.report.tables import MAX_COLUMNS, Topic, fitted_tables
from arag.report.sweeps import AXIS_LABELS, PAPER_FIGURE_FILE, SWEEPABLE, paper_figure_section, setting_order, sweep_series, sweep_table
from arag.evaluation.results import row_files

MAIN_METHODS = ("direct", "naive_rag", "arag_naive", "arag_full")
# The paper's Table 2: A-RAG (Full) and its variants without one tool, in the paper's row order.
ABLATION_ROWS = ("arag_full", "arag_no_keyword", "arag_no_semantic", "arag_no_chunk_read")
# The AgenticRAG comparison table: its ablations beside A-RAG (Full) and Naive RAG.
AGENTIC_COMPARISON = ("naive_rag", "arag_full", "agenticrag", "agenticrag_no_summarize", "agenticrag_no_semantic_find", "agenticrag_single_query")
# The method whose tools the AgenticRAG table counts.
AGENTIC_METHOD = "agenticrag"
# Settings that may vary between runs; a column is shown only where it does vary.
SETTING_COLUMNS = ("max_steps", "reasoning_effort", "token_budget", "temperature", "guard_rails", "judge")
# Their column headers in the tables.
SETTING_HEADERS = {"model": "model", "max_steps": "max steps", "reasoning_effort": "reasoning effort", "token_budget": "token budget",
                   "temperature": "temperature", "guard_rails": "guard rails", "judge": "judge"}

# A sweep plot is drawn for a series of at least this many values of the swept setting.
MIN_PLOTTED_POINTS = 3
# Characters per line of a legend entry (the legends sit beside the axes).
LEGEND_WIDTH = 40

# Datasets with long-form gold answers: the main table shows LLM-Acc only for them, as the paper does.
LONG_FORM_DATASETS = ("graphrag-bench",)


def check_one_run_per_cell(con: duckdb.DuckDBPyConnection) -> None:
    keys = ["dataset", "model", "method", *_varying(con)]
    clash = con.execute(
        f"""SELECT {', '.join(keys)}, list(DISTINCT run_id ORDER BY run_id) FROM episodes
            GROUP BY ALL HAVING count(DISTINCT run_id) > 1 ORDER BY ALL"""
    ).fetchall()
    if clash:
        lines = [f"  {_setting_label(keys, r[:-1])}: runs {', '.join(r[-1])}" for r in clash[:10]]
        raise UnlikeRunsError(
            "these results hold runs that differ in their settings (judge, protocol, index, prompts or code version) "
            "but would share a table cell; the report does not average unlike runs. Choose one per cell with "
            "report.where=\"run_id IN ('...')\" or separate results folders:\n" + "\n".join(lines)
        )


# Guard rails change what an agent may do, so runs that differ only in them must not share a table
# block; they live in the `settings` JSON, and the view spells the ones that are on as one value.
GUARD_RAILS_SQL = """coalesce(nullif(concat_ws(' ',
    CASE WHEN TRY_CAST(json_extract_string(settings, '$.agent.guard_rails.tool_steps') AS INTEGER) > 0
         THEN 'tool_steps=' || json_extract_string(settings, '$.agent.guard_rails.tool_steps') END,
    CASE WHEN json_extract_string(settings, '$.agent.guard_rails.require_read_before_answer') = 'true'
         THEN 'require_read_before_answer' END,
    CASE WHEN json_extract_string(settings, '$.agent.guard_rails.shown_chunk_ids_only') = 'true'
         THEN 'shown_chunk_ids_only' END), ''), 'off')"""


# The judge, named by the model that judged and its preset (arag.report.protocol): a run
# and its re-judged copy (pipelines.rejudge) then sit in separate table blocks.
JUDGE_SQL = judge_label_sql()


@dataclass
class Report:
    markdown: str
    path: Path
    plots: list[Path] = field(default_factory=list)
    rows: int = 0


def result_files(results_path: str | Path) -> list[str]:
    root = Path(results_path)
    if not root.is_dir():
        raise FileNotFoundError(f"no results folder at {root}")
    files = [str(p) for p in row_files(root)]
    if not files:
        raise FileNotFoundError(f"no results (*.parquet) under {root}")
    return files


def connect(results_path: str | Path, where: str | None = None) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with the view `episodes` over every results file (one row per question and
    run), its tool errors, repeated calls, calls per tool and evidence counted from the trajectories
    (arag.report.facts)."""
    con = duckdb.connect()
    create_views(con, result_files(results_path))  # all_episodes: the rows, their facts counted from the trajectories
    # A table, not a view: every section queries it, and a view would join the facts and parse each
    # row's settings JSON again for every query.
    con.execute(f"CREATE TABLE episodes AS SELECT *, {GUARD_RAILS_SQL} AS guard_rails, {JUDGE_SQL} AS judge FROM all_episodes {'WHERE ' + where if where else ''}")
    _store_varying(con)
    return con


def paired_comparisons(results_path: str | Path) -> list[Comparison]:
    """The paired comparisons the report lists for a results tree, in its order (the viewer's table)."""
    con = connect(results_path)
    return comparisons(con, _varying(con))


# The table that holds the settings that vary (in SETTING_COLUMNS order), computed once per connection.
VARYING_TABLE = "varying_settings"


def _store_varying(con: duckdb.DuckDBPyConnection) -> None:
    """The settings columns whose value varies, counted once over the episodes (no trajectory
    read); the judge only where it varies for one model (it names its model, so models that judged
    themselves differ in it without a second judge)."""
    def distinct(col: str) -> str:
        return f"count(DISTINCT coalesce(CAST({col} AS VARCHAR), '—'))"

    others = [c for c in SETTING_COLUMNS if c != "judge"]
    per_column = dict(zip(others, con.execute(f"SELECT {', '.join(distinct(c) for c in others)} FROM episodes").fetchone()))
    per_column["judge"] = con.execute(f"SELECT coalesce(max(n), 0) FROM (SELECT {distinct('judge')} AS n FROM episodes GROUP BY model)").fetchone()[0]
    varying = [c for c in SETTING_COLUMNS if (per_column[c] or 0) > 1]
    con.execute(f"CREATE OR REPLACE TABLE {VARYING_TABLE} (position INTEGER, name VARCHAR)")
    if varying:
        con.executemany(f"INSERT INTO {VARYING_TABLE} VALUES (?, ?)", list(enumerate(varying)))


def _varying(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The settings columns whose value varies (`_store_varying`, counted when the connection was made)."""
    return [name for (name,) in con.execute(f"SELECT name FROM {VARYING_TABLE} ORDER BY position").fetchall()]


def _setting_keys(names: Sequence[str], values: Sequence[Any]) -> list[tuple]:
    """Sort keys for a row's values of the settings `names` (numbers by value, effort by level)."""
    return [setting_order(c, v) for c, v in zip(names, values)]


def _method_order(methods: Sequence[str]) -> list[str]:
    """The paper tables' methods in their order, then every other configured method, then the rest, by name."""
    known = list(dict.fromkeys([*MAIN_METHODS, *ABLATION_ROWS, *AGENTIC_COMPARISON, *method_declarations()]))
    return sorted(methods, key=lambda m: (known.index(m) if m in known else len(known), m))


def _label(method: str) -> str:
    """The method's name in the tables: its config's `label` (conf/method/<name>.yaml)."""
    declared = method_declarations().get(method)
    return declared["label"] if declared else method


def tool_columns(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The tools counted in these results (a calls_<tool> column each): the registered ones in their
    order, then any other the files hold (a plugin's, registered when they were written), then "other"."""
    present = [r[0] for r in con.execute("DESCRIBE episodes").fetchall() if r[0].startswith("calls_") and r[0] != CALLS_OTHER]
    registered = [t for t in counted_tools() if f"calls_{t}" in present]
    return [*registered, *(c[len("calls_"):] for c in present if c[len("calls_"):] not in registered), "other"]


def _setting_label(keys: Sequence[str], values: Sequence[Any]) -> str:
    return ", ".join(f"{k}={'—' if v is None else v}" for k, v in zip(keys, values))


def _accuracy_columns(dataset: str) -> tuple[str, ...]:
    """The paper's columns: LLM-Acc and Cont-Acc for the short-answer sets, LLM-Acc alone for
    GraphRAG-Bench, whose long-form gold answers are never contained verbatim."""
    return ("LLM-Acc",) if dataset.startswith(LONG_FORM_DATASETS) else ("LLM-Acc", "Cont-Acc")


def token_unit(con: duckdb.DuckDBPyConnection) -> str:
    """What the retrieved tokens of these runs count: the tokenizer each run records (runs from
    before it was recorded counted with cl100k_base), over the text the tools put into the context."""
    names = [n for (n,) in con.execute(
        """SELECT DISTINCT coalesce(json_extract_string(settings, '$.retrieved_tokens_tokenizer'), 'cl100k_base') FROM episodes
           WHERE json_extract_string(settings, '$.method.tools') <> '[]' OR json_extract_string(settings, '$.method.kind') = 'naive_rag' ORDER BY 1"""
    ).fetchall()] or ["o200k_base"]
    mixed = " (runs counted with different tokenizers: compare within one)" if len(names) > 1 else ""
    return f"{' / '.join(names)} tokens of the retrieved text put into the context{mixed}"


def tokens_pivot(con: duckdb.DuckDBPyConnection, methods: Sequence[str], paper: PaperTokens | None = None, cards: dict | None = None) -> str:
    """The paper's Table 3 layout in the main table's shape: one table, rows = the settings that
    vary (model where several, judge, max steps, ...: a column each) × methods, columns = datasets,
    cells = mean retrieved tokens per question (`token_unit`).
    `paper`: a table per model instead, the published figure beside each of ours in tables of the
    paper's backbone; for any other model, the published figures of the same methods and datasets
    as a table of their own."""
    keys = ["model", *_varying(con)]
    listed = ", ".join(f"'{m}'" for m in methods)
    data = con.execute(
        f"""SELECT {', '.join(keys)}, method, dataset, avg(retrieved_tokens) FROM episodes
            WHERE method IN ({listed}) GROUP BY ALL ORDER BY ALL"""
    ).fetchall()
    if not data:
        return ""
    n = len(keys)
    datasets = sorted({r[n + 1] for r in data})
    models = sorted({str(r[0]) for r in data})
    by_model = paper is not None
    shown = [k for k in keys if k != "model" or (not by_model and len(models) > 1)]
    blocks: dict[tuple, dict[tuple, dict[tuple[str, str], float]]] = {}
    for r in data:
        values = dict(zip(keys, r[:n]))
        block = (values["model"],) if by_model else ()
        blocks.setdefault(block, {}).setdefault(tuple(values[k] for k in shown), {})[(r[n], r[n + 1])] = r[n + 2]
    out = ["## Retrieved tokens per question (Table 3 layout)", "",
           f"Mean retrieved tokens per question ({token_unit(con)})"
           + ("" if by_model or len(models) > 1 else f". Model: {models[0]}.")
           + (f" Columns before the method: the settings that differ between runs ({', '.join(SETTING_HEADERS.get(k, k) for k in shown)})." if shown else ""), ""]
    other_models = False
    for block, rows_of in blocks.items():
        beside = paper is not None and paper.is_backbone(block[0])
        other_models |= paper is not None and not beside
        if by_model:
            out += [f"**model={block[0]}**", ""]
        if beside:
            out += [f"Columns (paper): published numbers for {paper.backbone}, {paper.source}.", ""]
            out += _protocol_note(con, cards, ["model"], block, methods)
        header = [*(SETTING_HEADERS.get(k, k) for k in shown), "Method"]
        for d in datasets:
            header += [d, "(paper)"] if beside else [d]
        rows = []
        for setting in sorted(rows_of, key=lambda s: _setting_keys(shown, s)):
            cells = rows_of[setting]
            for m in _method_order(sorted({m for m, _ in cells})):
                row = [*(_setting_text(v) for v in setting), _label(m)]
                for d in datasets:
                    row += [_fmt(cells.get((m, d)), "int"), _fmt(paper.cell(m, d), "int")] if beside else [_fmt(cells.get((m, d)), "int")]
                rows.append(row)
        out += fitted_tables(len(shown) + 1, [Topic("", header, rows, keep=header[len(shown) + 1 :])])
    if other_models:
        shown_methods = _method_order(sorted({m for rows_of in blocks.values() for cells in rows_of.values() for m, _ in cells if m in paper.tokens}))
        out.append(f"**The paper's Table 3** — published mean retrieved tokens per question with its backbone {paper.backbone}, "
                   f"not the model of the blocks above ({paper.source})")
        out.append("")
        out += _protocol_note(con, cards, (), (), None, runs=sorted(cards or {}))
        if shown_methods:
            out += [markdown_table(["Method", *datasets], [[_label(m), *(_fmt(paper.cell(m, d), "int") for d in datasets)] for m in shown_methods]), ""]
        else:
            out += ["It has no figures for these methods.", ""]
    return "\n".join(out)


def _paper_fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def accuracy_pivot(con: duckdb.DuckDBPyConnection, methods: Sequence[str] | None, title: str, require: Sequence[str] = (), paper: PaperResults | None = None,
                   fixed_rows: bool = False, note: str = "", cards: dict | None = None) -> str:
    """One table: rows = the settings that vary (model where several, judge, max steps, guard
    rails, ...: a column each) × methods, columns = dataset × (LLM-Acc, Cont-Acc). Each cell: the
    accuracy with its 95% interval and n. `require`: show only the settings rows that hold at least
    one of these methods. `paper`: a table per model instead (the published values sit beside a
    backbone's own), each of our accuracies also over the answered questions only (the paper code's
    denominator), the paper's published value beside them in tables whose model is one of its
    backbones, and below any other model's rows as reference rows of their own; `cards`: the runs'
    protocol cards (arag.evaluation.protocol), whose deviations a line under the paper's numbers names.
    `fixed_rows`: every one of `methods` is a row, in that order, "–" where it was not run (a
    table of fixed shape, like the paper's Table 2). `note`: a line under the title."""
    varying = _varying(con)
    keys = ["model", *varying]
    where = ""
    if methods is not None:
        where = "WHERE method IN (" + ", ".join("'" + m + "'" for m in methods) + ")"
    data = con.execute(
        f"""SELECT {', '.join(keys)}, method, dataset, {accuracy_sql('llm_acc')}, {accuracy_sql('contain_acc')},
                   {accuracy_sql('llm_acc', answered=True)}, {accuracy_sql('contain_acc', answered=True)}, {failures_sql()}
            FROM episodes {where} GROUP BY ALL ORDER BY ALL"""
    ).fetchall()
    if not data:
        return ""
    n = len(keys)
    datasets = sorted({r[n + 1] for r in data})
    models = sorted({str(r[0]) for r in data})
    # Blocks: one table per model with the paper's columns, else one table; a shown setting is a column.
    by_model = paper is not None
    shown = [k for k in keys if k != "model" or (not by_model and len(models) > 1)]
    blocks: dict[tuple, dict[tuple, dict[tuple[str, str], tuple]]] = {}
    for r in data:
        values = dict(zip(keys, r[:n]))
        block = (values["model"],) if by_model else ()
        blocks.setdefault(block, {}).setdefault(tuple(values[k] for k in shown), {})[(r[n], r[n + 1])] = r[n + 2 :]
    out = [f"## {title}", "", *([note, ""] if note else [])]
    out.append("LLM-Acc and Cont-Acc over the same questions: all completed episodes but judge failures (judge failures per run in the details table); "
               "failed episodes are never scored: a cell names them beside its accuracy (\"· 3 failed (cause)\"), or alone where all failed"
               + (f"; {OF_ANSWERED}: over the answered ones only (a non-empty prediction), as the paper's evaluation code divides" if paper is not None else "")
               + ("" if by_model or len(models) > 1 else f". Model: {models[0]}.")
               + (f" Columns before the method: the settings that differ between runs ({', '.join(SETTING_HEADERS.get(k, k) for k in shown)})." if shown else ""))
    out += ["", LEGEND, ""]
    for block, rows_of in blocks.items():
        if require and not any(m in require for cells in rows_of.values() for m, _ in cells):
            continue
        backbone = paper.backbone(block[0]) if paper is not None else None
        if by_model:
            out += [f"**model={block[0]}**", ""]
        if paper is not None:
            out.append(f"Columns (paper): published numbers for {backbone}, {paper.source}." if backbone else
                       f"Rows \"paper, … (reference)\": the published numbers of the paper's backbones ({', '.join(paper.backbones)}), "
                       f"not of model {block[0]}; {paper.source}.")
            out.append("")
            out += _protocol_note(con, cards, ["model"], block, methods)
        header = [*(SETTING_HEADERS.get(k, k) for k in shown), "Method"]
        for d in datasets:
            for m in _accuracy_columns(d):
                header += ([f"{d} {m} {OF_ATTEMPTED}", OF_ANSWERED] if paper is not None else [f"{d} {m}"]) + (["(paper)"] if backbone else [])
        rows, listed = [], []
        for setting in sorted(rows_of, key=lambda s: _setting_keys(shown, s)):
            cells = rows_of[setting]
            if require and not any(m in require for m, _ in cells):
                continue
            ran = _method_order(sorted({m for m, _ in cells}))
            for method in list(methods) if (fixed_rows and methods is not None) else ran:
                row = [*(_setting_text(v) for v in setting), _label(method)]
                for d in datasets:
                    # (sum, n) of LLM-Acc and Cont-Acc over the completed questions, then over the answered ones; the failed episodes and their causes
                    llm, llm_n, cont, cont_n, llm_a, llm_a_n, cont_a, cont_a_n, failed, causes = cells.get((method, d), (None, 0) * 5)
                    attempted, answered = [(llm, llm_n), (cont, cont_n)], [(llm_a, llm_a_n), (cont_a, cont_a_n)]
                    for column in range(len(_accuracy_columns(d))):
                        row.append(accuracy_cell(*attempted[column], failed, causes))
                        if paper is not None:
                            row.append(accuracy_cell(*answered[column]))
                        if backbone:
                            row.append(_paper_fmt(paper.cell(backbone, method, d, column)))
                rows.append(row)
                listed += [method] if method in ran or fixed_rows else []
        if paper is not None and not backbone:
            reference = reference_rows(paper, list(dict.fromkeys(listed)), datasets, _accuracy_columns, _label, _paper_fmt, of_answered=True)
            rows += [[*([""] * len(shown)), *r] for r in reference]
        out += fitted_tables(len(shown) + 1, _by_dataset(len(shown) + 1, header, rows, datasets))
    return "\n".join(out)


def _by_dataset(keys: int, header: Sequence[str], rows: Sequence[Sequence[str]], datasets: Sequence[str]) -> list[Topic]:
    """A pivot as one table, or one per dataset (its columns together) where one is wider than
    MAX_COLUMNS; the dataset columns are never dropped as constant."""
    if len(header) <= MAX_COLUMNS or len(datasets) < 2:
        return [Topic("", header, rows, keep=header[keys:])]
    starts = [next(i for i, h in enumerate(header) if i >= keys and h.startswith(f"{d} ")) for d in datasets]
    return [Topic(d, [*header[:keys], *header[a:b]], [[*r[:keys], *r[a:b]] for r in rows], keep=header[a:b])
            for d, a, b in zip(datasets, starts, [*starts[1:], len(header)])]


def _setting_text(value: Any) -> str:
    return "—" if value is None else str(value)


def _protocol_note(con: duckdb.DuckDBPyConnection, cards: dict | None, keys: Sequence[str], group: Sequence[Any], methods: Sequence[str] | None,
                   runs: Sequence[str] | None = None) -> list[str]:
    """The deviation line (arag.report.protocol.deviation_note) of a block's runs, with a blank line."""
    if cards is None:
        return []
    note = deviation_note(cards, runs if runs is not None else block_runs(con, keys, group, methods))
    return [note, ""] if note else []


def ablation_table(con: duckdb.DuckDBPyConnection, paper: PaperResults | None = None, cards: dict | None = None) -> str:
    """The paper's Table 2 layout: rows = A-RAG (Full) and its `arag_no_*` variants (the paper's
    three first, any other after), columns = dataset × (LLM-Acc, Cont-Acc) as in the main table; one
    block per model and varying setting that holds an ablation run. `paper`: the published Table 2
    (conf/paper_results/a_rag_table2.yaml) beside ours in blocks of its backbone."""
    title = "Ablations (Table 2 layout): A-RAG (Full) without one tool"
    ran = [m for (m,) in con.execute("SELECT DISTINCT method FROM episodes WHERE method LIKE 'arag_no_%' ORDER BY method").fetchall()]
    if not ran:
        return f"## {title}\n\nNo ablation runs (methods `arag_no_*`) in these results.\n"
    rows = [*ABLATION_ROWS, *(m for m in ran if m not in ABLATION_ROWS)]
    note = "Rows in the paper's order; \"–\": that variant has no run in the block."
    return accuracy_pivot(con, rows, title, require=ran, fixed_rows=True, note=note, paper=paper, cards=cards)


def key_header(cols: Sequence[str]) -> list[str]:
    """The headers of a per-run table's key columns (dataset, model, method and the settings that vary)."""
    return [SETTING_HEADERS.get(c, c) for c in cols]


def key_cells(cols: Sequence[str], values: Sequence[Any]) -> list[str]:
    """A per-run table's key cells: the method by its label (conf/method/<name>.yaml), "—" for unset."""
    return [_label(v) if c == "method" else _setting_text(v) for c, v in zip(cols, values)]


def topic_tables(keys: int, tables: Sequence[tuple[str, Sequence[str], Sequence[Sequence[str]]]]) -> list[str]:
    """A wide table's columns split by topic: (title, header, rows) each, its first `keys` columns
    (the run cell: dataset, model, method, settings) repeated in each and left-aligned; columns the
    same on every row stated once above instead, and a part still too wide split (arag.report.tables)."""
    return fitted_tables(keys, [Topic(title, header, rows) for title, header, rows in tables])


def details_table(con: duckdb.DuckDBPyConnection) -> str:
    """Per run cell, two tables: questions, failures and accuracy over the completed ones; accuracy over the
    answered ones, EM, F1 and evidence recall."""
    varying = _varying(con)
    cols = ["dataset", "model", "method", *varying]
    data = con.execute(
        f"""SELECT {', '.join(cols)}, count(DISTINCT run_id), count(*), count(*) FILTER ({ANSWERED}),
                   count(*) FILTER (status = 'failed'), count(*) FILTER (forced),
                   {accuracy_sql('contain_acc')}, {accuracy_sql('llm_acc')}, {accuracy_sql('contain_acc', answered=True)}, {accuracy_sql('llm_acc', answered=True)},
                   count(*) FILTER (judge_status = 'failed'), avg(exact_match) FILTER (NOT ({FAILED})), avg(f1) FILTER (NOT ({FAILED})),
                   avg(evidence_recall_read), avg(evidence_recall_seen), {failures_sql()}
            FROM episodes GROUP BY ALL ORDER BY ALL"""
    ).fetchall()
    n = len(cols)
    order = {m: i for i, m in enumerate(_method_order(sorted({r[2] for r in data})))}
    data.sort(key=lambda r: (str(r[0]), str(r[1]), order[r[2]], *_setting_keys(cols[3:], r[3:n])))
    keys = key_header(cols)
    counted = [*keys, "runs", "questions", "answered", "failed", "forced", "judge failed", f"Cont-Acc {OF_ATTEMPTED}", f"LLM-Acc {OF_ATTEMPTED}"]
    scored = [*keys, f"Cont-Acc {OF_ANSWERED}", f"LLM-Acc {OF_ANSWERED}", "EM", "F1", "evidence read", "evidence seen"]
    counted_rows, scored_rows = [], []
    for r in data:
        accuracies = [accuracy_cell(r[i], r[i + 1]) for i in range(n + 5, n + 13, 2)]
        key = key_cells(cols, r[:n])
        failed = failures_text(r[-2], r[-1], noun="") or "0"
        counted_rows.append([*key, *(_fmt(v, "int") for v in r[n : n + 3]), failed, _fmt(r[n + 4], "int"), _fmt(r[n + 13], "int"), *accuracies[:2]])
        scored_rows.append([*key, *accuracies[2:], *(_fmt(v) for v in r[n + 14 : n + 18])])
    return "\n".join([
        "## Details per run",
        "",
        f"{LEGEND} {OF_ATTEMPTED}: over the completed episodes (an empty answer scores 0), our default; {OF_ANSWERED}: over the answered "
        "ones only (a non-empty prediction), the denominator of the A-RAG paper's evaluation code. Both leave out questions whose judge gave no "
        "verdict ('judge failed'), and failed episodes (an outage, a timeout: 'failed', with their most frequent cause), which have no result "
        "to score. EM, F1: means in % over the completed episodes. "
        "Evidence recall: share of the supporting documents whose chunks the agent read in full / saw in any tool result.",
        "",
        *topic_tables(n, [("Questions and accuracy over the attempted ones", counted, counted_rows),
                          ("Accuracy over the answered ones, EM, F1 and evidence recall", scored, scored_rows)]),
    ])


def cost_table(con: duckdb.DuckDBPyConnection) -> str:
    """Per run cell, means per episode: the tokens of its context and its model calls; its steps and time."""
    varying = _varying(con)
    cols = ["dataset", "model", "method", *varying]
    data = con.execute(
        f"""SELECT {', '.join(cols)}, avg(retrieved_tokens), avg(prompt_tokens), avg(completion_tokens), avg(reasoning_tokens),
                   avg(steps), avg(tool_calls), avg(wall_s), avg(llm_s), avg(tool_s)
            FROM episodes GROUP BY ALL ORDER BY ALL"""
    ).fetchall()
    n = len(cols)
    order = {m: i for i, m in enumerate(_method_order(sorted({r[2] for r in data})))}
    data.sort(key=lambda r: (str(r[0]), str(r[1]), order[r[2]], *_setting_keys(cols[3:], r[3:n])))
    keys = key_header(cols)
    tokens = [*keys, "retrieved tokens", "prompt tokens", "completion tokens", "reasoning tokens"]
    time = [*keys, "steps", "tool calls", "wall s", "LLM s", "tools s"]
    token_rows = [[*key_cells(cols, r[:n]), *(_fmt(v, "int") for v in r[n : n + 4])] for r in data]
    time_rows = [[*key_cells(cols, r[:n]), _fmt(r[n + 4], "f1"), _fmt(r[n + 5], "f1"), *(_fmt(v, "f2") for v in r[n + 6 :])] for r in data]
    return "\n".join(["## Retrieved tokens and cost per episode", "", f"Means per episode (retrieved tokens: {token_unit(con)}).", "",
                      *topic_tables(n, [("Tokens", tokens, token_rows), ("Steps and time", time, time_rows)])])


def tool_table(con: duckdb.DuckDBPyConnection) -> str:
    """Per run cell (dataset, model, method and the settings that vary): mean calls per tool; tool
    errors, unusable and repeated calls, invalid replies and forced answers; the tool errors by
    failure kind (`failure_columns`), every count from the trajectories (arag.report.facts)."""
    cols = ["dataset", "model", "method", *_varying(con)]
    tools = tool_columns(con)
    failures = failure_columns()
    data = con.execute(
        f"""SELECT {', '.join(cols)}, {', '.join(f'avg(calls_{t})' for t in tools)}, {_counted('avg(tool_errors)')}, avg(invalid_replies),
                   avg(CAST(forced AS INTEGER)), sum(tool_calls), {', '.join(sql for _, sql in failures)}
           FROM episodes GROUP BY ALL"""
    ).fetchall()
    n, t = len(cols), len(tools)
    order = {m: i for i, m in enumerate(_method_order(sorted({r[2] for r in data})))}
    data.sort(key=lambda r: (str(r[0]), str(r[1]), order[r[2]], *_setting_keys(cols[3:], r[3:n])))
    keys = key_header(cols)
    calls = [*keys, *tools]
    call_rows = [[*key_cells(cols, r[:n]), *(_fmt(v, "f2") for v in r[n : n + t])] for r in data]
    f = n + t + 4  # the first failure column; the calls in all before it

    def known(v: Any, kind: str) -> str:
        return "n/a" if v is None else _fmt(v, kind)

    errors = [*keys, "tool errors", "invalid replies", "forced answers %", failures[0][0], failures[-1][0]]
    error_rows = [[*key_cells(cols, r[:n]), known(r[n + t], "f2"), _fmt(r[n + t + 1], "f2"), _fmt(r[n + t + 2]), calls_share(r[f], r[f - 1]), calls_share(r[-1], r[f - 1])]
                  for r in data]
    kinds = [*keys, *(label for label, _ in failures[1:-1])]
    kind_rows = [[*key_cells(cols, r[:n]), *(known(v, "int") for v in r[f + 1 : -1])] for r in data]
    return "\n".join(["## Tool use", "",
                      "Calls per tool, tool errors and invalid replies: means per episode (naive_rag's one retrieval counts as a "
                      "naive_embedding_search call). A tool error is a call whose result the model could not use (refused arguments, an "
                      "unknown tool, only unknown ids, a search that found nothing, only chunks already read, a failed tool); a repeated call "
                      "is identical to an earlier call of the episode (docs/evaluation.md). Unusable and repeated calls, and the tool errors "
                      "by kind: calls in all, of all the run's calls. Every count is taken from the episodes' trajectories, the same count the "
                      "viewer shows, for runs stored before these were recorded too; \"n/a\": rows stored without a trajectory.", "",
                      *topic_tables(n, [("Calls per tool", calls, call_rows), ("Tool errors, repeated calls and forced answers", errors, error_rows),
                                        ("Tool errors by kind (calls)", kinds, kind_rows)])])


def _counted(aggregate: str, column: str = "tool_errors") -> str:
    """`aggregate` where every row of the cell has its facts counted (a trajectory), else NULL."""
    return f"CASE WHEN count({column}) = count(*) THEN {aggregate} END"


def calls_share(count: Any, calls: Any) -> str:
    """ "370 of 409 (90.5%)": calls of a kind among all calls; "n/a" where not counted."""
    if count is None:
        return "n/a"
    share = f" ({100 * count / calls:.1f}%)" if calls else ""
    return f"{int(count)} of {int(calls or 0)}{share}"


def failure_columns() -> list[tuple[str, str]]:
    """(header, SQL aggregate) of the tool-failure tables: unusable calls, the calls of each failure
    kind and repeated calls, in all; NULL (shown "n/a") for a cell with a row stored without a trajectory."""
    kinds = [(kind.replace("_", " "), _counted(f"sum(tool_errors_{kind})")) for kind in failure_kinds()]
    return [("unusable calls", _counted("sum(tool_errors)")), *kinds, ("repeated calls", _counted("sum(repeated_calls)"))]


def agentic_table(con: duckdb.DuckDBPyConnection) -> str:
    """AgenticRAG and its ablations beside A-RAG (Full) and Naive RAG, per dataset, model and the
    settings that vary: a table of accuracy and citations, then one of cost and tool use."""
    listed = ", ".join(f"'{m}'" for m in AGENTIC_COMPARISON)
    cols = ["dataset", "model", "method", *_varying(con)]
    tools = method_declarations()[AGENTIC_METHOD]["tools"]
    data = con.execute(
        f"""SELECT {', '.join(cols)}, count(*), {accuracy_sql('llm_acc')}, {accuracy_sql('contain_acc')},
                   avg(citation_recall_at_1), avg(citation_recall_at_3), avg(prompt_tokens + completion_tokens), avg(retrieved_tokens),
                   {''.join(f'avg(calls_{t}), ' for t in tools)}avg(forced_summaries), avg(CAST(forced AS INTEGER)), {failures_sql()}
            FROM episodes WHERE method IN ({listed}) GROUP BY ALL ORDER BY ALL"""
    ).fetchall()
    if not any(r[2].startswith("agenticrag") for r in data):
        return "## AgenticRAG\n\nNo AgenticRAG runs (methods `agenticrag*`) in these results.\n"
    n = len(cols)
    t = len(tools)
    accuracy = [*key_header(cols), "n", "LLM-Acc", "Cont-Acc", "cited R@1", "cited R@3"]
    cost = [*key_header(cols), "tokens / question", "retrieved tokens", "forced summarizes", "forced answers %"]
    calls = [*key_header(cols), *tools]
    order = {m: i for i, m in enumerate(AGENTIC_COMPARISON)}
    accuracy_rows, cost_rows, call_rows = [], [], []
    for r in sorted(data, key=lambda r: (r[0], r[1], *_setting_keys(cols[3:], r[3:n]), order[r[2]])):
        key = key_cells(cols, r[:n])
        accuracy_rows.append([*key, _fmt(r[n], "int"), accuracy_cell(r[n + 1], r[n + 2], r[-2], r[-1]), accuracy_cell(r[n + 3], r[n + 4], r[-2], r[-1]),
                              *(_fmt(v) for v in r[n + 5 : n + 7])])
        cost_rows.append([*key, *(_fmt(v, "int") for v in r[n + 7 : n + 9]), _fmt(r[n + 9 + t], "f2"), _fmt(r[n + 10 + t])])
        call_rows.append([*key, *(_fmt(v, "f2") for v in r[n + 9 : n + 9 + t])])
    return "\n".join([
        "## AgenticRAG beside A-RAG (Full) and Naive RAG",
        "",
        f"{LEGEND} Cited R@k: share of the supporting documents among the first k documents the answer cites, ranked by "
        "their relevance scores (AgenticRAG only); tokens / question: prompt + completion tokens of all model calls; tool "
        "columns: mean calls per question.",
        "",
        *topic_tables(n, [("Accuracy and citations", accuracy, accuracy_rows), ("Cost and forced steps", cost, cost_rows), ("Calls per tool", calls, call_rows)]),
    ])


# ---- plots ---------------------------------------------------------------------------------------
def accuracy_lines(con: duckdb.DuckDBPyConnection, x: str) -> tuple[list[str], list[tuple[str, list[tuple[str, Proportion | None, Proportion | None]]]]]:
    """The x values in order (as tick labels; a run that leaves `x` unset shows "unset", apart from
    an effort of "none"), and per line (dataset, model, method, other setting, guard rails, judge)
    its label and points (x, Cont-Acc, LLM-Acc), each accuracy with its n and interval (None where
    nothing was scored); with a sweep present, only the lines with ≥ 2 points."""
    other = "reasoning_effort" if x == "max_steps" else "max_steps"
    data = con.execute(
        f"""SELECT dataset, model, method, {other} AS o, guard_rails AS g, judge AS j, {x} AS x,
                   {accuracy_sql('contain_acc')}, {accuracy_sql('llm_acc')}
            FROM episodes GROUP BY ALL"""
    ).fetchall()
    lines: dict[tuple, list[tuple]] = {}
    for d, model, method, o, g, j, xv, cont, cont_n, llm, llm_n in data:
        lines.setdefault((d, model, method, o, g, j), []).append((xv, proportion(cont, cont_n), proportion(llm, llm_n)))
    if any(len(pts) > 1 for pts in lines.values()):  # a sweep: its series only, not the single points of other runs
        lines = {k: pts for k, pts in lines.items() if len(pts) > 1}
    xs = sorted({p[0] for pts in lines.values() for p in pts}, key=lambda v: setting_order(x, v))

    def tick(v: Any) -> str:
        return "unset" if v is None else str(v)

    show_dataset = len({k[0] for k in lines}) > 1
    show_model = len({k[1] for k in lines}) > 1
    show_judge = len({k[5] for k in lines}) > 1
    methods = _method_order(sorted({k[2] for k in lines}))

    def order(key: tuple) -> tuple:
        d, model, method, o, g, j = key
        return (d, model, methods.index(method), setting_order(other, o), g, j)

    out = []
    for key, pts in sorted(lines.items(), key=lambda kv: order(kv[0])):
        d, model, method, o, g, j = key
        label = " · ".join([_label(method), *([d] if show_dataset else []), *([model] if show_model else []), *([f"{other}={o}"] if o is not None else []),
                            *([f"guard_rails={g}"] if g != "off" else []), *([f"judge={j}"] if show_judge else [])])
        out.append((label, [(tick(v), cont, llm) for v, cont, llm in sorted(pts, key=lambda p: setting_order(x, p[0]))]))
    return [tick(v) for v in xs], out


def swept(con: duckdb.DuckDBPyConnection, x: str) -> bool:
    """Whether a plot against `x` shows anything: some series of runs that differ only in `x` has at
    least MIN_PLOTTED_POINTS values of it (fewer are read off the sweep table)."""
    return any(len(s.points) >= MIN_PLOTTED_POINTS for s in sweep_series(con, x, _varying(con)))


def plot_accuracy_vs(con: duckdb.DuckDBPyConnection, x: str, path: Path) -> Path:
    """accuracy_figure's plot as a PNG file."""
    return save_figure(accuracy_figure(con, x), path)


def save_figure(fig, path: Path) -> Path:
    """The figure as a PNG cropped to what it draws (a legend beside the axes included)."""
    fig.savefig(path, bbox_inches="tight", pad_inches=0.15)
    _pyplot().close(fig)
    return path


def _wrapped(label: str, width: int = LEGEND_WIDTH) -> str:
    return "\n".join(textwrap.wrap(label, width, break_on_hyphens=False)) or label


def accuracy_figure(con: duckdb.DuckDBPyConnection, x: str):
    """Contain-Acc (solid) and LLM-Acc (dashed) against `x`, a line per accuracy_lines entry, each
    point with its 95% Wilson interval as an error bar (the lines a little apart so the bars do not
    hide each other); the legend beside the axes, never over them."""
    plt = _pyplot()
    xs, lines = accuracy_lines(con, x)
    pos = {v: i for i, v in enumerate(xs)}
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    slots = max(1, 2 * len(lines))  # each line's Cont-Acc and LLM-Acc side by side, centred on the x tick
    step = 0.3 / slots
    for i, (label, pts) in enumerate(lines):
        color = f"C{i % 10}"
        for which, (column, style, alpha) in enumerate(((1, "-o", 1.0), (2, "--s", 0.7))):
            shown = [(pos[p[0]] + step * (2 * i + which - (slots - 1) / 2), p[column]) for p in pts if p[column] is not None]
            if not shown:
                continue
            values = [100 * acc.value for _, acc in shown]
            below = [v - 100 * acc.interval[0] for v, (_, acc) in zip(values, shown)]
            above = [100 * acc.interval[1] - v for v, (_, acc) in zip(values, shown)]
            ax.errorbar([at for at, _ in shown], values, yerr=[below, above], fmt=style, color=color, alpha=alpha, capsize=3, elinewidth=1,
                        label=label + (" (Cont-Acc)" if column == 1 else " (LLM-Acc)"))
    ax.set_xticks(range(len(xs)), xs)
    ax.set_xlabel(AXIS_LABELS.get(x, x))
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, [_wrapped(lb) for lb in labels], fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    ax.set_title(f"Accuracy vs {AXIS_LABELS.get(x, x)}", fontsize=11)
    ax.text(0.0, -0.16, "Cont-Acc solid, LLM-Acc dashed; bars: 95% Wilson intervals", transform=ax.transAxes, fontsize=7, va="top")
    return fig


def tool_use_series(con: duckdb.DuckDBPyConnection) -> list[tuple[str, tuple, list[tuple[int, int]]]]:
    """(label, mean calls per tool, [(tool calls in an episode, episodes)]) per dataset and method, in
    dataset then method order; a method whose runs differ in a shown setting gets one entry per
    setting value (the judge aside: it does not change what the agent did). Each episode counts once:
    a re-judged run's are its source's (arag.report.rejudges)."""
    shown = [c for c in _varying(con) if c != "judge"]
    keys = ["dataset", "method", *shown]
    once = counted_once_sql(con)
    means = con.execute(f"SELECT {', '.join(keys)}, {', '.join(f'avg(calls_{t})' for t in tool_columns(con))} FROM episodes WHERE {once} GROUP BY ALL").fetchall()
    hist: dict[tuple, list[tuple[int, int]]] = {}
    for *key, calls, count in con.execute(f"SELECT {', '.join(keys)}, tool_calls, count(*) FROM episodes WHERE {once} GROUP BY ALL ORDER BY ALL").fetchall():
        hist.setdefault(tuple(key), []).append((calls, count))
    n = len(keys)
    several = len({r[0] for r in means}) > 1
    order = {m: i for i, m in enumerate(_method_order(sorted({r[1] for r in means})))}

    def label(r: tuple) -> str:
        return " · ".join([_label(r[1]), *([str(r[0])] if several else []), *(f"{c}={_setting_text(v)}" for c, v in zip(shown, r[2:n]))])

    return [(label(r), tuple(r[n:]), hist.get(tuple(r[:n]), []))
            for r in sorted(means, key=lambda r: (str(r[0]), order[r[1]], *_setting_keys(shown, r[2:n])))]


def tool_use_figure(con: duckdb.DuckDBPyConnection):
    """Top: mean calls per episode by tool (stacked) per series; bottom: the distribution of tool
    calls per episode. Series are numbered on the bars (their names, wrapped, in the legend beside
    the lower axes); each legend sits beside its axes."""
    plt = _pyplot()
    series = tool_use_series(con)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 7.5), dpi=110)
    bottom_of = [0.0] * len(series)
    for j, tool in enumerate(tool_columns(con)):
        values = [means[j] or 0.0 for _, means, _ in series]
        if any(values):
            top.bar(range(len(series)), values, bottom=bottom_of, label=tool, color=f"C{j % 10}")
            bottom_of = [b + v for b, v in zip(bottom_of, values)]
    top.set_xticks(range(len(series)), [str(i + 1) for i in range(len(series))])
    top.set_xlabel("series (numbered as in the legend below)")
    top.set_ylabel("mean calls per episode")
    top.set_title("Tool calls per episode, by tool", fontsize=11)
    if top.get_legend_handles_labels()[0]:
        top.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    for i, (label, _, hist) in enumerate(series):
        total = sum(c for _, c in hist)
        bottom.plot([k for k, _ in hist], [100 * c / total for _, c in hist], "-o", color=f"C{i % 10}", label=_wrapped(f"{i + 1}. {label}"), markersize=3)
    bottom.set_xlabel("tool calls in the episode")
    bottom.set_ylabel("episodes (%)")
    bottom.set_title("Distribution of tool calls per episode", fontsize=11)
    bottom.grid(alpha=0.3)
    bottom.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    fig.subplots_adjust(hspace=0.45)
    return fig


def plot_tool_use(con: duckdb.DuckDBPyConnection, path: Path) -> Path:
    """tool_use_figure as a PNG file."""
    return save_figure(tool_use_figure(con), path)


# ---- the report ----------------------------------------------------------------------------------
PLOT_TITLES = {**{f"accuracy_vs_{x}.png": f"Accuracy vs {AXIS_LABELS[x]}" for x in SWEEPABLE}, "tool_use.png": "Tool use",
               PAPER_FIGURE_FILE: "Test-time scaling, the paper's layout"}


def plots_section(names: Sequence[str]) -> str:
    """The plots drawn (a sweep plot only for a setting swept over at least MIN_PLOTTED_POINTS values)."""
    shown = [n for n in names if n != PAPER_FIGURE_FILE]  # shown in its own section
    out = ["## Plots", ""]
    out += [line for n in shown for line in (f"![{PLOT_TITLES.get(n, n)}]({n})", "")]
    if not any(n.startswith("accuracy_vs_") for n in shown):
        out += [f"No accuracy plot: no setting is swept over {MIN_PLOTTED_POINTS} or more values (the sweep tables above hold any shorter series).", ""]
    return "\n".join(out)


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
    sweeps = [sweep_table(con, x, _varying(con), _label) for x in SWEEPABLE]  # before any file: it may refuse unlike runs
    for stale in (*(f"accuracy_vs_{x}.png" for x in SWEEPABLE), "tool_use.png"):  # a plot this report does not draw must not linger
        (out / stale).unlink(missing_ok=True)
    plots = [plot_accuracy_vs(con, x, out / f"accuracy_vs_{x}.png") for x in SWEEPABLE if swept(con, x)]
    if con.execute("SELECT count(*) FILTER (tool_calls > 0) FROM episodes").fetchone()[0]:
        plots.append(plot_tool_use(con, out / "tool_use.png"))
    if paper_columns:  # the paper's Figure 4 beside our sweep tables
        figure, drawn = paper_figure_section(con, _varying(con), out, _label)
        sweeps.append(figure)
        plots += drawn
    cards = run_cards(con, results_path)
    parts = [
        f"# {title}",
        "",
        f"{n:,} episodes in {runs} runs from `{results_path}`" + (f" (filter: `{where}`)" if where else "") + f"; {failed:,} failed episodes and {judge_failed:,} judge failures (both left out of LLM-Acc and Cont-Acc; failed episodes named in each cell).",
        "",
        rejudge_section(con, _label),
        accuracy_pivot(con, [m for m in _method_order([r[0] for r in con.execute("SELECT DISTINCT method FROM episodes").fetchall()]) if not m.startswith(("arag_no_", "agenticrag_"))], "Main results",
                       paper=PaperResults.load() if paper_columns else None, cards=cards),
        ablation_table(con, paper=PaperResults.load(table=PAPER_ABLATIONS_FILE) if paper_columns else None, cards=cards),
        paired_section(con, _varying(con), _label),  # beside the tables whose comparisons it tests
        *sweeps,
        agentic_table(con),
        a2rag_section(con, _varying(con), _label),
        details_table(con),
        tokens_pivot(con, [m for m in _method_order([r[0] for r in con.execute("SELECT DISTINCT method FROM episodes").fetchall()]) if not m.startswith("agenticrag")], paper=PaperTokens.load() if paper_columns else None, cards=cards),
        cost_table(con),
        tool_table(con),
        protocol_section(con, cards, _label),
        plots_section([p.name for p in plots]),
    ]
    markdown = "\n".join(parts)
    path = out / "report.md"
    path.write_text(markdown, encoding="utf-8")
    return Report(markdown, path, plots, n)

