"""The report's paper layouts beyond the main table: Table 2 (ablations) and the test-time-scaling
sweeps (one setting varied at a time), from result rows written directly (no agent runs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arag.evaluation.rows import EpisodeRow
from arag.report.build import build_report
from arag.report.format import UnlikeRunsError
from arag.evaluation.results import RunStore
from tests.support.report_tables import report_tables, table


def write_run(results: Path, run_id: str, method: str, good: int, *, dataset: str = "2wikimultihopqa", max_steps: int = 10,
              effort: str | None = "medium", index: str = "fingerprint-1", token_budget: int = 128000, n: int = 10, model: str = "gpt-5-mini", contained: int | None = None) -> None:
    """n questions, the first `good` correct (both accuracies, or the first `contained` for
    Cont-Acc); identity settings as the runner stores them."""
    settings = json.dumps({"agent": {"max_steps": max_steps, "token_budget": token_budget}, "model": {"reasoning_effort": effort},
                           "judge": {"name": "paper"}, "index": index, "method": {"name": method}, "dataset": dataset}, sort_keys=True)
    rows = [
        EpisodeRow(
            run_id=run_id, dataset=dataset, question_id=f"q{i}", question="?", gold_answers=["a"], supporting_titles=["T"], method=method,
            model=model, backend="openai", status="ok", prediction="a", max_steps=max_steps, reasoning_effort=effort, token_budget=token_budget,
            settings=settings, contain_acc=float(i < (good if contained is None else contained)), llm_acc=float(i < good), judge_status="correct", prompt_tokens=100 * max_steps,
            completion_tokens=10, reasoning_tokens=5, retrieved_tokens=50 * max_steps, steps=max_steps // 2, model_calls=max_steps // 2, wall_s=1.0,
            tool_calls=max_steps // 2, calls={"keyword_search": max_steps // 2},
        ).to_record()
        for i in range(n)
    ]
    with RunStore(results, run_id) as store:
        store.write(rows)


def section(text: str, title: str) -> str:
    return text.split(title)[1].split("\n## ")[0]


def values(rows: list[list[str]]) -> list[list[str]]:
    """The rows with each accuracy cell's interval and n taken off ("80.0 [49.0, 94.3] n=10" → "80.0")."""
    return [[c.split(" [")[0] for c in r] for r in rows]


def table_rows(text: str) -> list[list[str]]:
    return [line.strip("| ").split(" | ") for line in text.splitlines() if line.startswith("| ") and not line.startswith("| ---")]


def test_table2_layout_rows_are_the_ablations_in_the_papers_order(tmp_path):
    results = tmp_path / "results"
    for k, (method, good) in enumerate([("arag_full", 8), ("arag_no_keyword", 6), ("arag_no_chunk_read", 4), ("arag_naive", 5)]):
        write_run(results, f"r{k}", method, good)
        write_run(results, f"g{k}", method, good - 1, dataset="graphrag-bench-medical")
    plain = table_rows(section(build_report(results, tmp_path / "plain").markdown, "## Ablations (Table 2 layout): A-RAG (Full) without one tool"))
    header, *rows = plain
    assert header == ["Method", "2wikimultihopqa LLM-Acc", "2wikimultihopqa Cont-Acc", "graphrag-bench-medical LLM-Acc"]
    assert rows[0][1] == "80.0 [49.0, 94.3] n=10"  # every accuracy with its 95% interval and n
    # Fixed rows in the paper's order; the semantic ablation was not run ("–"); A-RAG (Naive) is no ablation.
    assert values(rows) == [
        ["A-RAG (Full)", "80.0", "80.0", "70.0"],
        ["w/o keyword_search", "60.0", "60.0", "50.0"],
        ["w/o semantic_search", "–", "–", "–"],
        ["w/o chunk_read", "40.0", "40.0", "30.0"],
    ]
    # With paper_columns, the paper's Table 2 (GPT-5-mini) beside ours, a published value also for
    # the variant we did not run.
    text = build_report(results, paper_columns=True).markdown
    table2 = section(text, "## Ablations (Table 2 layout): A-RAG (Full) without one tool")
    assert "published numbers for gpt-5-mini" in table2 and "Table 2" in table2
    header, *rows = table_rows(table2)
    assert header == ["Method", "2wikimultihopqa LLM-Acc (of completed)", "(of answered)", "(paper)", "2wikimultihopqa Cont-Acc (of completed)", "(of answered)", "(paper)",
                      "graphrag-bench-medical LLM-Acc (of completed)", "(of answered)", "(paper)"]
    assert values(rows) == [
        ["A-RAG (Full)", "80.0", "80.0", "89.7", "80.0", "80.0", "88.9", "70.0", "70.0", "93.1"],
        ["w/o keyword_search", "60.0", "60.0", "88.9", "60.0", "60.0", "88.1", "50.0", "50.0", "93.2"],
        ["w/o semantic_search", "–", "–", "89.1", "–", "–", "88.0", "–", "–", "92.1"],
        ["w/o chunk_read", "40.0", "40.0", "89.0", "40.0", "40.0", "87.9", "30.0", "30.0", "93.3"],
    ]
    # The main table keeps the paper's Table 1 numbers beside ours and leaves the ablations out.
    main = section(text, "## Main results")
    assert ["A-RAG (Full)", "80.0", "80.0", "89.7", "80.0", "80.0", "88.9", "70.0", "70.0", "93.1"] in values(table_rows(main)) and "w/o" not in main


def one_at_a_time(results: Path) -> None:
    """The paper's design: steps 5..20 at effort medium, effort minimal..high at 10 steps (shared run: 10/medium)."""
    for steps, good in ((5, 4), (10, 6), (15, 7), (20, 8)):
        write_run(results, f"steps{steps}", "arag_full", good, max_steps=steps)
    for effort, good in (("minimal", 3), ("low", 5), ("high", 9)):
        write_run(results, f"effort-{effort}", "arag_full", good, effort=effort)


def test_sweep_report_shows_the_swept_setting_as_its_x_column(tmp_path):
    results = tmp_path / "results"
    one_at_a_time(results)
    text = build_report(results).markdown
    steps = section(text, "## Test-time scaling: accuracy and cost against max_steps")
    # One series: effort=medium (the effort runs at minimal/low/high have one step value each: no sweep).
    assert steps.count("**2wikimultihopqa · gpt-5-mini · A-RAG (Full)**") == 1 and "— reasoning_effort=medium" in steps
    steps_table = table(steps, "2wikimultihopqa · gpt-5-mini · A-RAG (Full)")
    assert steps_table.header[0] == "max_steps" and steps_table.constants["n"] == "10" and "n" not in steps_table.header  # the same at every point: stated once
    assert steps_table.column("max_steps") == ["5", "10", "15", "20"]
    assert steps_table.column("LLM-Acc") == ["40.0 [16.8, 68.7] n=10", "60.0 [31.3, 83.2] n=10", "70.0 [39.7, 89.2] n=10", "80.0 [49.0, 94.3] n=10"]
    assert steps_table.column("tokens / question") == ["510", "1,010", "1,510", "2,010"]
    assert steps_table.column("run") == ["steps5", "steps10", "steps15", "steps20"]
    effort = section(text, "## Test-time scaling: accuracy and cost against reasoning_effort")
    effort_table = report_tables(effort)[0]
    assert effort_table.header[0] == "reasoning_effort" and "— max_steps=10" in effort
    assert [(r["reasoning_effort"], r["LLM-Acc"].split(" [")[0]) for r in effort_table.records] == [("minimal", "30.0"), ("low", "50.0"), ("medium", "60.0"), ("high", "90.0")]  # by level


def test_sweep_report_refuses_a_second_differing_setting(tmp_path):
    """Two runs of one series that also differ in an identity setting the report does not show (here the index) are refused."""
    results = tmp_path / "results"
    write_run(results, "s5", "arag_full", 4, max_steps=5)
    write_run(results, "s10", "arag_full", 6, max_steps=10, index="fingerprint-2")
    with pytest.raises(UnlikeRunsError, match=r"sweep over max_steps may only vary max_steps, but runs s5 \(max_steps=5\) and s10 \(max_steps=10\) also differ in: index"):
        build_report(results)
    assert not list((results / "report").glob("*")), "a refused report writes no file"
    # Picking one index's runs makes it a plain report again.
    assert build_report(results, tmp_path / "one", where="run_id = 's5'").rows == 10


def test_a_second_shown_setting_splits_the_series_instead_of_merging(tmp_path):
    """Runs differing in max_steps and token_budget are no sweep over max_steps: each is a series of one point."""
    results = tmp_path / "results"
    write_run(results, "a", "arag_full", 4, max_steps=5, token_budget=4000)
    write_run(results, "b", "arag_full", 6, max_steps=10, token_budget=8000)
    text = build_report(results).markdown
    assert "No runs that differ only in `max_steps`" in section(text, "## Test-time scaling: accuracy and cost against max_steps")


def test_tool_use_is_shown_per_setting_value_not_averaged_over_runs(tmp_path):
    """Two arag_full runs at max_steps 5 and 10 (steps // 2 tool calls each, here 2 and 5) are two
    series in the tool-use plot's data, labelled by the setting, with their own histograms."""
    from arag.report.episodes import connect, tool_columns
    from arag.report.figures import tool_use_series

    results = tmp_path / "results"
    write_run(results, "s5", "arag_full", 4, max_steps=5)
    write_run(results, "s10", "arag_full", 6, max_steps=10)
    write_run(results, "s20", "arag_full", 7, max_steps=20)
    con = connect(results)
    series = tool_use_series(con)
    # In the setting's order (5 before 10 and 20), not as text ("10" < "20" < "5").
    assert [label for label, _, _ in series] == ["A-RAG (Full) · max_steps=5", "A-RAG (Full) · max_steps=10", "A-RAG (Full) · max_steps=20"]
    assert [means[tool_columns(con).index("keyword_search")] for _, means, _ in series] == [2.0, 5.0, 10.0]
    assert [hist for _, _, hist in series] == [[(2, 10)], [(5, 10)], [(10, 10)]]
    # The tool table lists the same cells in the same order.
    calls = table(build_report(results).markdown, "Calls per tool", section="Tool use")
    assert [(r["method"], r["max steps"]) for r in calls.records] == [("A-RAG (Full)", "5"), ("A-RAG (Full)", "10"), ("A-RAG (Full)", "20")]


def test_accuracy_plot_keeps_unset_effort_apart_from_effort_none_and_orders_by_level(tmp_path):
    """The accuracy-vs-effort plot's x axis: a run that sets no effort is "unset", never merged with
    an effort of "none"; the levels follow their order (none < low < high), not the text's."""
    from arag.report.episodes import connect
    from arag.report.figures import accuracy_lines

    results = tmp_path / "results"
    for run_id, effort, good in (("unset", None, 2), ("none", "none", 4), ("high", "high", 9), ("low", "low", 6)):
        write_run(results, run_id, "arag_full", good, effort=effort)
    xs, lines = accuracy_lines(connect(results), "reasoning_effort")
    assert xs == ["unset", "none", "low", "high"]
    [(label, points)] = lines
    assert label == "A-RAG (Full) · max_steps=10"
    assert [(x, cont.value, cont.n) for x, cont, _ in points] == [("unset", 0.2, 10), ("none", 0.4, 10), ("low", 0.6, 10), ("high", 0.9, 10)]
    steps_xs, _ = accuracy_lines(connect(results), "max_steps")
    assert steps_xs == ["10"]
