"""Failed episodes in the report: counted with their cause beside the accuracies, never scored; a run
whose episodes all failed shows its failure count and cause, not a score (rows written directly)."""

from __future__ import annotations

from pathlib import Path

from arag.evaluation.results import RunStore
from arag.evaluation.rows import EpisodeRow
from arag.report.build import build_report
from arag.report.intervals import cell, failures_text
from tests.support.report_tables import table

UNREACHABLE = "model call failed after 4 attempt(s): ConnectError: All connection attempts failed"
TIMEOUT = "episode timed out after 600s"


def write_run(root: Path, run_id: str, method: str, outcomes: list[str | None], max_steps: int = 10) -> None:
    """One run of `method`, a question per outcome: None answered right, "wrong" answered wrong, else failed with that cause."""
    rows = []
    for i, outcome in enumerate(outcomes):
        failed = outcome not in (None, "wrong")
        right = float(outcome is None)
        rows.append(EpisodeRow(
            run_id=run_id, dataset="2wikimultihopqa", question_id=f"q{i}", question="?", gold_answers=["a"], supporting_titles=["T"],
            method=method, model="qwen", backend="openai", status="failed" if failed else "ok", prediction=None if failed else "a",
            failure=outcome if failed else None, max_steps=max_steps, contain_acc=0.0 if failed else right, exact_match=0.0 if failed else right,
            f1=0.0 if failed else right, llm_acc=0.0 if failed else right, judge_status="no_answer" if failed else "correct",
        ).to_record())  # fmt: skip
    with RunStore(root, run_id) as store:
        store.write(rows)


def test_an_all_failed_run_shows_its_failures_and_a_partly_failed_one_scores_only_its_completed_episodes(tmp_path):
    results = tmp_path / "results"
    write_run(results, "full", "arag_full", [None, None, "wrong", UNREACHABLE])
    write_run(results, "naive", "naive_rag", [UNREACHABLE, UNREACHABLE, TIMEOUT])
    text = build_report(results).path.read_text()
    main = table(text, "", section="Main results")
    # 2 right of the 3 completed; the outage beside it, not a 0 in it.
    assert main.row(Method="A-RAG (Full)")["2wikimultihopqa LLM-Acc"] == "66.7 [20.8, 93.9] n=3 · 1 failed (model call failed after 4 attempt(s))"
    # Nothing completed: the failures and their most frequent cause, no accuracy (formerly "0.0 [0.0, 56.1] n=3").
    assert main.row(Method="Naive RAG")["2wikimultihopqa LLM-Acc"] == "3 failed (model call failed after 4 attempt(s); +1 other cause)"
    assert main.row(Method="Naive RAG")["2wikimultihopqa Cont-Acc"] == "3 failed (model call failed after 4 attempt(s); +1 other cause)"
    details = table(text, "Questions and accuracy over the attempted ones")
    naive = details.row(method="Naive RAG")
    # The details name the failures in their own column: no accuracy beside them where none completed.
    assert [naive["answered"], naive["failed"], naive["LLM-Acc (of completed)"]] == ["0", "3 (model call failed after 4 attempt(s); +1 other cause)", "–"]
    assert details.row(method="A-RAG (Full)")["failed"] == "1 (model call failed after 4 attempt(s))"
    # An all-failed run has no scored question, so no paired comparison stands on it.
    assert "| A-RAG (Full) | Naive RAG |" not in text


def test_an_accuracy_cell_names_failures_beside_the_score_and_alone_without_one():
    assert cell(2, 3) == "66.7 [20.8, 93.9] n=3"
    assert cell(2, 3, 1, ["worker error"]) == "66.7 [20.8, 93.9] n=3 · 1 failed (worker error)"
    assert cell(None, 0, 2, ["worker error", "worker error"]) == "2 failed (worker error)"
    assert cell(None, 0) == "–"
    assert failures_text(4, ["a", "b", "b", "c"]) == "4 failed (b; +2 other causes)"
    assert failures_text(0, []) == ""


def test_a_sweep_point_whose_episodes_failed_shows_its_failures_not_a_score(tmp_path):
    results = tmp_path / "results"
    for steps, outcomes in ((5, [TIMEOUT, TIMEOUT]), (10, [None, "wrong"])):
        write_run(results, f"steps{steps}", "arag_full", outcomes, max_steps=steps)
    text = build_report(results).path.read_text()
    sweep = table(text, "", section="Test-time scaling: accuracy and cost against max_steps")
    assert [sweep.row(max_steps=x)["LLM-Acc"] for x in ("5", "10")] == ["2 failed (episode timed out after 600s)", "50.0 [9.5, 90.5] n=2"]
