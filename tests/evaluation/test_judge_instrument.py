"""The LLM judge is a fixed instrument: across a sweep of the agent's settings (reasoning effort, step
limit, temperature, reply cap) every judge request carries the same model, effort fields, reply cap
and system prompt, and the run ids record the same judge."""

from __future__ import annotations

import asyncio
import json

import pytest

from arag.evaluation.judge import VERDICT_SCHEMA
from arag.evaluation.questions import load_questions
from arag.report.episodes import connect
from arag.evaluation.results import RunStore
from arag.evaluation.rows import EpisodeRow
from arag.evaluation.run_config import run_settings
from arag.evaluation.runner import EpisodeRunner
from arag.evaluation.run_settings import RunSettings
from arag.llm.factory import make_backend
from arag.llm.instrument import at_model_defaults, judge_model_config
from arag.llm.scripted import ScriptedBackend
from arag.llm.types import Message
from tests.support.scripted_evaluation import compose_evaluate

# The agent searches, then answers in words no exact match accepts (so the judge is asked), then the
# judge's verdict: one script per run, served in order (replay off, so every request is kept).
SCRIPT = "[{tool:keyword_search,arguments:{keywords:[Lothair]}},{answer:'She died in the spring of 851.'},{verdict:correct}]"
# The sweep: reasoning effort (a family that has it), and with it the other settings a sweep varies.
SWEEP = [
    ("q0", ["model.reasoning_effort=minimal", "agent.max_steps=3"]),
    ("q2", ["model.reasoning_effort=low", "agent.max_steps=5", "+model.temperature=0.7", "+model.max_tokens=2048"]),
    ("q4", ["model.reasoning_effort=high", "agent.max_steps=8", "+model.max_tokens=64"]),
]


def swept_run(eval_index, questions_file, question_id, overrides):
    """One run of the sweep as pipelines.evaluate sets it up (Hydra config → run_settings) and as a
    Ray worker runs it (settings through JSON, then an EpisodeRunner that builds its own backend)."""
    cfg = compose_evaluate(f"index.path={eval_index.path}", f"questions.path={questions_file}", "model=scripted", f"model.script={SCRIPT}", *overrides)
    question_set = load_questions(str(questions_file))
    settings = RunSettings.from_json(run_settings(cfg, question_set).to_json())
    runner = EpisodeRunner(settings, overrides=overrides)
    try:
        question = next(q for q in question_set.questions if q.id == question_id)
        row = asyncio.run(runner.run(question))
    finally:
        runner.close()
    return settings, row, runner.backend.requests


def without_content(request) -> str:
    """A request with its user message left out: what must not vary between judge calls."""
    return json.dumps({"settings": request.settings, "system": request.system_prompt, "schema": request.response_schema, "tools": request.tools}, sort_keys=True)


def test_an_effort_sweep_judges_every_run_with_the_same_instrument(eval_index, questions_file):
    runs = [swept_run(eval_index, questions_file, qid, overrides) for qid, overrides in SWEEP]
    judge_requests, agent_settings = [], []
    for settings, row, requests in runs:
        assert row.status == "ok" and row.judge_status == "correct" and row.llm_acc == 1.0 and row.exact_match == 0.0
        judged = [r for r in requests if r.response_schema == VERDICT_SCHEMA]
        assert len(judged) == 1 and len(requests) == 3
        judge_requests += judged
        agent_settings.append(json.dumps(requests[0].settings, sort_keys=True))
    # The sweep reached the agent: every run asked with its own effort (and temperature, reply cap).
    assert len(set(agent_settings)) == 3 and [json.loads(s)["reasoning"] for s in agent_settings] == [{"reasoning_effort": e} for e in ("minimal", "low", "high")]
    # ... and not the judge: identical requests apart from their content (the question asked).
    assert len({without_content(r) for r in judge_requests}) == 1
    assert len({r.messages[-1].content for r in judge_requests}) == 3
    fixed = judge_requests[0].settings
    assert fixed["model"] == "scripted" and fixed["reasoning"] == {} and fixed["temperature"] == 0.0
    # The judge the run ids record is the same, while the runs themselves differ.
    assert len({json.dumps(s.identity()["judge_model"], sort_keys=True) for s, _, _ in runs}) == 1
    assert len({s.run_id for s, _, _ in runs}) == 3
    # pipelines.rejudge builds the judge from the same config: the same instrument.
    settings = runs[1][0]
    rebuilt = make_backend(judge_model_config(settings.model))
    asyncio.run(rebuilt.acomplete([Message("system", "s"), Message("user", "u")], response_schema=VERDICT_SCHEMA))
    assert rebuilt.requests[0].settings == fixed


def test_a_view_shares_the_script_and_the_agents_settings_stay_its_own():
    agent = ScriptedBackend([{"answer": "a"}, {"verdict": "correct"}], reasoning_effort="high", temperature=0.5, max_tokens=99)
    judge = at_model_defaults(agent)
    asyncio.run(agent.acomplete([Message("user", "q")]))
    asyncio.run(judge.acomplete([Message("user", "j")], response_schema=VERDICT_SCHEMA))
    assert [r.settings["reasoning"] for r in agent.requests] == [{"reasoning_effort": "high"}, {}]
    assert [r.settings["temperature"] for r in agent.requests] == [0.5, 0.0] and agent.requests[0].settings["max_tokens"] == 99
    assert agent.position == 2 and judge.model == agent.model
    judge.close()  # a view never closes its owner's engine
    assert agent.reasoning.requested == "high"


def test_openai_judge_view_runs_at_the_model_default_effort():
    httpx = pytest.importorskip("httpx")
    from arag.llm.openai import OpenAIBackend
    from tests.support.model_server import openai_endpoint

    mock = openai_endpoint()
    agent = OpenAIBackend("gpt-5-mini", base_url="http://mock/v1", transport=httpx.ASGITransport(app=mock), reasoning_effort="minimal", max_tokens=512)
    judge = at_model_defaults(agent)
    judge.complete([Message("user", "j")], response_schema=VERDICT_SCHEMA)
    body = mock.requests[0]
    assert "reasoning_effort" not in body and body["max_completion_tokens"] == judge.max_tokens != 512 and not mock.refused
    assert judge._session == agent._session  # one client and one concurrency cap for agent and judge
    other = at_model_defaults(OpenAIBackend("gpt-4o-mini", base_url="http://mock/v1", transport=httpx.ASGITransport(app=mock), temperature=0.9))
    other.complete([Message("user", "j")])
    assert mock.requests[-1]["temperature"] == 0.0 and not mock.refused


def test_the_identity_names_the_judge_model_or_the_agents_model_at_its_defaults(eval_index, questions_file):
    question_set = load_questions(str(questions_file))
    base = [f"index.path={eval_index.path}", f"questions.path={questions_file}", "model=scripted"]
    default = run_settings(compose_evaluate(*base, "model.reasoning_effort=low"), question_set).identity()["judge_model"]
    assert default == {"agent_model_at_defaults": {"backend": "scripted", "model": "scripted", "script": [], "replay": False}}
    separate = run_settings(compose_evaluate(*base, "model.reasoning_effort=low", "+model@judge.model=openai", "judge.model.model=gpt-4o-mini"), question_set)
    assert separate.identity()["judge_model"]["model"] == "gpt-4o-mini" and "agent_model_at_defaults" not in separate.identity()["judge_model"]


def test_the_report_shows_the_default_judge_apart_from_a_judge_model(tmp_path):
    results = tmp_path / "results"
    judges = {"A": '{"agent_model_at_defaults": {"model": "qwen"}}', "B": '"agent"', "C": '{"model": "gpt-4o-mini"}'}
    for key, judge_model in judges.items():
        row = EpisodeRow(run_id=f"run{key}", dataset="2wikimultihopqa", question_id="q0", question="?", gold_answers=["a"], supporting_titles=[], method="arag_full",
                         model="qwen", backend="llamacpp", status="ok", prediction="a", settings=f'{{"judge": {{"name": "paper"}}, "judge_model": {judge_model}}}').to_record()
        with RunStore(results, f"run{key}") as store:
            store.write([row])
    labels = dict(connect(results).execute("SELECT run_id, judge FROM episodes").fetchall())
    assert labels == {"runA": "qwen (preset paper)", "runB": "qwen (preset paper)", "runC": "gpt-4o-mini (preset paper)"}


def test_vllm_judge_view_shares_the_engine_connection_at_the_model_default():
    from arag.llm.vllm import VLLMBackend

    from types import SimpleNamespace

    connections = []

    def connect(spec, **options):
        connections.append(SimpleNamespace(name="engine"))
        return connections[-1]

    agent = VLLMBackend("Qwen/Qwen3-8B", model_path="/models/x", reasoning_effort="minimal", temperature=0.6, connector=connect)
    judge = at_model_defaults(agent)
    q = [Message("user", "q")]
    assert agent.request(q, None, None, None)["chat_template_kwargs"] == {"enable_thinking": False} and not agent.thinking
    fixed = judge.request(q, None, VERDICT_SCHEMA, None)
    assert fixed["chat_template_kwargs"] == {} and fixed["thinking"] and fixed["thinking_budget"] is None and fixed["temperature"] == 0.0
    assert judge.connection() is agent.connection() and len(connections) == 1  # one engine for agent and judge
