"""The A-RAG paper's test-time-scaling figure (§5.1, Figure 4) from a results tree: one panel per
backbone and dataset, LLM-Acc only, max steps 5-20 and reasoning effort minimal-high at the official
step count (report.paper_columns=true). Checked on the matplotlib objects, not on pixels."""

from __future__ import annotations

from pathlib import Path

from arag.agent.loop import AgentConfig
from arag.report.build import build_report
from arag.report.episodes import connect, method_label, varying_settings
from arag.report.figures import paper_figure
from arag.report.sweeps import PAPER_FIGURE_FILE, paper_figure_panels
from tests.report.test_report_layouts import section, write_run

OFFICIAL = AgentConfig().max_steps
# LLM-Acc (correct answers of 10) per point; Cont-Acc is always 1 higher, so a plotted Cont-Acc shows.
STEPS = {"gpt-5-mini": {5: 4, 10: 5, 15: 6, 20: 7}, "gpt-4o-mini": {5: 3, 10: 3, 15: 4, 20: 4}}
EFFORT = {"gpt-5-mini": {"minimal": 2, "low": 4, "high": 8}, "gpt-4o-mini": {"minimal": 1, "low": 2, "high": 5}}


def results_tree(results: Path) -> None:
    """Two backbones, each with the steps sweep (at effort medium) and the effort sweep (at the
    official step count) on MuSiQue; one more steps sweep on 2Wiki (with a step limit outside the
    paper's range), and a third model's effort sweep at another step count."""
    for model in STEPS:
        for steps, good in STEPS[model].items():
            write_run(results, f"{model}-s{steps}", "arag_full", good, contained=good + 1, max_steps=steps, model=model, dataset="musique")
        for effort, good in EFFORT[model].items():
            write_run(results, f"{model}-{effort}", "arag_full", good, contained=good + 1, max_steps=OFFICIAL, effort=effort, model=model, dataset="musique")
    for steps, good in ((5, 5), (10, 6), (25, 9)):
        write_run(results, f"2wiki-s{steps}", "arag_full", good, max_steps=steps, dataset="2wikimultihopqa")
    for effort, good in (("low", 3), ("high", 6)):
        write_run(results, f"gpt-5-{effort}", "arag_full", good, max_steps=10, effort=effort, model="gpt-5", dataset="musique")


def test_one_panel_per_backbone_and_dataset_with_llm_acc_only(tmp_path):
    results = tmp_path / "results"
    results_tree(results)
    con = connect(results)
    panels, notes = paper_figure_panels(con, varying_settings(con), method_label, OFFICIAL)
    fig = paper_figure(panels, OFFICIAL)
    axes = fig.axes
    # 2 backbones x MuSiQue x (steps, effort) + gpt-5-mini's 2Wiki steps panel; gpt-5's effort runs
    # at 10 steps are no panel of the paper's figure.
    assert [(ax.get_title(), ax.get_xlabel()) for ax in axes] == [
        ("gpt-4o-mini · musique", "max steps"),
        ("gpt-5-mini · 2wikimultihopqa", "max steps"),
        ("gpt-5-mini · musique", "max steps"),
        ("gpt-4o-mini · musique", f"reasoning effort (max steps {OFFICIAL})"),
        ("gpt-5-mini · musique", f"reasoning effort (max steps {OFFICIAL})"),
    ]
    assert all(ax.get_ylabel() == "LLM-Acc (%)" and len(ax.get_lines()) == 1 for ax in axes)
    by_title = {(ax.get_title(), ax.get_xlabel()): ax.get_lines()[0] for ax in axes}
    for model in STEPS:
        steps = by_title[(f"{model} · musique", "max steps")]
        assert list(steps.get_xdata()) == [5, 10, 15, 20]
        assert list(steps.get_ydata()) == [10.0 * g for g in STEPS[model].values()]  # LLM-Acc, not Cont-Acc
        effort = by_title[(f"{model} · musique", f"reasoning effort (max steps {OFFICIAL})")]
        # minimal..high in level order; medium is the steps sweep's run at the official step count
        levels = {**EFFORT[model], "medium": STEPS[model][OFFICIAL]}
        assert list(effort.get_ydata()) == [10.0 * levels[e] for e in ("minimal", "low", "medium", "high")]
    effort_axes = axes[3]
    assert [t.get_text() for t in effort_axes.get_xticklabels()] == ["minimal", "low", "medium", "high"]
    assert list(by_title[("gpt-5-mini · 2wikimultihopqa", "max steps")].get_xdata()) == [5, 10]  # 25 is past the paper's 20
    assert any(n.startswith("gpt-5-mini · 2wikimultihopqa · A-RAG (Full)") and "max_steps=25 (outside the paper's range" in n for n in notes)
    assert any(n.startswith("gpt-5 · musique · A-RAG (Full)") and f"max_steps=10, not the official {OFFICIAL}" in n for n in notes)


def test_the_report_draws_the_figure_only_with_paper_columns(tmp_path):
    results = tmp_path / "results"
    results_tree(results)
    plain = build_report(results, tmp_path / "plain")
    assert not (tmp_path / "plain" / PAPER_FIGURE_FILE).exists() and "Figure 4" not in plain.markdown
    report = build_report(results, tmp_path / "paper", paper_columns=True)
    assert tmp_path / "paper" / PAPER_FIGURE_FILE in report.plots and (tmp_path / "paper" / PAPER_FIGURE_FILE).stat().st_size > 0
    text = section(report.markdown, "## Test-time scaling as the paper draws it (Figure 4)")
    assert ("- max steps · gpt-5-mini · musique · A-RAG (Full) · reasoning_effort=medium: 5 40.0 [16.8, 68.7] n=10, 10 50.0 [23.7, 76.3] n=10, "
            "15 60.0 [31.3, 83.2] n=10, 20 70.0 [39.7, 89.2] n=10") in text
    assert ("- reasoning effort · gpt-4o-mini · musique · A-RAG (Full): minimal 10.0 [1.8, 40.4] n=10, low 20.0 [5.7, 51.0] n=10, "
            "medium 40.0 [16.8, 68.7] n=10, high 50.0 [23.7, 76.3] n=10") in text
    assert f"![Test-time scaling, the paper's layout]({PAPER_FIGURE_FILE})" in text
    assert "Left out of the figure:" in text and f"\n- gpt-5 · musique · A-RAG (Full): reasoning effort swept at max_steps=10, not the official {OFFICIAL}\n" in text


def test_no_sweep_no_figure(tmp_path):
    results = tmp_path / "results"
    write_run(results, "one", "arag_full", 5, max_steps=OFFICIAL)
    report = build_report(results, paper_columns=True)
    assert not (results / "report" / PAPER_FIGURE_FILE).exists()
    assert "No sweep series to draw" in section(report.markdown, "## Test-time scaling as the paper draws it (Figure 4)")
