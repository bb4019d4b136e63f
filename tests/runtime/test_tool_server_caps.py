"""No limit on the way to a served index hides below the episodes in flight: a worker's client pools
one connection per episode in flight (not a fixed 64), and an evaluation whose episodes in flight
exceed the server's `serve.max_connections` (beyond which it answers 503) is warned at start."""

from __future__ import annotations

import pytest

from arag.evaluation.questions import load_questions
from arag.evaluation.run_config import run_settings
from arag.serve.client import open_tools
from tests.support.scripted_evaluation import base_overrides, compose_evaluate

pytestmark = pytest.mark.slow


@pytest.fixture
def small_server(eval_index, tmp_path):
    pytest.importorskip("mcp", reason="the tool server needs the serve extra: pip install -e '.[serve]'")
    from tests.support.tool_server import start_http_server, stop

    server = start_http_server(eval_index.path, tmp_path / "server.log", "serve.preload=false", "serve.max_connections=8")
    yield server
    stop(server)


def pooled(remote) -> int:
    return remote._client._transport._pool._max_connections  # httpx's pool (httpcore)


def test_the_client_pools_a_connection_per_episode_in_flight(small_server):
    with open_tools(index_url=small_server.url, calls_at_once=300) as remote:
        assert pooled(remote) == 300
        assert remote.info["max_connections"] == 8
    with open_tools(index_url=small_server.url) as remote:
        assert pooled(remote) == 64


def test_more_episodes_in_flight_than_the_server_takes_is_warned(small_server, eval_index, questions_file, tmp_path):
    from arag.runtime.evaluate_job import tool_server_caps

    cfg = compose_evaluate(*base_overrides(eval_index.path, questions_file, tmp_path / "results"), f"index.url={small_server.url}")
    settings = run_settings(cfg, load_questions(str(questions_file), "error"))
    assert tool_server_caps(settings, 8) == []
    [warning] = tool_server_caps(settings, 9)
    assert "serve.max_connections=9" in warning and "takes 8 connections" in warning and small_server.url not in warning
