"""A stop answers every front (issue 52), against a real server process on 127.0.0.1: on SIGTERM,
an MCP call running gets its result and one queued a retryable JSON-RPC error, a JSON API call
queued a retryable 503, requests that arrive after the signal (on a new connection or a kept-alive
one) a JSON 503 with Retry-After, never a refused or reset connection, and the remote client's
call sent then reaches the server that replaces it."""

from __future__ import annotations

import pytest

pytest.importorskip("mcp", reason="the tool server needs the serve extra: pip install -e '.[serve]'")

import signal
import threading

import httpx

from tests.support.tool_server import TOKEN, free_port, server_env, start_http_server, stop
from tests.serve.probes import WAIT_S, mcp_session, mcp_tool_call, wait_for_notes

OVERRIDES = ("serve.threads=1", "serve.preload=false")


def assert_stopping(response: httpx.Response) -> None:
    assert response.status_code == 503 and response.headers["content-type"] == "application/json", (response.status_code, response.text)
    assert "stopping" in response.json()["error"] and response.headers["retry-after"] == "1"


@pytest.mark.slow
def test_a_stop_answers_every_front_and_the_client_retries_against_the_next_server(served_index, local_ctx, tmp_path):
    from arag.serve.client import RemoteTools

    calls, queued, release, port = tmp_path / "calls.log", tmp_path / "queued.log", tmp_path / "release", free_port()
    release.mkdir()
    env = server_env(ARAG_SERVE_TOKEN=TOKEN, ARAG_TEST_CALL_LOG=str(calls), ARAG_TEST_QUEUE_LOG=str(queued), ARAG_TEST_RELEASE_DIR=str(release))
    server = start_http_server(served_index.path, tmp_path / "server.log", *OVERRIDES, token=TOKEN, env=env, port=port, module="tests.serve.slow_server")
    kept = httpx.Client(base_url=server.url, headers=server.headers(), timeout=WAIT_S)
    answers: dict[str, object] = {}
    session = mcp_session(server)
    running = threading.Thread(target=lambda: answers.update(running=mcp_tool_call(server, session, 2, "keyword_search", {"keywords": ["held-stop"]})))
    queued_mcp = threading.Thread(target=lambda: answers.update(queued_mcp=mcp_tool_call(server, session, 3, "keyword_search", {"keywords": ["note-mcp"]})))
    queued_api = threading.Thread(target=lambda: answers.update(queued_api=httpx.post(f"{server.url}/tools/keyword_search", json={"keywords": ["note-api"]}, headers=server.headers(), timeout=WAIT_S)))
    retried: list = []
    client = RemoteTools(server.url, token=TOKEN, retries=10)
    late = threading.Thread(target=lambda: retried.append(client.call("keyword_search", {"keywords": ["Lothair"]})))
    try:
        assert kept.get("/tools").status_code == 200  # its connection stays open, idle
        running.start()
        wait_for_notes(calls, "held-stop")  # runs on the one tool thread, held
        queued_mcp.start()
        queued_api.start()
        wait_for_notes(queued, "note-mcp")
        wait_for_notes(queued, "note-api")
        server.process.send_signal(signal.SIGTERM)
        # Requests after the signal: each on a new connection gets an answer (200 until the
        # server has taken the signal, then 503), never a refused or reset connection.
        for _ in range(200):
            response = httpx.get(f"{server.url}/tools", headers=server.headers(), timeout=WAIT_S)  # was ConnectError
            if response.status_code != 200:
                break
        assert_stopping(response)
        assert_stopping(kept.get("/tools"))  # on the connection kept alive from before
        late.start()  # the remote client's call: 503s, retried until a server answers
        queued_api.join(WAIT_S)
        assert_stopping(answers["queued_api"])
        queued_mcp.join(WAIT_S)
        [queued_error] = answers["queued_mcp"]  # was an event stream ended without a response
        assert queued_error["id"] == 3 and "stopping" in queued_error["error"]["message"] and queued_error["error"]["data"]["retryable"] is True
        (release / "stop").touch()
        running.join(WAIT_S)
        [result] = answers["running"]
        assert result["id"] == 2 and result["result"]["content"][0]["text"] == local_ctx.call("keyword_search", {"keywords": ["held-stop"]}).text
        assert server.process.wait(timeout=WAIT_S) in (0, -signal.SIGTERM)
        assert "Traceback" not in server.log.read_text(), server.log_tail()
        server = start_http_server(served_index.path, tmp_path / "restarted.log", *OVERRIDES, token=TOKEN, env=env, port=port, module="tests.serve.slow_server")
        late.join(3 * WAIT_S)
        assert retried and retried[0].text == local_ctx.call("keyword_search", {"keywords": ["Lothair"]}).text
    finally:
        kept.close()
        client.close()
        (release / "stop").touch()
        stop(server)
