"""The LLM judge: verdicts, failures recorded as failures (not as wrong), shortcuts."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest

from arag.evaluation import judge as J
from arag.evaluation.judge import Judge, JudgeConfig, parse_verdict
from arag.llm.scripted import ScriptedBackend
from arag.llm.types import LLMError

CONFIG = JudgeConfig(system_prompt="Grade.", user_template="Q: {question}\nGold: {gold}\nPred: {prediction}\nJSON {{\"verdict\": ...}}", attempts=2)


def run(judge, prediction="Ermengarde", golds=("Ermengarde of Tours",), exact=False):
    return asyncio.run(judge.judge("Who was the mother?", list(golds), prediction, exact=exact))


@pytest.mark.parametrize(
    "text, status",
    [
        ('{"verdict": "correct"}', J.CORRECT),
        ('{"verdict": "incorrect"}', J.INCORRECT),
        ('{"equivalent": true}', J.CORRECT),
        ("Yes, it matches.", J.CORRECT),
        ("incorrect", J.INCORRECT),
        ('{"verdict": "maybe"}', None),
        ("", None),
        ("[1, 2]", None),
    ],
)
def test_parse_verdict(text, status):
    assert parse_verdict(text) == status


def test_the_judge_asks_with_a_schema_and_the_config_prompt():
    backend = ScriptedBackend([{"verdict": "correct"}])
    v = run(Judge(backend, CONFIG), golds=["Ermengarde of Tours", "Ermengarde"])
    assert v.status == J.CORRECT and v.llm_acc == 1.0 and v.error is None
    req = backend.requests[0]
    assert req.response_schema == J.VERDICT_SCHEMA
    assert req.messages[0].content == "Grade." and "Gold: Ermengarde of Tours | Ermengarde" in req.messages[1].content
    assert 'JSON {"verdict": ...}' in req.messages[1].content
    assert run(Judge(ScriptedBackend([{"verdict": "incorrect"}]), CONFIG)).llm_acc == 0.0


def test_judge_failures_are_recorded_as_failures_not_as_wrong():
    v = run(Judge(ScriptedBackend([LLMError("down", retryable=False)]), CONFIG))
    assert v.status == J.VERDICT_FAILED and v.llm_acc is None and "down" in v.error
    v = run(Judge(ScriptedBackend(["gibberish", "more gibberish"]), CONFIG))
    assert v.status == J.VERDICT_FAILED and v.llm_acc is None and "unusable judge reply" in v.error and v.reply == "more gibberish"
    # A usable second reply after an unusable first one is a verdict.
    assert run(Judge(ScriptedBackend(["??", {"verdict": "correct"}]), CONFIG)).status == J.CORRECT


def test_shortcuts_no_answer_exact_match_and_disabled():
    backend = ScriptedBackend([])
    judge = Judge(backend, CONFIG)
    assert run(judge, prediction=None).status == J.NO_ANSWER and run(judge, prediction=None).llm_acc == 0.0
    assert run(judge, prediction="  ").status == J.NO_ANSWER
    assert run(judge, exact=True).status == J.EXACT_MATCH and run(judge, exact=True).llm_acc == 1.0
    off = Judge(backend, JudgeConfig(system_prompt="", user_template="", enabled=False))
    assert run(off).status == J.SKIPPED and run(off).llm_acc is None
    # No judge, no LLM-Acc: not 0 for a missing answer, not 1 for an exact match
    assert all(run(off, **kw).status == J.SKIPPED and run(off, **kw).llm_acc is None for kw in ({"prediction": None}, {"exact": True}))
    assert backend.requests == []  # none of these asked the model


def test_the_default_config_prompt_formats():
    """The default judge is the paper preset (lenient, no question shown); `judge=strict` is ours."""
    from tests.support.scripted_evaluation import compose_evaluate

    cfg = JudgeConfig.from_dict(dataclasses.asdict(compose_evaluate().judge))
    msgs = Judge(ScriptedBackend([]), cfg).messages("Q?", ["A", "B"], "C")
    assert "Predicted answer: C\nGold answer: A | B" in msgs[1].content  # prediction first: see conf/judge/paper.yaml
    assert '{"verdict": "correct"}' in msgs[1].content and "Q?" not in msgs[1].content
    assert "key information" in " ".join(msgs[0].content.split()) and "contradicts" in msgs[0].content and cfg.max_tokens is None
    strict = JudgeConfig.from_dict(dataclasses.asdict(compose_evaluate("judge=strict").judge))
    msgs = Judge(ScriptedBackend([]), strict).messages("Q?", ["A", "B"], "C")
    assert "Question: Q?\nPredicted answer: C\nReference answer: A | B" in msgs[1].content


def test_judge_agreement_benchmark_scores_both_field_orders_of_each_preset():
    """benchmarks/judge_agreement.py against a judge that calls everything correct: every preset in
    both orders (the preset's own marked), all correct answers agreed with, no wrong one."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.judge_agreement", "--model", "scripted", "--set", "script=[{verdict: correct}]", "--set", "replay=true"],
        cwd=repo, capture_output=True, text=True, timeout=120, check=True,
    ).stdout
    pairs = [json.loads(line) for line in (repo / "benchmarks/judge_agreement/pairs.jsonl").read_text().splitlines() if line.strip()]
    n_pos = sum(p["correct"] for p in pairs)
    rows = [line for line in out.splitlines() if line.startswith("| paper") or line.startswith("| strict")]
    assert [r.split(" | ")[0] for r in rows] == ["| paper, gold first", "| paper, prediction first (preset)", "| strict, gold first", "| strict, prediction first (preset)"]
    assert all(f" | {n_pos} of {n_pos} | 0 of {len(pairs) - n_pos} | " in r and r.endswith(" | 0 |") for r in rows)


def test_a_judge_template_naming_an_unknown_field_is_refused_with_the_valid_ones():
    with pytest.raises(ValueError, match=r"unknown fields \{questoin\}; it may use \{question\}, \{gold\}, \{prediction\}"):
        JudgeConfig(system_prompt="", user_template="Q: {questoin}\nGold: {gold}")
    with pytest.raises(ValueError, match="judge.user_template cannot be filled in"):
        JudgeConfig(system_prompt="", user_template="Gold: {gold} {")
    assert JudgeConfig(system_prompt="", user_template="{{literal}} {gold}").user_template  # doubled braces are text
