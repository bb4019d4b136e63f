"""Paired comparisons across methods (arag.report.paired): the A-RAG paper's Table 1 and Table 2
comparisons read from conf/paper_results, runs paired only where they differ in the method alone, on
the questions both scored; the committed 2Wiki runs' method pairs recomputed from their rows; and the
report and the viewer listing the same pairs in the same A/B order with the same Δ."""

from __future__ import annotations

import math
from pathlib import Path

import duckdb
import pytest

from arag.report.build import build_report
from arag.report.episodes import connect, method_label, varying_settings
from arag.report.intervals import DIFFERS, WITHIN_NOISE, bootstrap_interval
from arag.report.paired import TITLE, MethodComparison, paired_section, paper_comparisons
from arag.report.paper import PaperResults
from tests.report.test_report_layouts import write_run
from tests.support.paired_tables import report_pairs, viewer_pairs
from tests.support.report_tables import report_tables

COMMITTED = Path(__file__).resolve().parents[2] / "benchmarks" / "cpu_evaluations" / "results"
# The committed 2Wiki runs (benchmarks/cpu_evaluations/README.md): 50 questions each, commit a058428.
TWO_WIKI = {"direct": "d4e009c2a2181ea9", "naive_rag": "49c46007ad6cf270", "arag_full": "063553b6ed351115", "arag_naive": "50522084c0aceef9"}


def test_the_paper_comparisons_are_its_table_1_and_table_2():
    assert paper_comparisons() == (
        MethodComparison("arag_full", "arag_naive", "Table 1"),
        MethodComparison("arag_full", "naive_rag", "Table 1"),
        MethodComparison("arag_full", "direct", "Table 1"),
        MethodComparison("arag_naive", "naive_rag", "Table 1"),
        MethodComparison("arag_naive", "direct", "Table 1"),
        MethodComparison("arag_full", "arag_no_keyword", "Table 2"),
        MethodComparison("arag_full", "arag_no_semantic", "Table 2"),
        MethodComparison("arag_full", "arag_no_chunk_read", "Table 2"),
    )


def test_a_paper_table_naming_an_unconfigured_method_is_refused(monkeypatch):
    table = PaperResults("test", {"gpt-5-mini": {"direct": {}, "hipporag": {}, "arag_full": {}}})
    monkeypatch.setattr(PaperResults, "load", classmethod(lambda cls, path=None, table_=None, **kw: table))
    paper_comparisons.cache_clear()
    try:
        with pytest.raises(ValueError, match=r"^conf/paper_results/a_rag_table1\.yaml: method 'hipporag' has no config in conf/method"):
            paper_comparisons()
    finally:
        paper_comparisons.cache_clear()


def report_section(results: Path) -> str:
    """The report's paired section over a results tree, as build_report writes it (without its other sections and plots)."""
    con = connect(results)
    return paired_section(con, varying_settings(con), method_label)


def section_tables(markdown: str) -> list:
    return report_tables(TITLE + markdown.split(TITLE, 1)[1].split("\n## ", 1)[0])


def test_runs_are_paired_across_methods_only_where_they_differ_in_the_method(tmp_path):
    """At 10 steps: A-RAG (Full) 8 of 10, A-RAG (Naive) 5 of its 8 questions, Naive RAG 4, Direct 2,
    w/o keyword_search 6. A-RAG (Full) at 20 steps has no baseline there (paired only with itself at 10);
    w/o semantic_search of another model has no A-RAG (Full) of its model: never paired."""
    results = tmp_path / "results"
    for run_id, method, good, kw in [("full10", "arag_full", 8, {}), ("naive10", "arag_naive", 5, {"n": 8}), ("rag10", "naive_rag", 4, {}),
                                      ("direct10", "direct", 2, {}), ("nokw10", "arag_no_keyword", 6, {}), ("full20", "arag_full", 9, {"max_steps": 20}),
                                      ("nosem-other", "arag_no_semantic", 1, {"model": "other-model"})]:
        write_run(results, run_id, method, good, **kw)
    text = build_report(results, tmp_path / "report").markdown
    assert [t.title for t in section_tables(text)] == [
        "A-RAG against the baselines and A-RAG (Full) against A-RAG (Naive), as the paper's Table 1: 2wikimultihopqa · gpt-5-mini · max_steps=10",
        "A-RAG (Full) against each ablation, as the paper's Table 2: 2wikimultihopqa · gpt-5-mini · max_steps=10",
        "Within one method: runs that differ in one shown setting, or its only two runs",
    ]
    table1 = section_tables(text)[0]
    assert [(r["A"], r["B"], r["differs in"]) for r in table1.records][::2] == [
        ("A-RAG (Full)", "A-RAG (Naive)", "method"), ("A-RAG (Full)", "Naive RAG", "method"), ("A-RAG (Full)", "Direct answer", "method"),
        ("A-RAG (Naive)", "Naive RAG", "method"), ("A-RAG (Naive)", "Direct answer", "method")]
    llm = {k[:2]: v for k, v in report_pairs(text).items() if k[2] == "LLM-Acc"}

    def interval(a_only: int, b_only: int, n: int) -> str:
        low, high = bootstrap_interval([1.0] * a_only + [-1.0] * b_only + [0.0] * (n - a_only - b_only))
        return f"[{100 * low:+.1f}, {100 * high:+.1f}]"

    # (n, A %, B %, Δ (A − B), right only in A / B, p): A-RAG (Naive) answered q0..q7, so its pairs count 8.
    expected = {
        ("full10", "naive10"): ("8", "100.0", "62.5", "+37.5", interval(3, 0, 8), "3 / 0", "0.250"),
        ("full10", "rag10"): ("10", "80.0", "40.0", "+40.0", interval(4, 0, 10), "4 / 0", "0.125"),
        ("full10", "direct10"): ("10", "80.0", "20.0", "+60.0", interval(6, 0, 10), "6 / 0", "0.031"),
        ("naive10", "rag10"): ("8", "62.5", "50.0", "+12.5", interval(1, 0, 8), "1 / 0", "1.000"),
        ("naive10", "direct10"): ("8", "62.5", "25.0", "+37.5", interval(3, 0, 8), "3 / 0", "0.250"),
        ("full10", "nokw10"): ("10", "80.0", "60.0", "+20.0", interval(2, 0, 10), "2 / 0", "0.500"),
        ("full10", "full20"): ("10", "80.0", "90.0", "-10.0", interval(0, 1, 10), "0 / 1", "1.000"),
    }
    assert {k: v[:-1] for k, v in llm.items()} == expected
    assert llm[("full10", "direct10")][-1] == DIFFERS and interval(6, 0, 10).startswith("[+")  # p < 0.05 and an interval above 0
    assert llm[("full10", "rag10")][-1] == WITHIN_NOISE


def committed_scores() -> dict[tuple[str, str], dict[str, float]]:
    """{(run id, column): {question id: score}} of the committed 2Wiki rows, each scored question with a score."""
    rows = duckdb.sql(f"SELECT run_id, question_id, judge_status, llm_acc, contain_acc FROM read_parquet('{COMMITTED / '2wiki'}/*/*/*.parquet', union_by_name = true)").fetchall()
    out: dict[tuple[str, str], dict[str, float]] = {}
    for run_id, question_id, judge_status, *values in rows:
        for column, value in zip(("llm_acc", "contain_acc"), values):
            if judge_status != "failed" and value is not None:
                out.setdefault((run_id, column), {})[question_id] = value
    return out


def test_the_committed_2wiki_runs_are_paired_by_method():
    """Direct, Naive RAG, A-RAG (Naive) and A-RAG (Full) on the same 50 2Wiki questions: Table 1's five
    comparisons, each accuracy's numbers recomputed here from the rows."""
    found = report_pairs(report_section(COMMITTED / "2wiki"))
    expected_pairs = [("arag_full", "arag_naive"), ("arag_full", "naive_rag"), ("arag_full", "direct"), ("arag_naive", "naive_rag"), ("arag_naive", "direct")]
    assert list(found) == [(TWO_WIKI[a], TWO_WIKI[b], metric) for a, b in expected_pairs for metric in ("LLM-Acc", "Cont-Acc")]
    by_run = committed_scores()
    for (run_a, run_b, metric), cells in found.items():
        column = {"LLM-Acc": "llm_acc", "Cont-Acc": "contain_acc"}[metric]
        a_scores, b_scores = by_run[(run_a, column)], by_run[(run_b, column)]
        scores = [(a_scores[q], b_scores[q]) for q in sorted(a_scores.keys() & b_scores.keys())]
        n = len(scores)
        a_only, b_only = sum(x > y for x, y in scores), sum(y > x for x, y in scores)
        k = min(a_only, b_only)
        p = min(1.0, 2 * sum(math.comb(a_only + b_only, i) for i in range(k + 1)) / 2 ** (a_only + b_only))
        a, b = 100 * sum(x for x, _ in scores) / n, 100 * sum(y for _, y in scores) / n
        assert cells[:3] == (str(n), f"{a:.1f}", f"{b:.1f}") and n == 50
        assert cells[3] == f"{a - b:+.1f}" and cells[5:7] == (f"{a_only} / {b_only}", f"{p:.3f}")
    # A-RAG (Full) 7 of 50 against Naive RAG 15 of 50: right only in one of them 1 against 9 questions.
    assert found[(TWO_WIKI["arag_full"], TWO_WIKI["naive_rag"], "LLM-Acc")] == ("50", "14.0", "30.0", "-16.0", "[-28.0, -4.0]", "1 / 9", "0.021", DIFFERS)


def test_the_report_and_the_viewer_list_the_same_pairs_in_one_order():
    """Over every committed run: each pair the same A and B, the same Δ (A − B), interval, p and verdict in
    both, exactly. A re-judged copy is B, after the run it re-judges, though both share their episodes'
    finish times: A-RAG (Full) on Novel reads Δ −10.0 in both (the viewer read +10.0 before)."""
    from starlette.testclient import TestClient

    from arag.viewer import create_app

    report = report_pairs(report_section(COMMITTED))
    with TestClient(create_app(COMMITTED)) as client:
        response = client.get("/paired")
    assert response.status_code == 200
    viewer = viewer_pairs(response.text)
    assert list(viewer) == list(report) and viewer == report
    assert len(report) == 20  # 2Wiki: Table 1's five pairs at 10 steps, Full against Naive at 15; four pairs within one method; two accuracies each
    rejudged = ("dbf1a07ee4f9177e", "c270c6a77fbba1b0", "LLM-Acc")
    assert report[rejudged] == ("20", "5.0", "15.0", "-10.0", "[-25.0, +0.0]", "0 / 2", "0.500", WITHIN_NOISE)
    assert (rejudged[1], rejudged[0], "LLM-Acc") not in report
