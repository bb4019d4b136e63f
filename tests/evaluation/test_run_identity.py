"""The run id is computed once per run: the settings object builds its identity (the method's texts
rendered, the code version read) on first use and every row, failed row and worker reuses it."""

from __future__ import annotations

import asyncio
import json

import pytest

import arag.evaluation.run_settings as settings_module
from arag.evaluation.questions import Question
from arag.evaluation.runner import EpisodeRunner
from arag.evaluation.run_settings import RunSettings
from arag.llm.scripted import ScriptedBackend
from tests.support.scripted_evaluation import QUESTIONS
from tests.evaluation.test_runner import settings as runner_settings
from tests.support.tiny_index import fake_encode

SCRIPT = [{"tool": "keyword_search", "arguments": {"keywords": ["Lothair"]}}, {"answer": "20 March 851"}]
JUDGE_MODEL = {"backend": "scripted", "protocol": "json", "model": "judge", "replay": True, "script": [{"verdict": "correct"}]}


def make_settings() -> RunSettings:
    return runner_settings(model={"backend": "scripted", "protocol": "json", "model": "scripted", "script": SCRIPT, "replay": True}, judge_model=JUDGE_MODEL)


@pytest.fixture
def builds(monkeypatch) -> list[int]:
    """Counts identity builds: each one renders the model's texts once."""
    calls: list[int] = []
    real = settings_module.model_texts

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(settings_module, "model_texts", counted)
    return calls


def test_an_evaluation_of_n_rows_builds_the_identity_once(eval_index, builds):
    from arag.tools import ToolContext

    settings = make_settings()
    questions = [Question(q["id"], q["question"], tuple(q["answers"]), tuple(q["supporting_titles"])) for q in QUESTIONS]
    with ToolContext(eval_index.path, encoder=fake_encode) as ctx:
        runner = EpisodeRunner(settings, backend=ScriptedBackend(SCRIPT, replay=True), ctx=ctx)

        async def all_rows():
            return await asyncio.gather(*(runner.run(q) for q in questions))

        rows = asyncio.run(all_rows()) + [runner.failed_row(q, "lost with its worker") for q in questions]
        runner.close()
    assert len(rows) == 2 * len(questions) and {r.status for r in rows} == {"ok", "failed"}
    assert len(builds) == 1  # not once per row (12 rows here), nor per failed row
    assert {r.run_id for r in rows} == {settings.run_id}
    assert {r.settings for r in rows} == {settings.identity_json} and json.loads(settings.identity_json) == settings.identity()


def test_a_worker_gets_the_run_id_computed_for_the_run(builds):
    settings = make_settings()
    run_id = settings.run_id
    assert len(builds) == 1
    shipped = RunSettings.from_json(json.loads(json.dumps(settings.to_worker_json(), default=str)))
    assert shipped.run_id == run_id and shipped.identity_json == settings.identity_json and len(builds) == 1
    # The worker keeps the driver's id even where its own build would differ (another checkout's code version).
    foreign = settings.to_worker_json()
    foreign["identity"]["code"] = {"version": "other", "commit": "f" * 40}
    assert RunSettings.from_json(foreign).run_id != run_id and len(builds) == 1
    # Settings read back from run.json (no identity with them) build their own, once.
    again = RunSettings.from_json(settings.to_json())
    assert again.run_id == run_id and again.run_id == run_id and len(builds) == 2


def test_the_identity_handed_out_is_a_copy(builds):
    settings = make_settings()
    run_id = settings.run_id
    settings.identity()["method"]["name"] = "changed"
    assert settings.run_id == run_id and settings.identity()["method"]["name"] == "arag_full"
