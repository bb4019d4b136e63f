"""Secrets reach the workers wherever they run. A worker on another node of a Ray cluster does not
have the environment the driver was started with; the driver hands each worker the variables its
run needs (the tool server's token, the backends' API keys), so an evaluation over a token-guarded
`index.url` answers instead of failing every episode with the server's 401."""

from __future__ import annotations

import io
import json
from dataclasses import replace

import pytest

from arag.evaluation.questions import load_questions
from arag.evaluation.run_config import run_settings
from arag.runtime.evaluate import evaluate
from tests.support.scripted_evaluation import QUESTIONS, base_overrides, compose_evaluate, read_rows

TOKEN = "worker-secret-token"


def test_the_run_names_its_secret_variables(eval_index, questions_file, tmp_path):
    cfg = compose_evaluate(*base_overrides(eval_index.path, questions_file, tmp_path))
    local = run_settings(cfg, load_questions(str(questions_file), "error"))
    assert local.secret_env_names() == []
    served = replace(local, index_url="http://127.0.0.1:1", index_token_env="MY_TOKEN")
    assert served.secret_env_names() == ["MY_TOKEN"]
    assert replace(served, index_token_env=None).secret_env_names() == ["ARAG_SERVE_TOKEN"]
    hosted = replace(served, model={**local.model, "api_key_env": "KEY_A"}, judge_model={"backend": "openai", "api_key_env": "KEY_B"})
    assert hosted.secret_env_names() == ["MY_TOKEN", "KEY_A", "KEY_B"]


@pytest.mark.slow
def test_a_worker_started_without_the_token_still_reaches_a_guarded_server(ray_local, eval_index, questions_file, tmp_path, monkeypatch):
    pytest.importorskip("mcp", reason="the tool server needs the serve extra: pip install -e '.[serve]'")
    from tests.support.tool_server import server_env, start_http_server, stop

    # Ray is already running: its worker processes start with the environment it was started
    # with, which has no token, as on a node that is not the driver's.
    server = start_http_server(eval_index.path, tmp_path / "server.log", "serve.preload=false", token=TOKEN, env=server_env(ARAG_SERVE_TOKEN=TOKEN))
    monkeypatch.setenv("ARAG_SERVE_TOKEN", TOKEN)
    results = tmp_path / "results"
    try:
        summary = evaluate(compose_evaluate(*base_overrides(eval_index.path, questions_file, results, "runtime.concurrency=2"), f"index.url={server.url}"), out=io.StringIO())
    finally:
        stop(server)
    rows = read_rows(results)
    assert summary["ok"] == len(QUESTIONS) and len(rows) == len(QUESTIONS), [r["failure"] for r in rows]
    for row in rows:
        assert [c["error"] for c in json.loads(row["trajectory"])["tool_calls"]] == [None, None]
        assert TOKEN not in json.dumps(row, default=str)
