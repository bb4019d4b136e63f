"""The scored answer is taken from the final reply as each method's paper does: A-RAG's evaluation
code (scripts/eval.py, `calculate_contain(pred_answer, gold)` with pred_answer the agent's whole final
reply) scores the whole reply, cited chunk ids and all, and so do its Naive RAG and Direct baselines;
AgenticRAG's citations line ranks the cited documents and is no part of the answer. The prompt
variant is part of the run's identity."""

from __future__ import annotations

import dataclasses

import pytest

from arag.evaluation.questions import Question
from tests.evaluation.test_runner import run, settings

# The gold answer only on the reply's second line: a scorer that took the first line (or a span
# extracted from it) would miss it.
Q = Question("q0", "When did Lothair II's mother die?", ("20 March 851",), ("Lothair II", "Ermengarde of Tours"))
CITED_REPLY = "Lothair II's mother was Ermengarde of Tours [2#0].\nShe died on 20 March 851, as chunk 2#0 states."


@pytest.mark.parametrize("method", ["arag_full", "arag_naive", "direct"])
def test_contain_acc_and_the_judge_see_the_whole_final_reply(method, ctx):  # noqa: F811
    row = run(settings(method), [{"answer": CITED_REPLY}], ctx, question=Q)
    assert row.status == "ok" and row.prediction == CITED_REPLY
    assert row.contain_acc == 1.0 and row.exact_match == 0.0


def test_naive_rag_scores_its_whole_reply(ctx):  # noqa: F811
    row = run(settings("naive_rag"), [{"answer": CITED_REPLY}], ctx, question=Q)
    assert row.prediction == CITED_REPLY and row.contain_acc == 1.0


def test_agenticrag_scores_its_reply_less_the_citations_line(ctx):  # noqa: F811
    """The ids of the citations line (turn1search2) would put a numeric gold answer "2" in the reply."""
    numeric = Question("q9", "How many wives did Lothair II have?", ("2",), ("Lothair II",))
    row = run(settings("agenticrag"), [{"answer": "Three\nCitations: turn1search2 (0.9)"}], ctx, question=numeric)
    assert row.status == "ok" and row.prediction == "Three" and row.contain_acc == 0.0


def test_the_prompt_variant_changes_the_run_identity():
    paper = settings("arag_full")
    short = dataclasses.replace(paper, method={**paper.method, "prompt_variant": "short_answer"})
    assert paper.identity()["method"]["prompt_variant"] == "paper" and short.identity()["method"]["prompt_variant"] == "short_answer"
    assert paper.run_id != short.run_id
    assert paper.identity()["texts"]["method"]["system"] != short.identity()["texts"]["method"]["system"]
