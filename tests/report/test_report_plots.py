"""The report's PNG plots read at a glance: drawn only for what varies (a sweep plot for a series of
at least 3 values), every legend beside its axes (never over them), every title within the figure,
the image of a bounded size; checked on the figures and on the files."""

from __future__ import annotations

import struct

import pytest

from arag.report.build import build_report
from arag.report.episodes import connect, method_label, varying_settings
from arag.report.figures import MIN_PLOTTED_POINTS, accuracy_figure, paper_figure, tool_use_figure
from arag.report.sweeps import paper_figure_panels
from tests.report.test_report_layouts import write_run

# The largest image a report plot may be (pixels): a page's width, a little over a screen's height.
MAX_PNG = (2000, 1600)


def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def layout_problems(fig) -> list[str]:
    """Legends over any axes, titles wider than the figure or outside it."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    width = fig.bbox.width
    problems = []
    axes = [(ax, ax.get_window_extent(renderer)) for ax in fig.axes]
    for ax, _ in axes:
        legend = ax.get_legend()
        if legend is not None:
            box = legend.get_window_extent(renderer)
            problems += [f"the legend of '{ax.get_title()}' covers the axes '{other.get_title()}'" for other, frame in axes if box.overlaps(frame)]
        title = ax.title.get_window_extent(renderer)
        if ax.get_title() and (title.width > width or title.x0 < 0 or title.x1 > width):
            problems.append(f"the title '{ax.get_title()}' does not fit the figure ({title.width:.0f} of {width:.0f} px)")
    return problems


@pytest.fixture
def swept(tmp_path):
    """A-RAG (Full) over max steps 5, 10, 15, 20 and A-RAG (Naive) at 10 and 20: long labels, many lines."""
    results = tmp_path / "results"
    for steps, good in ((5, 3), (10, 5), (15, 6), (20, 7)):
        write_run(results, f"full{steps}", "arag_full", good, max_steps=steps)
    for steps, good in ((10, 4), (20, 5)):
        write_run(results, f"naive{steps}", "arag_naive", good, max_steps=steps)
    return results


def test_the_plots_keep_legends_beside_the_axes_and_titles_inside(swept):
    con = connect(swept)
    figures = {"accuracy": accuracy_figure(con, "max_steps"), "tool use": tool_use_figure(con)}
    panels, _ = paper_figure_panels(con, varying_settings(con), method_label, official_steps=15)
    figures["paper"] = paper_figure(panels, 15)
    for name, fig in figures.items():
        assert not layout_problems(fig), f"{name}: {layout_problems(fig)}"


def test_the_written_pngs_are_of_bounded_size_and_only_for_what_varies(swept, tmp_path):
    report = build_report(swept, tmp_path / "report", paper_columns=True)
    names = [p.name for p in report.plots]
    # max_steps is swept over 4 values; reasoning effort not at all: no plot against it.
    assert names == ["accuracy_vs_max_steps.png", "tool_use.png", "test_time_scaling.png"]
    for path in report.plots:
        width, height = png_size(path)
        assert width <= MAX_PNG[0] and height <= MAX_PNG[1], f"{path.name}: {width}x{height}"
        assert f"]({path.name})" in report.markdown


def test_no_sweep_plot_without_a_sweep_of_three_values(tmp_path):
    results = tmp_path / "results"
    write_run(results, "a", "arag_full", 5, max_steps=10)
    write_run(results, "b", "arag_full", 6, max_steps=20)  # two values: the sweep table shows them, no plot
    report = build_report(results, tmp_path / "report")
    assert [p.name for p in report.plots] == ["tool_use.png"] and MIN_PLOTTED_POINTS == 3
    assert f"No accuracy plot: no setting is swept over {MIN_PLOTTED_POINTS} or more values" in report.markdown
    assert not list((tmp_path / "report").glob("accuracy_vs_*.png"))


def test_the_old_layout_would_fail_the_checks():
    """The check sees a legend drawn over the axes and a title wider than its figure."""
    from arag.report.format import pyplot

    fig, ax = pyplot().subplots(figsize=(4, 3))
    ax.plot([0, 1], [0, 1], label="a line")
    ax.legend(loc="center")
    ax.set_title("Accuracy vs max steps (Cont-Acc solid, LLM-Acc dashed; bars: 95% Wilson intervals), far too long")
    assert len(layout_problems(fig)) == 2
    pyplot().close(fig)
