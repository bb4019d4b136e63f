"""pipelines.report: tables and plots from a results tree (rows written directly, no agent runs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from arag.evaluation.rows import EpisodeRow
from arag.report.build import build_report
from arag.report.format import markdown_table
from arag.evaluation.results import RunStore
from tests.support.report_tables import table

REPO = Path(__file__).resolve().parents[2]
METHODS = ("direct", "naive_rag", "arag_naive", "arag_full", "arag_no_keyword")
FAILURE = "model call failed after 4 attempt(s): ConnectError: All connection attempts failed"


def make_results(root: Path) -> None:
    """10 questions per run; runs over methods, and for arag_full also max_steps × reasoning effort."""
    runs = [(m, 10, "low") for m in METHODS] + [("arag_full", s, e) for s in (5, 20) for e in ("low", "high")]
    for k, (method, steps, effort) in enumerate(runs):
        run_id = f"run{k:02d}"
        good = {"direct": 2, "naive_rag": 4, "arag_naive": 5, "arag_full": 6, "arag_no_keyword": 5}[method] + (steps == 20) + (effort == "high")
        rows = []
        for i in range(10):
            failed = i == 9 and method == "naive_rag"
            tools = {"keyword_search": 0, "semantic_search": 0, "naive_embedding_search": 0, "chunk_read": 0}
            if method.startswith("arag"):
                tools.update(keyword_search=1 if method != "arag_no_keyword" else 0, semantic_search=i % 3, chunk_read=1 + i % 2)
            elif method == "naive_rag":
                tools["naive_embedding_search"] = 1
            rows.append(
                EpisodeRow(
                    run_id=run_id, dataset="2wikimultihopqa", question_id=f"q{i}", question="?", gold_answers=["a"], supporting_titles=["T"],
                    method=method, model="qwen", backend="llamacpp", status="failed" if failed else "ok", prediction=None if failed else "a",
                    failure=FAILURE if failed else None,
                    max_steps=steps, reasoning_effort=effort, contain_acc=float(i < good), exact_match=float(i < good - 1), f1=float(i < good),
                    llm_acc=None if i == 8 else float(i < good), judge_status="failed" if i == 8 else "correct",
                    evidence_recall_read=0.5, evidence_recall_seen=1.0, retrieved_tokens=100 * (k + 1), prompt_tokens=1000, completion_tokens=50,
                    steps=3, tool_calls=sum(tools.values()), calls=dict(tools), forced=i == 0, wall_s=1.5,
                ).to_record()
            )
        with RunStore(root, run_id) as store:
            store.write(rows)


def test_report_renders_tables_and_plots(tmp_path):
    results = tmp_path / "results"
    make_results(results)
    report = build_report(results)
    text = report.path.read_text()
    assert report.rows == 90 and report.path == results / "report" / "report.md"
    assert "## Main results" in text and "## Ablation" in text and "## Retrieved tokens" in text and "## Tool use" in text
    # Main table: one table, the settings that vary as columns before the method, the dataset's LLM-Acc and Cont-Acc as columns.
    main = text.split("## Main results")[1].split("## Ablation")[0]
    assert main.count("| max steps | reasoning effort | Method | 2wikimultihopqa LLM-Acc | 2wikimultihopqa Cont-Acc |") == 1 and "**model=" not in main
    assert "Model: qwen." in main
    assert "| 10 | low | A-RAG (Full) | 66.7 [35.4, 87.9] n=9 | 66.7 [35.4, 87.9] n=9 |" in text  # both over the same 9 questions: the judge failure is out of both
    # The failed episode is never scored: named beside both accuracies, over the 8 completed and judged questions.
    failed = "1 failed (model call failed after 4 attempt(s))"
    assert f"| 10 | low | Naive RAG | 50.0 [21.5, 78.5] n=8 · {failed} | 50.0 [21.5, 78.5] n=8 · {failed} |" in text
    # The details give both denominators: of the completed questions (the failed one apart, with its cause) and of the answered ones (as the paper's code).
    counted = table(text, "Questions and accuracy over the attempted ones")
    scored = table(text, "Accuracy over the answered ones")
    assert counted.header[-2:] == ["Cont-Acc (of completed)", "LLM-Acc (of completed)"] and "EM" in scored.header
    naive = counted.row(method="Naive RAG", max_steps="10", reasoning_effort="low")
    assert [naive[h] for h in ("answered", "failed", "forced", "judge failed", "Cont-Acc (of completed)", "LLM-Acc (of completed)")] == [
        "9", "1 (model call failed after 4 attempt(s))", "1", "1", "50.0 [21.5, 78.5] n=8", "50.0 [21.5, 78.5] n=8"]
    naive = scored.row(method="Naive RAG", max_steps="10", reasoning_effort="low")
    assert [naive["Cont-Acc (of answered)"], naive["LLM-Acc (of answered)"]] == ["50.0 [21.5, 78.5] n=8", "50.0 [21.5, 78.5] n=8"]
    # What is the same for every run is stated once above the table instead of in a column.
    assert counted.constants == {"dataset": "2wikimultihopqa", "model": "qwen", "runs": "1", "questions": "10", "forced": "1", "judge failed": "1"}
    assert "Same on every row: dataset: 2wikimultihopqa · model: qwen\n" in text and "| dataset |" not in text
    ablation = text.split("## Ablation")[1].split("\n## ")[0]
    assert "w/o keyword_search" in ablation and "Direct answer" not in ablation
    assert "Direct answer" in text.split("## Main results")[1].split("## Ablation")[0]
    assert "w/o keyword_search" not in text.split("## Main results")[1].split("## Ablation")[0]
    # Plots only for what varies: max_steps takes 3 values (5, 10, 20) in a series, reasoning effort 2 (low, high).
    assert [p.name for p in report.plots] == ["accuracy_vs_max_steps.png", "tool_use.png"]
    assert not (results / "report" / "accuracy_vs_reasoning_effort.png").exists() and "accuracy_vs_reasoning_effort.png" not in text
    for plot in ("accuracy_vs_max_steps.png", "tool_use.png"):
        data = (results / "report" / plot).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
        assert f"]({plot})" in text
    # The same numbers from a plain DuckDB query over the tree (the report's counting rule).
    ((acc,),) = duckdb.sql(f"select avg(contain_acc) from '{results}/**/*.parquet' where method = 'naive_rag'").fetchall()
    assert acc == pytest.approx(0.4)


def test_report_filter_and_errors(tmp_path):
    results = tmp_path / "results"
    make_results(results)
    only = build_report(results, tmp_path / "r2", where="method = 'direct'")
    assert only.rows == 10 and "No ablation runs" in only.markdown
    with pytest.raises(FileNotFoundError, match="no results folder"):
        build_report(tmp_path / "empty-does-not-exist")
    assert not (tmp_path / "empty-does-not-exist").exists()
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"no results \(\*\.parquet\)"):
        build_report(tmp_path / "empty")


def test_report_cli(tmp_path):
    results = tmp_path / "results"
    make_results(results)
    done = subprocess.run([sys.executable, "-m", "pipelines.report", f"results.path={results}", f"hydra.run.dir={tmp_path / 'h'}"], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "report: " in done.stdout and (results / "report" / "tool_use.png").exists()
    bad = subprocess.run([sys.executable, "-m", "pipelines.report", f"results.path={tmp_path / 'nothing'}", f"hydra.run.dir={tmp_path / 'h'}"], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert bad.returncode != 0 and "no results folder" in bad.stderr


def test_markdown_table():
    assert markdown_table(["a", "b"], [["x", "1"]]) == "| a | b |\n| --- | ---: |\n| x | 1 |"


def test_runs_differing_only_in_guard_rails_get_their_own_rows(tmp_path):
    """A guard rail (e.g. tool_steps=1) changes the method's behaviour: its run is a row of its own, the guard rails a column."""
    import json

    results = tmp_path / "results"
    for run_id, tool_steps, good in (("plain", 0, 3), ("railed", 1, 7)):
        settings = json.dumps({"agent": {"guard_rails": {"tool_steps": tool_steps, "require_read_before_answer": False}}})
        rows = [
            EpisodeRow(
                run_id=run_id, dataset="2wikimultihopqa", question_id=f"q{i}", question="?", gold_answers=["a"], supporting_titles=[],
                method="arag_full", model="qwen", backend="llamacpp", status="ok", prediction="a", max_steps=10,
                contain_acc=float(i < good), llm_acc=float(i < good), settings=settings,
            ).to_record()
            for i in range(10)
        ]
        with RunStore(results, run_id) as store:
            store.write(rows)
    text = build_report(results).path.read_text()
    main = text.split("## Main results")[1].split("## Ablation")[0]
    main = table(text, "Main results")
    assert main.header[0] == "guard rails" and main.constants == {"Method": "A-RAG (Full)"}  # one method: stated once above
    assert main.row(guard_rails="off")["2wikimultihopqa LLM-Acc"] == "30.0 [10.8, 60.3] n=10"
    assert main.row(guard_rails="tool_steps=1")["2wikimultihopqa Cont-Acc"] == "70.0 [39.7, 89.2] n=10"


def test_report_refuses_to_merge_unlike_runs(tmp_path):
    """Two runs of the same method, dataset, model and shown settings (e.g. two indexes) are never averaged."""
    from arag.report.format import UnlikeRunsError

    results = tmp_path / "results"
    for run_id, index in (("runA", "fingerprint-1"), ("runB", "fingerprint-2")):
        row = EpisodeRow(run_id=run_id, dataset="2wikimultihopqa", question_id="q0", question="?", gold_answers=["a"], supporting_titles=[],
                         method="arag_full", model="qwen", backend="llamacpp", status="ok", prediction="a", settings=f'{{"index": "{index}"}}').to_record()
        with RunStore(results, run_id) as store:
            store.write([row])
    with pytest.raises(UnlikeRunsError, match="runA, runB"):
        build_report(results)
    one = build_report(results, tmp_path / "one", where="run_id = 'runB'")
    assert one.rows == 1 and "runB" in one.markdown and "runA" not in one.markdown


def test_runs_that_differ_in_their_judge_get_a_judge_column(tmp_path):
    """A run and its re-judged copy share everything but the judge: every table shows both, apart
    (never averaged), named by the model that judged and the preset, never by a hash."""
    results = tmp_path / "results"
    judges = {"A": ('{"name": "paper"}', '"agent"', 0.0), "B": ('{"name": "strict"}', '{"model": "gpt-4o-mini"}', 1.0)}
    for key, (judge, judge_model, acc) in judges.items():
        for method in ("arag_full", "agenticrag"):
            row = EpisodeRow(run_id=f"{method}-{key}", dataset="2wikimultihopqa", question_id="q0", question="?", gold_answers=["a"], supporting_titles=[],
                             method=method, model="qwen", backend="llamacpp", status="ok", prediction="a", llm_acc=acc, judge_status="correct",
                             calls={"search": int(method == "agenticrag")}, settings=f'{{"judge": {judge}, "judge_model": {judge_model}}}').to_record()
            with RunStore(results, f"{method}-{key}") as store:
                store.write([row])
    text = build_report(results).markdown
    main = text.split("## Main results")[1].split("## Ablation")[0]
    assert main.count("| judge | Method |") == 1  # one table, the judge a column
    assert "| gpt-4o-mini (preset strict) | A-RAG (Full) | 100.0 [20.7, 100.0] n=1 |" in main and "| qwen (preset paper) | A-RAG (Full) | 0.0 [0.0, 79.3] n=1 |" in main
    agentic = table(text, "Accuracy and citations", section="AgenticRAG")
    assert [(r["judge"], r["LLM-Acc"]) for r in agentic.records if r["method"] == "AgenticRAG"] == [("gpt-4o-mini (preset strict)", "100.0 [20.7, 100.0] n=1"), ("qwen (preset paper)", "0.0 [0.0, 79.3] n=1")]
    tools = table(text, "Calls per tool", section="Tool use")
    assert len(tools.rows) == 4 and tools.row(method="AgenticRAG", judge="qwen (preset paper)")
    from arag.report.episodes import connect
    from arag.report.figures import accuracy_lines

    _, lines = accuracy_lines(connect(results), "max_steps")  # the plot's lines
    full = {label: pts for label, pts in lines if label.startswith("A-RAG (Full)")}
    assert {label.split(" · ")[-1]: pts[0][2].value for label, pts in full.items()} == {"judge=qwen (preset paper)": 0.0, "judge=gpt-4o-mini (preset strict)": 1.0}


def test_paper_layouts_main_columns_per_dataset_and_retrieved_tokens(tmp_path):
    """Table 1: LLM-Acc and Cont-Acc for 2Wiki, LLM-Acc alone for GraphRAG-Bench; Table 3: mean
    retrieved tokens per method and dataset."""
    results = tmp_path / "results"
    for k, (dataset, method, tokens) in enumerate([("2wikimultihopqa", "arag_full", 1000), ("2wikimultihopqa", "naive_rag", 5000),
                                                   ("graphrag-bench-medical", "arag_full", 3000), ("graphrag-bench-medical", "naive_rag", 5000)]):
        rows = [
            EpisodeRow(
                run_id=f"r{k}", dataset=dataset, question_id=f"q{i}", question="?", gold_answers=["a"], supporting_titles=["T"], method=method,
                model="qwen", backend="llamacpp", status="ok", prediction="a", max_steps=10, reasoning_effort="low", contain_acc=1.0,
                llm_acc=float(i < 2), judge_status="correct", retrieved_tokens=tokens + 100 * i, steps=1, tool_calls=1, wall_s=1.0,
            ).to_record()
            for i in range(4)
        ]
        with RunStore(results, f"r{k}") as store:
            store.write(rows)
    text = build_report(results).markdown
    main = text.split("## Main results")[1].split("## Ablation")[0]
    assert "| Method | 2wikimultihopqa LLM-Acc | 2wikimultihopqa Cont-Acc | graphrag-bench-medical LLM-Acc |" in main
    assert "| A-RAG (Full) | 50.0 [15.0, 85.0] n=4 | 100.0 [51.0, 100.0] n=4 | 50.0 [15.0, 85.0] n=4 |" in main
    tokens = text.split("## Retrieved tokens per question (Table 3 layout)")[1].split("## Retrieved tokens and cost")[0]
    assert "| Method | 2wikimultihopqa | graphrag-bench-medical |" in tokens
    assert "| Naive RAG | 5,150 | 5,150 |" in tokens and "| A-RAG (Full) | 1,150 | 3,150 |" in tokens


def test_paper_columns_show_the_published_numbers_for_the_same_backbone(tmp_path):
    from arag.report.paper import PaperResults

    results = tmp_path / "results"
    for k, (model, dataset) in enumerate([("gpt-5-mini-2025-08-07", "2wikimultihopqa"), ("gpt-5-mini-2025-08-07", "graphrag-bench-novel"), ("qwen", "2wikimultihopqa")]):
        rows = [
            EpisodeRow(
                run_id=f"r{k}", dataset=dataset, question_id=f"q{i}", question="?", gold_answers=["a"], supporting_titles=["T"], method="arag_full",
                model=model, backend="openai", status="ok", prediction="a", max_steps=10, reasoning_effort="low", contain_acc=float(i < 3),
                llm_acc=float(i < 2), judge_status="correct", retrieved_tokens=100, steps=1, tool_calls=1, wall_s=1.0,
            ).to_record()
            for i in range(4)
        ]
        with RunStore(results, f"r{k}") as store:
            store.write(rows)
    main = build_report(results, paper_columns=True).markdown.split("## Main results")[1].split("## Ablation")[0]
    # Beside the paper's numbers, ours over both denominators: the attempted questions and the answered ones (the paper code's).
    assert ("| Method | 2wikimultihopqa LLM-Acc (of completed) | (of answered) | (paper) | 2wikimultihopqa Cont-Acc (of completed) | (of answered) | (paper) "
            "| graphrag-bench-novel LLM-Acc (of completed) | (of answered) | (paper) |") in main
    half, three = "50.0 [15.0, 85.0] n=4", "75.0 [30.1, 95.4] n=4"
    assert f"| A-RAG (Full) | {half} | {half} | 89.7 | {three} | {three} | 88.9 | {half} | {half} | 85.3 |" in main  # the paper's GPT-5-mini row (abstract: 2Wiki 89.7)
    assert "published numbers for gpt-5-mini" in main and "arXiv 2602.03442" in main
    # Another backbone's block: the paper's rows under ours, labelled as reference, never refused.
    qwen = main.split("**model=qwen**")[1]
    assert "not of model qwen" in qwen and "| A-RAG (Full) — paper, GPT-5-mini (reference) | – | 89.7 | – | 88.9 | – | 85.3 |" in qwen
    assert "(paper)" not in build_report(results, tmp_path / "plain").markdown
    paper = PaperResults.load()
    assert paper.backbone("GPT-4o-mini") == "gpt-4o-mini" and paper.backbone("gpt-5-mini") == "gpt-5-mini" and paper.backbone("qwen2.5") is None
    assert paper.cell("gpt-5-mini", "arag_full", "hotpotqa", 0) == 94.5 and paper.cell("gpt-5-mini", "arag_full", "graphrag-bench-medical", 1) is None


def test_paper_columns_put_the_papers_table3_beside_our_retrieved_tokens(tmp_path):
    """Table 3 (GPT-5-mini only): its figure beside ours in a gpt-5-mini block; for another model,
    the published figures of the same methods and datasets as a table of their own."""
    from arag.report.paper import PaperTokens

    results = tmp_path / "results"
    runs = [("gpt-5-mini", "naive_rag", 5000), ("gpt-5-mini", "arag_full", 3000), ("qwen", "arag_full", 6000), ("qwen", "direct", 0)]
    for k, (model, method, tokens) in enumerate(runs):
        rows = [
            EpisodeRow(
                run_id=f"r{k}", dataset="2wikimultihopqa", question_id=f"q{i}", question="?", gold_answers=["a"], supporting_titles=["T"], method=method,
                model=model, backend="openai", status="ok", prediction="a", max_steps=10, reasoning_effort="low", contain_acc=1.0,
                llm_acc=1.0, judge_status="correct", retrieved_tokens=tokens, steps=1, tool_calls=1, wall_s=1.0,
            ).to_record()
            for i in range(2)
        ]
        with RunStore(results, f"r{k}") as store:
            store.write(rows)
    section = build_report(results, paper_columns=True).markdown.split("## Retrieved tokens per question (Table 3 layout)")[1].split("## Retrieved tokens and cost")[0]
    gpt5, qwen = section.split("**model=qwen**")
    assert "| Method | 2wikimultihopqa | (paper) |" in gpt5 and "published numbers for gpt-5-mini" in gpt5
    assert "| Naive RAG | 5,000 | 5,506 |" in gpt5 and "| A-RAG (Full) | 3,000 | 2,930 |" in gpt5
    ours, published = qwen.split("**The paper's Table 3**")
    assert "(paper)" not in ours and "| A-RAG (Full) | 6,000 |" in ours and "| Direct answer | 0 |" in ours
    # Only methods the paper's table has, in our datasets' columns: Direct answer is not in it.
    assert "with its backbone gpt-5-mini, not the model of the blocks above" in published
    assert "| Naive RAG | 5,506 |" in published and "| A-RAG (Full) | 2,930 |" in published and "Direct" not in published
    assert "(paper)" not in build_report(results, tmp_path / "plain").markdown and "The paper's Table 3" not in build_report(results, tmp_path / "plain2").markdown
    paper = PaperTokens.load()
    assert paper.cell("arag_naive", "2wikimultihopqa") == 45406 and paper.cell("direct", "2wikimultihopqa") is None and not paper.is_backbone("qwen2.5")


def test_a_paper_results_file_missing_a_field_names_the_file_and_the_field(tmp_path):
    from arag.report.paper import PaperResults, PaperTokens

    broken = tmp_path / "table3.yaml"
    broken.write_text("source: arXiv 2602.03442\nbackbone: gpt-5-mini\n")
    with pytest.raises(ValueError, match=r"table3\.yaml: missing field 'retrieved_tokens'"):
        PaperTokens.load(broken)
    broken.write_text("source: arXiv 2602.03442\nbackbones: [gpt-5-mini]\n")
    with pytest.raises(ValueError, match=r"table3\.yaml: field 'backbones' must be a dict, got list"):
        PaperResults.load(broken)
    broken.write_text("- just a list\n")
    with pytest.raises(ValueError, match=r"table3\.yaml: expected a mapping"):
        PaperTokens.load(broken)
