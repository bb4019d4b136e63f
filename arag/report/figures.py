"""The report's PNG plots (matplotlib, Agg backend): accuracy against a swept setting, tool use, the
A-RAG paper's Figure 4, and the sections that show them."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any, Sequence

import duckdb

from arag.report.episodes import method_label, method_order, setting_keys, tool_columns, varying_settings
from arag.report.format import accuracy_sql, pyplot, setting_text
from arag.report.intervals import Proportion, proportion
from arag.report.rejudges import counted_once_sql
from arag.report.sweeps import AXIS_LABELS, PAPER_EFFORT_LEVELS, PAPER_FIGURE_FILE, PAPER_STEP_RANGE, SWEEPABLE, Panel, paper_figure_panels, setting_order, sweep_series

# A sweep plot is drawn for a series of at least this many values of the swept setting.
MIN_PLOTTED_POINTS = 3
# Characters per line of a legend entry (the legends sit beside the axes).
LEGEND_WIDTH = 40
PLOT_TITLES = {**{f"accuracy_vs_{x}.png": f"Accuracy vs {AXIS_LABELS[x]}" for x in SWEEPABLE}, "tool_use.png": "Tool use"}
# Where a legend sits: beside its axes, never over them.
BESIDE = {"loc": "upper left", "bbox_to_anchor": (1.02, 1.0), "borderaxespad": 0}


def accuracy_lines(con: duckdb.DuckDBPyConnection, x: str) -> tuple[list[str], list[tuple[str, list[tuple[str, Proportion | None, Proportion | None]]]]]:
    """The x tick labels in order, and per line its label and points (x, Cont-Acc, LLM-Acc), each accuracy a
    Proportion (None where nothing was scored); with a sweep present, only the lines with ≥ 2 points."""
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
    methods = method_order(sorted({k[2] for k in lines}))

    def order(key: tuple) -> tuple:
        d, model, method, o, g, j = key
        return (d, model, methods.index(method), setting_order(other, o), g, j)

    out = []
    for key, pts in sorted(lines.items(), key=lambda kv: order(kv[0])):
        d, model, method, o, g, j = key
        label = " · ".join([method_label(method), *([d] if show_dataset else []), *([model] if show_model else []), *([f"{other}={o}"] if o is not None else []),
                            *([f"guard_rails={g}"] if g != "off" else []), *([f"judge={j}"] if show_judge else [])])
        out.append((label, [(tick(v), cont, llm) for v, cont, llm in sorted(pts, key=lambda p: setting_order(x, p[0]))]))
    return [tick(v) for v in xs], out


def swept(con: duckdb.DuckDBPyConnection, x: str) -> bool:
    """Some series of runs that differ only in `x` has at least MIN_PLOTTED_POINTS values of it."""
    return any(len(s.points) >= MIN_PLOTTED_POINTS for s in sweep_series(con, x, varying_settings(con)))


def save_figure(fig, path: Path) -> Path:
    """The figure as a PNG cropped to what it draws (a legend beside the axes included)."""
    fig.savefig(path, bbox_inches="tight", pad_inches=0.15)
    pyplot().close(fig)
    return path


def _wrapped(label: str, width: int = LEGEND_WIDTH) -> str:
    return "\n".join(textwrap.wrap(label, width, break_on_hyphens=False)) or label


def accuracy_figure(con: duckdb.DuckDBPyConnection, x: str):
    """Contain-Acc (solid) and LLM-Acc (dashed) against `x`, each point with its 95% Wilson interval as an error bar."""
    xs, lines = accuracy_lines(con, x)
    pos = {v: i for i, v in enumerate(xs)}
    fig, ax = pyplot().subplots(figsize=(8, 4.5), dpi=110)
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
    ax.set(xticks=range(len(xs)), xticklabels=xs, xlabel=AXIS_LABELS.get(x, x), ylabel="accuracy (%)", ylim=(0, 100))
    ax.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, [_wrapped(lb) for lb in labels], fontsize=7, **BESIDE)
    ax.set_title(f"Accuracy vs {AXIS_LABELS.get(x, x)}", fontsize=11)
    ax.text(0.0, -0.16, "Cont-Acc solid, LLM-Acc dashed; bars: 95% Wilson intervals", transform=ax.transAxes, fontsize=7, va="top")
    return fig


def tool_use_series(con: duckdb.DuckDBPyConnection) -> list[tuple[str, tuple, list[tuple[int, int]]]]:
    """(label, mean calls per tool, [(tool calls in an episode, episodes)]) per dataset, method and shown
    setting but the judge; each episode counts once (a re-judged run's are its source's)."""
    shown = [c for c in varying_settings(con) if c != "judge"]
    keys = ["dataset", "method", *shown]
    rows = con.execute(
        f"""SELECT {', '.join(keys)}, {', '.join(f'avg(calls_{t})' for t in tool_columns(con))}, histogram(tool_calls)
            FROM episodes WHERE {counted_once_sql(con)} GROUP BY ALL"""
    ).fetchall()
    n = len(keys)
    several = len({r[0] for r in rows}) > 1
    order = {m: i for i, m in enumerate(method_order(sorted({r[1] for r in rows})))}

    def label(r: tuple) -> str:
        return " · ".join([method_label(r[1]), *([str(r[0])] if several else []), *(f"{c}={setting_text(v)}" for c, v in zip(shown, r[2:n]))])

    return [(label(r), tuple(r[n:-1]), sorted(r[-1].items())) for r in sorted(rows, key=lambda r: (str(r[0]), order[r[1]], *setting_keys(shown, r[2:n])))]


def tool_use_figure(con: duckdb.DuckDBPyConnection):
    """Top: mean calls per episode by tool (stacked) per series; bottom: the distribution of tool calls per episode."""
    series = tool_use_series(con)
    fig, (top, bottom) = pyplot().subplots(2, 1, figsize=(8, 7.5), dpi=110)
    bottom_of = [0.0] * len(series)
    for j, tool in enumerate(tool_columns(con)):
        values = [means[j] or 0.0 for _, means, _ in series]
        if any(values):
            top.bar(range(len(series)), values, bottom=bottom_of, label=tool, color=f"C{j % 10}")
            bottom_of = [b + v for b, v in zip(bottom_of, values)]
    top.set(xticks=range(len(series)), xticklabels=[str(i + 1) for i in range(len(series))],
            xlabel="series (numbered as in the legend below)", ylabel="mean calls per episode")
    top.set_title("Tool calls per episode, by tool", fontsize=11)
    if top.get_legend_handles_labels()[0]:
        top.legend(fontsize=7, **BESIDE)
    for i, (label, _, hist) in enumerate(series):
        total = sum(c for _, c in hist)
        bottom.plot([k for k, _ in hist], [100 * c / total for _, c in hist], "-o", color=f"C{i % 10}", label=_wrapped(f"{i + 1}. {label}"), markersize=3)
    bottom.set(xlabel="tool calls in the episode", ylabel="episodes (%)")
    bottom.set_title("Distribution of tool calls per episode", fontsize=11)
    bottom.grid(alpha=0.3)
    bottom.legend(fontsize=7, **BESIDE)
    fig.subplots_adjust(hspace=0.45)
    return fig


def paper_figure(panels: list[Panel], official_steps: int):
    """One axes per panel, in rows of up to four, a line per series with its 95% intervals as a band."""
    cols = min(4, len(panels))
    rows = -(-len(panels) // cols)
    fig, axes = pyplot().subplots(rows, cols, figsize=(3.8 * cols, 3.3 * rows), dpi=110, squeeze=False)
    for ax, panel in zip(axes.flat, panels):
        xs = sorted({v for _, pts in panel.lines for v, _ in pts}, key=lambda v: setting_order(panel.x, v))
        # Steps on a number line as the paper draws them; effort levels evenly spaced, in level order.
        pos = {v: (v if panel.x == "max_steps" else i) for i, v in enumerate(xs)}
        for i, (name, pts) in enumerate(panel.lines):
            ax.plot([pos[v] for v, _ in pts], [100 * acc.value for _, acc in pts], "-o", color=f"C{i % 10}", label=name)
            ax.fill_between([pos[v] for v, _ in pts], [100 * acc.interval[0] for _, acc in pts], [100 * acc.interval[1] for _, acc in pts],
                            color=f"C{i % 10}", alpha=0.15, linewidth=0)
        ax.set(xticks=[pos[v] for v in xs], xticklabels=[str(v) for v in xs], ylabel="LLM-Acc (%)",
               xlabel=AXIS_LABELS[panel.x] + (f" (max steps {official_steps})" if panel.x == "reasoning_effort" else ""))
        ax.set_title(panel.title, fontsize=9)
        ax.grid(alpha=0.3)
        if len(panel.lines) > 1:  # beside the axes, never over a line
            ax.legend(fontsize=6, **BESIDE)
    for ax in axes.flat[len(panels):]:
        fig.delaxes(ax)
    fig.tight_layout()
    return fig


def paper_figure_section(con: duckdb.DuckDBPyConnection, shown_settings: list[str], out_dir, label=lambda m: m) -> tuple[str, list]:
    """The section for the paper's figure (report.paper_columns=true) and the PNG it wrote, if any."""
    from arag.agent.loop import AgentConfig

    official = AgentConfig().max_steps
    panels, notes = paper_figure_panels(con, shown_settings, label, official)
    out = [
        "## Test-time scaling as the paper draws it (Figure 4)",
        "",
        f"LLM-Acc against max steps ({PAPER_STEP_RANGE[0]}–{PAPER_STEP_RANGE[1]}) and against reasoning effort "
        f"({PAPER_EFFORT_LEVELS[0]}–{PAPER_EFFORT_LEVELS[-1]}, at the official {official} steps), one panel per backbone and dataset; "
        "the paper's panels: steps for GPT-5-mini and GPT-4o-mini, effort for GPT-5-mini and GPT-5, on MuSiQue-300. "
        "The band around a line and the brackets below: each point's 95% Wilson interval (n: the questions it averages over).",
        "",
    ]
    written = []
    if panels:
        written.append(save_figure(paper_figure(panels, official), out_dir / PAPER_FIGURE_FILE))
        for p in panels:
            for name, pts in p.lines:
                out.append(f"- {AXIS_LABELS[p.x]} · {p.title} · {name}: " + ", ".join(f"{v} {acc.text()}" for v, acc in pts))
        out += ["", f"![Test-time scaling, the paper's layout]({PAPER_FIGURE_FILE})", ""]
    else:
        out += ["No sweep series to draw (`+sweep=test_time_scaling_steps`, `+sweep=test_time_scaling_effort`).", ""]
    if notes:
        out += ["Left out of the figure:", "", *(f"- {n}" for n in notes), ""]
    return "\n".join(out), written


def draw_plots(con: duckdb.DuckDBPyConnection, out: Path) -> list[Path]:
    """The accuracy and tool-use plots this report draws, written to `out`; one it does not draw is removed."""
    for stale in (*(f"accuracy_vs_{x}.png" for x in SWEEPABLE), "tool_use.png"):
        (out / stale).unlink(missing_ok=True)
    plots = [save_figure(accuracy_figure(con, x), out / f"accuracy_vs_{x}.png") for x in SWEEPABLE if swept(con, x)]
    if con.execute("SELECT count(*) FILTER (tool_calls > 0) FROM episodes").fetchone()[0]:
        plots.append(save_figure(tool_use_figure(con), out / "tool_use.png"))
    return plots


def plots_section(names: Sequence[str]) -> str:
    """The plots drawn (a sweep plot only for a setting swept over at least MIN_PLOTTED_POINTS values)."""
    shown = [n for n in names if n != PAPER_FIGURE_FILE]  # shown in its own section
    out = ["## Plots", ""]
    out += [line for n in shown for line in (f"![{PLOT_TITLES.get(n, n)}]({n})", "")]
    if not any(n.startswith("accuracy_vs_") for n in shown):
        out += [f"No accuracy plot: no setting is swept over {MIN_PLOTTED_POINTS} or more values (the sweep tables above hold any shorter series).", ""]
    return "\n".join(out)
