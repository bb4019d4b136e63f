"""EpisodeRunner without Ray: one question → one row, with metrics, counts, judge and evidence."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import yaml

from arag.evaluation.questions import Question
from arag.evaluation.runner import EpisodeRunner
from arag.evaluation.run_settings import RunSettings
from arag.llm.scripted import ScriptedBackend
from arag.llm.types import LLMError
from arag.methods import METHOD_CONF_DIR
from tests.support.scripted_evaluation import compose_evaluate

Q = Question("q0", "When did Lothair II's mother die?", ("20 March 851",), ("Lothair II", "Ermengarde of Tours"))
FAST = {"backoff_initial_s": 0.0, "backoff_max_s": 0.0, "backoff_jitter_s": 0.0}


def settings(method="arag_full", model=None, agent=None, judge_model=None, **judge) -> RunSettings:
    
    base = dataclasses.asdict(compose_evaluate().judge)
    base.pop("model")
    return RunSettings(
        dataset="bench",
        method=yaml.safe_load((METHOD_CONF_DIR / f"{method}.yaml").read_text()),
        model=model or {"backend": "scripted", "protocol": "json", "model": "scripted", "script": [], "replay": True},
        agent={"max_steps": 4, "token_budget": None, **FAST, **(agent or {})},
        judge={**base, **judge},
        judge_model=judge_model,
        questions_path="/q.jsonl",
        questions_sha256="0" * 64,
        index_path="/index",
        index_build_fingerprint="fp",
    )


def run(s: RunSettings, script, ctx, question=Q, **kw):
    runner = EpisodeRunner(s, backend=ScriptedBackend(script, replay=True), ctx=ctx, overrides=["agent.max_steps=4"], **kw)
    return asyncio.run(runner.run(question, attempt=2, worker="node-1"))


def test_an_answered_episode_becomes_a_full_row(ctx):
    script = [
        {"tool": "keyword_search", "arguments": {"keywords": ["Lothair"]}},
        {"tool": "chunk_read", "arguments": {"chunk_ids": ["2#0", "nope#9"]}},
        {"tool": "no_such_tool", "arguments": {}},
        {"answer": "She died on 20 March 851."},
    ]
    r = run(settings(), script, ctx)
    assert r.status == "ok" and r.prediction == "She died on 20 March 851." and r.failure is None
    assert (r.run_id, r.dataset, r.question_id, r.method, r.backend, r.attempt, r.worker) == (settings().run_id, "bench", "q0", "arag_full", "scripted", 2, "node-1")
    assert r.gold_answers == ["20 March 851"] and r.supporting_titles == ["Lothair II", "Ermengarde of Tours"]
    assert (r.max_steps, r.reasoning_effort, r.overrides) == (4, None, ["agent.max_steps=4"])
    assert (r.calls_keyword_search, r.calls_chunk_read, r.calls_semantic_search, r.calls_other, r.tool_calls) == (1, 1, 0, 1, 3)
    assert r.tool_errors == 1 and r.steps == 4 and not r.forced and r.model_calls == 4
    assert r.retrieved_tokens > 0 and r.prompt_tokens > 0 and r.completion_tokens > 0
    assert (r.contain_acc, r.exact_match) == (1.0, 0.0) and 0 < r.f1 < 1
    # The judge is the agent's (replaying) backend here: its reply is not a verdict → failed, not wrong.
    assert r.judge_status == "failed" and r.llm_acc is None and "unusable" in r.judge_error
    assert (r.evidence_supporting, r.evidence_seen, r.evidence_read) == (2, 2, 1)
    assert r.evidence_recall_seen == 1.0 and r.evidence_recall_read == 0.5
    trajectory = json.loads(r.trajectory)
    assert trajectory["answer"] == r.prediction and len(trajectory["tool_calls"]) == 3 and trajectory["messages"]
    assert json.loads(r.settings)["agent"]["max_steps"] == 4


def test_a_separate_judge_backend_gives_llm_acc(ctx):
    judge = {"backend": "scripted", "protocol": "json", "model": "judge", "replay": True, "script": [{"verdict": "incorrect"}]}
    r = run(settings(judge_model=judge), [{"answer": "on 20 March 851 AD"}], ctx)
    assert r.judge_status == "incorrect" and r.llm_acc == 0.0 and r.contain_acc == 1.0
    r = run(settings(judge_model=judge), [{"answer": "20 march 851"}], ctx)
    assert r.judge_status == "exact_match" and r.llm_acc == 1.0


def test_naive_rag_retrieval_counts_and_reads(ctx):
    r = run(settings("naive_rag"), [{"answer": "851"}], ctx)
    assert r.calls_naive_embedding_search == 1 and r.tool_calls == 1 and r.retrieved_tokens > 0
    assert r.evidence_read == r.evidence_seen >= 1


def test_forced_answers_are_flagged(ctx):
    script = [{"tool": "keyword_search", "arguments": {"keywords": ["Lothair"]}}] * 2 + [{"answer": "20 March 851"}]
    r = run(settings(agent={"max_steps": 2}), script, ctx)
    assert r.status == "ok" and r.forced and r.steps == 2 and r.contain_acc == 1.0


def test_a_failed_episode_is_a_failed_row_with_zero_scores(ctx):
    r = run(settings(), [{"tool": "keyword_search", "arguments": {"keywords": ["Lothair"]}}, LLMError("model down", retryable=False)], ctx)
    assert r.status == "failed" and r.prediction is None and "model down" in r.failure
    assert (r.contain_acc, r.exact_match, r.f1, r.llm_acc, r.judge_status) == (0.0, 0.0, 0.0, 0.0, "no_answer")
    assert r.calls_keyword_search == 1 and (r.evidence_recall_seen, r.evidence_recall_read) == (1.0, 0.0)  # what it saw before failing counts


def test_without_a_judge_no_row_has_an_llm_acc(ctx):
    """judge.enabled=false: a failed row's LLM-Acc is unknown like every other row's, so a run's
    LLM-Acc is blank rather than the average of its failures' zeros."""
    failing = [{"tool": "keyword_search", "arguments": {"keywords": ["Lothair"]}}, LLMError("model down", retryable=False)]
    r = run(settings(enabled=False), failing, ctx)
    assert r.status == "failed" and (r.llm_acc, r.judge_status, r.contain_acc) == (None, "skipped", 0.0)
    lost = EpisodeRunner(settings(enabled=False), backend=ScriptedBackend([]), ctx=ctx).failed_row(Q, "lost with its worker")
    assert (lost.llm_acc, lost.judge_status) == (None, "skipped")
    answered = run(settings(enabled=False), [{"answer": "20 March 851"}], ctx)
    assert answered.status == "ok" and answered.llm_acc is None and answered.contain_acc == 1.0


def test_an_episode_over_its_time_limit_fails(ctx):
    runner = EpisodeRunner(settings(), backend=ScriptedBackend([{"answer": "x"}], replay=True, latency_s=1.0), ctx=ctx, episode_timeout_s=0.05)
    r = asyncio.run(runner.run(Q))
    assert r.status == "failed" and "timed out after 0.05s" in r.failure and r.evidence_recall_read == 0.0
    assert (r.evidence_recall_at_2, r.evidence_recall_at_5) == (0.0, 0.0)  # counted as 0 in Recall@k, not left out


def test_the_run_id_ignores_runtime_knobs_only():
    base = settings()
    assert base.run_id == settings(model={**base.model, "latency_s": 3, "n_threads": 8}).run_id
    assert base.run_id == settings(agent={"llm_attempts": 9, "keep_messages": False}).run_id
    assert base.run_id != settings(agent={"max_steps": 5}).run_id
    assert base.run_id != settings(model={**base.model, "script": [{"answer": "y"}]}).run_id
    assert base.run_id != settings("arag_naive").run_id
    assert base.run_id != settings(judge_model={"backend": "scripted"}).run_id
    assert RunSettings.from_json(base.to_json()).run_id == base.run_id


def test_run_id_changes_when_a_text_the_model_sees_changes(monkeypatch):
    """Tool descriptions, prompts and the code version are part of the run id."""
    import dataclasses

    from arag.evaluation import run_settings as settings_module
    from arag.tools import keyword

    from arag import tools

    base = settings()
    base_id = base.run_id  # run_id is computed on access: take it before anything is patched
    monkeypatch.setitem(tools.TOOLS.held, "keyword_search", dataclasses.replace(keyword.SPEC, description=keyword.SPEC.description + " Reworded."))
    assert settings().run_id != base_id
    monkeypatch.undo()
    assert settings().run_id == base_id
    method = dict(base.method, system_prompt=base.method["system_prompt"] + " Be brief.")
    assert dataclasses.replace(base, method=method).run_id != base_id
    monkeypatch.setattr(settings_module, "code_version", lambda: {"version": "9.9", "commit": "abc"})
    assert settings().run_id != base_id


def test_an_answer_cut_off_at_the_reply_limit_is_a_column(ctx):
    from arag.llm.types import Completion

    cut = Completion(text='{"answer": "Teutberga. Teutberga. Teutb', finish_reason="length")
    r = run(settings(agent={"max_steps": 2}), [cut], ctx)
    assert r.status == "ok" and r.prediction == "Teutberga. Teutberga. Teutb" and r.answer_cut_off is True
    assert run(settings(), [{"answer": "Teutberga"}], ctx).answer_cut_off is False
