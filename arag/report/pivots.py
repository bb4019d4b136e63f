"""The report's pivot tables, rows = the settings that vary × methods, columns = datasets: the main
table (Table 1's layout), the ablations (Table 2's) and the retrieved tokens (Table 3's)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import duckdb

from arag.report.episodes import ABLATION_ROWS, SETTING_HEADERS, method_label, method_order, setting_keys, token_unit, varying_settings
from arag.report.format import OF_ANSWERED, OF_ATTEMPTED, accuracy_sql, failures_sql, markdown_table, setting_text
from arag.report.format import format_value as _fmt
from arag.report.intervals import LEGEND
from arag.report.intervals import cell as accuracy_cell
from arag.report.paper import PaperResults, PaperTokens
from arag.report.protocol import block_runs, deviation_note
from arag.report.tables import MAX_COLUMNS, Topic, fitted_tables

# Datasets with long-form gold answers: the main table shows LLM-Acc only for them, as the paper does.
LONG_FORM_DATASETS = ("graphrag-bench",)


@dataclass
class Pivot:
    """A query's rows in blocks (one per model, or one) of rows, each holding the aggregates per (method, dataset)."""

    shown: list[str]  # the setting columns before the method
    datasets: list[str]
    models: list[str]
    blocks: dict[tuple, dict[tuple, dict[tuple[str, str], tuple]]]

    def note(self, by_model: bool) -> str:
        """The model where there is one table of one model; the setting columns where there are any."""
        return (("" if by_model or len(self.models) > 1 else f". Model: {self.models[0]}.")
                + (f" Columns before the method: the settings that differ between runs ({', '.join(SETTING_HEADERS.get(k, k) for k in self.shown)})." if self.shown else ""))

    def rows(self, block: tuple) -> list[tuple[tuple, dict[tuple[str, str], tuple], list[str]]]:
        """(settings, cells, the methods run) of a block's rows, in settings order."""
        rows_of = self.blocks[block]
        return [(s, rows_of[s], method_order(sorted({m for m, _ in rows_of[s]}))) for s in sorted(rows_of, key=lambda s: setting_keys(self.shown, s))]


def pivot(con: duckdb.DuckDBPyConnection, methods: Sequence[str] | None, aggregates: str, by_model: bool) -> Pivot | None:
    """`aggregates` per model, varying settings, method and dataset; a block per model with `by_model`; None without a row."""
    keys = ["model", *varying_settings(con)]
    where = "WHERE method IN (" + ", ".join("'" + m + "'" for m in methods) + ")" if methods is not None else ""
    data = con.execute(f"SELECT {', '.join(keys)}, method, dataset, {aggregates} FROM episodes {where} GROUP BY ALL ORDER BY ALL").fetchall()
    if not data:
        return None
    n = len(keys)
    models = sorted({str(r[0]) for r in data})
    shown = [k for k in keys if k != "model" or (not by_model and len(models) > 1)]
    blocks: dict[tuple, dict[tuple, dict[tuple[str, str], tuple]]] = {}
    for r in data:
        values = dict(zip(keys, r[:n]))
        block = (values["model"],) if by_model else ()
        blocks.setdefault(block, {}).setdefault(tuple(values[k] for k in shown), {})[(r[n], r[n + 1])] = r[n + 2 :]
    return Pivot(shown, sorted({r[n + 1] for r in data}), models, blocks)


def tokens_pivot(con: duckdb.DuckDBPyConnection, methods: Sequence[str], paper: PaperTokens | None = None, cards: dict | None = None) -> str:
    """Table 3's layout in the main table's shape: mean retrieved tokens per question. `paper`: a table per
    model, the published figures beside ours (the paper's backbone) or as a table of their own."""
    by_model = paper is not None
    found = pivot(con, methods, "avg(retrieved_tokens)", by_model)
    if found is None:
        return ""
    datasets = found.datasets
    out = ["## Retrieved tokens per question (Table 3 layout)", "", f"Mean retrieved tokens per question ({token_unit(con)})" + found.note(by_model), ""]
    other_models = False
    for block in found.blocks:
        beside = paper is not None and paper.is_backbone(block[0])
        other_models |= paper is not None and not beside
        if by_model:
            out += [f"**model={block[0]}**", ""]
        if beside:
            out += [f"Columns (paper): published numbers for {paper.backbone}, {paper.source}.", ""]
            out += _protocol_note(cards, block_runs(con, block[0], methods) if cards else [])
        header = [*(SETTING_HEADERS.get(k, k) for k in found.shown), "Method"]
        for d in datasets:
            header += [d, "(paper)"] if beside else [d]
        rows = []
        for setting, cells, ran in found.rows(block):
            for m in ran:
                row = [*(setting_text(v) for v in setting), method_label(m)]
                for d in datasets:
                    ours = _fmt(cells[(m, d)][0] if (m, d) in cells else None, "int")
                    row += [ours, _fmt(paper.cell(m, d), "int")] if beside else [ours]
                rows.append(row)
        out += fitted_tables(len(found.shown) + 1, [Topic("", header, rows, keep=header[len(found.shown) + 1 :])])
    if other_models:
        shown_methods = method_order(sorted({m for rows_of in found.blocks.values() for cells in rows_of.values() for m, _ in cells if m in paper.tokens}))
        out += [f"**The paper's Table 3** — published mean retrieved tokens per question with its backbone {paper.backbone}, "
                f"not the model of the blocks above ({paper.source})", ""]
        out += _protocol_note(cards, sorted(cards or {}))
        if shown_methods:
            out += [markdown_table(["Method", *datasets], [[method_label(m), *(_fmt(paper.cell(m, d), "int") for d in datasets)] for m in shown_methods]), ""]
        else:
            out += ["It has no figures for these methods.", ""]
    return "\n".join(out)


def accuracy_columns(dataset: str) -> tuple[str, ...]:
    """The paper's columns: LLM-Acc and Cont-Acc for the short-answer sets, LLM-Acc alone for
    GraphRAG-Bench, whose long-form gold answers are never contained verbatim."""
    return ("LLM-Acc",) if dataset.startswith(LONG_FORM_DATASETS) else ("LLM-Acc", "Cont-Acc")


def accuracy_pivot(con: duckdb.DuckDBPyConnection, methods: Sequence[str] | None, title: str, require: Sequence[str] = (), paper: PaperResults | None = None,
                   fixed_rows: bool = False, note: str = "", cards: dict | None = None) -> str:
    """Cells = dataset × (LLM-Acc, Cont-Acc), each with its 95% interval and n. `require`: only the settings
    rows holding one of these methods. `paper`: a table per model, our accuracies also of the answered
    questions (the paper code's denominator) beside the published ones, or reference rows under any other
    model; `cards` name the deviations under them. `fixed_rows`: every method a row, "–" where not run."""
    by_model = paper is not None
    aggregates = f"""{accuracy_sql('llm_acc')}, {accuracy_sql('contain_acc')},
                   {accuracy_sql('llm_acc', answered=True)}, {accuracy_sql('contain_acc', answered=True)}, {failures_sql()}"""
    found = pivot(con, methods, aggregates, by_model)
    if found is None:
        return ""
    datasets, shown = found.datasets, found.shown
    out = [f"## {title}", "", *([note, ""] if note else [])]
    out.append("LLM-Acc and Cont-Acc over the same questions: all completed episodes but judge failures (judge failures per run in the details table); "
               "failed episodes are never scored: a cell names them beside its accuracy (\"· 3 failed (cause)\"), or alone where all failed"
               + (f"; {OF_ANSWERED}: over the answered ones only (a non-empty prediction), as the paper's evaluation code divides" if paper is not None else "")
               + found.note(by_model))
    out += ["", LEGEND, ""]
    for block, rows_of in found.blocks.items():
        if require and not any(m in require for cells in rows_of.values() for m, _ in cells):
            continue
        backbone = paper.backbone(block[0]) if paper is not None else None
        if by_model:
            out += [f"**model={block[0]}**", ""]
        if paper is not None:
            out += [f"Columns (paper): published numbers for {backbone}, {paper.source}." if backbone else
                    f"Rows \"paper, … (reference)\": the published numbers of the paper's backbones ({', '.join(paper.backbones)}), "
                    f"not of model {block[0]}; {paper.source}.", ""]
            out += _protocol_note(cards, block_runs(con, block[0], methods) if cards else [])
        header = [*(SETTING_HEADERS.get(k, k) for k in shown), "Method"]
        for d in datasets:
            for m in accuracy_columns(d):
                header += ([f"{d} {m} {OF_ATTEMPTED}", OF_ANSWERED] if paper is not None else [f"{d} {m}"]) + (["(paper)"] if backbone else [])
        rows, listed = [], []
        for setting, cells, ran in found.rows(block):
            if require and not any(m in require for m, _ in cells):
                continue
            for method in list(methods) if (fixed_rows and methods is not None) else ran:
                row = [*(setting_text(v) for v in setting), method_label(method)]
                for d in datasets:
                    # (sum, n) of LLM-Acc and Cont-Acc over the completed questions, then over the answered ones; the failed episodes and their causes
                    llm, llm_n, cont, cont_n, llm_a, llm_a_n, cont_a, cont_a_n, failed, causes = cells.get((method, d), (None, 0) * 5)
                    attempted, answered = [(llm, llm_n), (cont, cont_n)], [(llm_a, llm_a_n), (cont_a, cont_a_n)]
                    for column in range(len(accuracy_columns(d))):
                        row.append(accuracy_cell(*attempted[column], failed, causes))
                        if paper is not None:
                            row.append(accuracy_cell(*answered[column]))
                        if backbone:
                            row.append(_fmt(paper.cell(backbone, method, d, column), "f1"))
                rows.append(row)
                listed += [method] if method in ran or fixed_rows else []
        if paper is not None and not backbone:
            rows += [[*([""] * len(shown)), *r] for r in reference_rows(paper, list(dict.fromkeys(listed)), datasets)]
        out += fitted_tables(len(shown) + 1, _by_dataset(len(shown) + 1, header, rows, datasets))
    return "\n".join(out)


def reference_rows(paper: PaperResults, methods: Sequence[str], datasets: Sequence[str]) -> list[list[str]]:
    """The paper's accuracies of `methods` as rows "<method> — paper, <backbone> (reference)", each under
    "(of answered)", the paper code's denominator, "–" under "(of attempted)"."""
    rows = []
    for backbone, published in paper.backbones.items():
        # the backbone as the paper writes it: 'gpt-5-mini' → 'GPT-5-mini'
        title = "GPT" + backbone[3:] if backbone.lower().startswith("gpt") else backbone
        for method in (m for m in methods if m in published):
            row = [f"{method_label(method)} — paper, {title} (reference)"]
            for d in datasets:
                for c in range(len(accuracy_columns(d))):
                    row += ["–", _fmt(paper.cell(backbone, method, d, c), "f1")]
            rows.append(row)
    return rows


def _by_dataset(keys: int, header: Sequence[str], rows: Sequence[Sequence[str]], datasets: Sequence[str]) -> list[Topic]:
    """A pivot as one table, or one per dataset where one is wider than MAX_COLUMNS."""
    if len(header) <= MAX_COLUMNS or len(datasets) < 2:
        return [Topic("", header, rows, keep=header[keys:])]
    starts = [next(i for i, h in enumerate(header) if i >= keys and h.startswith(f"{d} ")) for d in datasets]
    return [Topic(d, [*header[:keys], *header[a:b]], [[*r[:keys], *r[a:b]] for r in rows], keep=header[a:b])
            for d, a, b in zip(datasets, starts, [*starts[1:], len(header)])]


def _protocol_note(cards: dict | None, runs: Sequence[str]) -> list[str]:
    """The deviation line (arag.report.protocol.deviation_note) of a block's runs, with a blank line."""
    note = deviation_note(cards or {}, runs)
    return [note, ""] if note else []


def ablation_table(con: duckdb.DuckDBPyConnection, paper: PaperResults | None = None, cards: dict | None = None) -> str:
    """Table 2's layout: rows = A-RAG (Full) and its `arag_no_*` variants (the paper's three first), columns as
    in the main table. `paper`: the published Table 2 beside ours in blocks of its backbone."""
    title = "Ablations (Table 2 layout): A-RAG (Full) without one tool"
    ran = [m for (m,) in con.execute("SELECT DISTINCT method FROM episodes WHERE method LIKE 'arag_no_%' ORDER BY method").fetchall()]
    if not ran:
        return f"## {title}\n\nNo ablation runs (methods `arag_no_*`) in these results.\n"
    rows = [*ABLATION_ROWS, *(m for m in ran if m not in ABLATION_ROWS)]
    note = "Rows in the paper's order; \"–\": that variant has no run in the block."
    return accuracy_pivot(con, rows, title, require=ran, fixed_rows=True, note=note, paper=paper, cards=cards)
