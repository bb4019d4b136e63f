"""The tool server under hostile load (issue 43), against real server processes on 127.0.0.1: each
probe an attacker or a careless client once used to lock out authorised clients, hold the tool
workers, fill the sessions, turn a stop into untyped failures or read the headers otherwise than
the server does, and what the server answers now. Bounded loops only; small limits keep them cheap."""

from __future__ import annotations

import pytest

pytest.importorskip("mcp", reason="the tool server needs the serve extra: pip install -e '.[serve]'")

import json
import signal
import socket
import threading
import time

import httpx

from tests.support.tool_server import TOKEN, free_port, server_env, start_http_server, stop
from tests.serve.probes import INITIALIZE, MCP_HEADERS, WAIT_S, assert_json_error, mcp_post, mcp_session, port_of, raw, until_closed, wait_for_notes

MAX_CONNECTIONS = 8
MAX_SESSIONS = 5
SLOW_S = 1.5


def slow_env(log):
    return server_env(ARAG_SERVE_TOKEN=TOKEN, ARAG_TEST_SLOW_S=str(SLOW_S), ARAG_TEST_CALL_LOG=str(log))


@pytest.fixture(scope="module")
def hostile(served_index, tmp_path_factory):
    """A token, few request slots, one tool thread (a slowed tool fills its queue), few sessions,
    and stalled headers kept long: settings the server had before, so each probe ran against it too."""
    logs = tmp_path_factory.mktemp("hostile")
    server = start_http_server(
        served_index.path, logs / "server.log", f"serve.max_connections={MAX_CONNECTIONS}", "serve.threads=1", f"serve.max_sessions={MAX_SESSIONS}", "serve.header_timeout_s=60", "serve.preload=false",
        token=TOKEN, env=slow_env(logs / "calls.log"), module="tests.serve.slow_server",
    )
    server.calls = logs / "calls.log"
    yield server
    stop(server)


@pytest.fixture(scope="module")
def tuned(served_index, tmp_path_factory):
    """The settings this issue added, set low: 8 waiting connections, event streams of 1 s."""
    logs = tmp_path_factory.mktemp("tuned")
    server = start_http_server(
        served_index.path, logs / "server.log", f"serve.max_connections={MAX_CONNECTIONS}", "serve.max_waiting_connections=8", "serve.stream_idle_s=1", "serve.header_timeout_s=60", "serve.preload=false",
        token=TOKEN, env=server_env(ARAG_SERVE_TOKEN=TOKEN),
    )
    yield server
    stop(server)


def authorised(server) -> httpx.Response:
    return httpx.post(f"{server.url}/tools/keyword_search", json={"keywords": ["Lothair"], "top_k": 1}, headers=server.headers(), timeout=WAIT_S)


def stalled(server, n: int) -> list[socket.socket]:
    """n connections whose request headers never finish."""
    conns = []
    for _ in range(n):
        conn = socket.create_connection(("127.0.0.1", port_of(server)), timeout=WAIT_S)
        conn.sendall(b"POST /tools/keyword_search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty")
        conns.append(conn)
    return conns


# 1. Unauthenticated clients took every slot.


def test_stalled_connections_do_not_take_the_slots_of_authorised_clients(hostile):
    conns = stalled(hostile, 2 * MAX_CONNECTIONS)
    try:
        response = authorised(hostile)  # was 503 ("Exceeded concurrency limit.", plain text)
        assert response.status_code == 200 and "Lothair" in response.json()["text"]
        assert httpx.get(f"{hostile.url}/health", timeout=WAIT_S).status_code == 200
    finally:
        for conn in conns:
            conn.close()


def test_waiting_connections_beyond_their_bound_close_the_oldest_unauthenticated(tuned):
    conns = stalled(tuned, 20)  # 8 may wait: the 12 oldest are closed with a 503
    try:
        assert authorised(tuned).status_code == 200
        answers = [until_closed(conn) for conn in conns[:12]]  # a recv timeout here: kept open
        answered = [data for data in answers if data]  # the others were reset: closed before the server read their bytes
        assert answered, "none of the 12 closed connections got the 503"
        for data in answered:
            assert_json_error(data, 503, "serve.max_waiting_connections=8")
    finally:
        for conn in conns:
            conn.close()


# 2. An MCP call went on after its client left.


def test_an_mcp_call_whose_client_left_is_cancelled(hostile):
    abandoned = 4
    sockets = []
    for i in range(abandoned):  # each in its own session, each behind the one tool thread
        session = mcp_session(hostile)
        body = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "keyword_search", "arguments": {"keywords": ["slow"]}}}).encode()
        head = (
            f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port_of(hostile)}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\nmcp-session-id: {session}\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        conn = socket.create_connection(("127.0.0.1", port_of(hostile)), timeout=WAIT_S)
        conn.sendall(head.encode() + body)
        sockets.append(conn)
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline and "slow" not in (hostile.calls.read_text() if hostile.calls.exists() else ""):
        time.sleep(0.05)  # the first one runs
    for conn in sockets:
        conn.close()
    fresh = httpx.post(f"{hostile.url}/tools/keyword_search", json={"keywords": ["fresh"]}, headers=hostile.headers(), timeout=WAIT_S)
    assert fresh.status_code == 200
    before_fresh = hostile.calls.read_text().split("fresh")[0]
    # The one running when its client left finishes; those queued never run (all 4 ran before).
    assert 1 <= before_fresh.count("slow") < abandoned, hostile.calls.read_text()


# 3. MCP sessions were refused at the limit, and counted at a fraction of their cost.


def test_mcp_sessions_beyond_the_limit_evict_the_least_recently_used(hostile):
    sessions = [mcp_session(hostile) for _ in range(MAX_SESSIONS + 2)]  # the 6th and 7th were 503
    listing = {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}
    assert mcp_post(hostile, listing, sessions[-1]).status_code == 200
    oldest = mcp_post(hostile, listing, sessions[0])
    assert oldest.status_code == 404 and oldest.headers["content-type"].startswith("application/json")


def test_an_mcp_session_counts_its_transport():
    from arag.serve.mcp_server import MCP_SESSION_BYTES, SESSION_PREFIX
    from arag.serve.sessions import SessionTrackers

    sessions = SessionTrackers(max_sessions=100, idle_s=3600, session_bytes=100_000, total_bytes=5 * MCP_SESSION_BYTES)
    forgotten = []
    sessions.on_forget = forgotten.append
    for i in range(8):
        sessions.open(f"{SESSION_PREFIX}{i}", MCP_SESSION_BYTES)
    assert len(sessions) == 4 and sessions.bytes <= 5 * MCP_SESSION_BYTES  # ~65 KiB each, not 1 KiB
    assert forgotten == [f"{SESSION_PREFIX}{i}" for i in range(4)]
    sessions.get(f"{SESSION_PREFIX}7").mark("1#0")
    sessions.settle(f"{SESSION_PREFIX}7")  # its tracker is small: kept, though the overhead is over session_bytes
    assert sessions.get(f"{SESSION_PREFIX}7").seen("1#0")


# 4. A stop turned queued calls into untyped 500s.


@pytest.mark.slow
def test_a_stop_answers_queued_calls_with_a_retryable_503_that_the_client_retries(served_index, tmp_path):
    from arag.serve.client import RemoteTools

    log, calls, queued, port = tmp_path / "server.log", tmp_path / "calls.log", tmp_path / "queued.log", free_port()
    overrides = ("serve.threads=1", "serve.preload=false")
    server = start_http_server(served_index.path, log, *overrides, token=TOKEN, env={**slow_env(calls), "ARAG_TEST_QUEUE_LOG": str(queued)}, port=port, module="tests.serve.slow_server")
    answers: list[httpx.Response] = []
    retried: list = []
    client = RemoteTools(server.url, token=TOKEN, retries=10)

    def queued_call() -> None:
        answers.append(httpx.post(f"{server.url}/tools/keyword_search", json={"keywords": ["slow"]}, headers=server.headers(), timeout=WAIT_S))

    threads = [threading.Thread(target=queued_call) for _ in range(5)]
    threads.append(threading.Thread(target=lambda: retried.append(client.call("keyword_search", {"keywords": ["Lothair", "slow"]}))))
    try:
        for thread in threads:
            thread.start()
        wait_for_notes(calls, "slow")  # the first runs
        wait_for_notes(queued, "slow", len(threads))  # and every call, that one too, has reached the server's queue
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(timeout=WAIT_S) in (0, -signal.SIGTERM)  # uvicorn ends by the signal it stopped for
        for thread in threads[:-1]:
            thread.join(WAIT_S)
        statuses = sorted(r.status_code for r in answers)
        assert set(statuses) <= {200, 503} and statuses.count(503) >= 3, statuses  # were 500, text/plain
        for response in answers:
            if response.status_code == 503:
                assert response.headers["content-type"] == "application/json" and "stopping" in response.json()["error"]
        first_log = log.read_text()
        assert "Traceback" not in first_log, first_log[-3000:]
        # The retried call reaches the server that replaces this one.
        server = start_http_server(served_index.path, tmp_path / "restarted.log", *overrides, token=TOKEN, env=slow_env(calls), port=port, module="tests.serve.slow_server")
        threads[-1].join(3 * WAIT_S)
        assert retried and "Lothair" in retried[0].text
    finally:
        client.close()
        stop(server)


@pytest.mark.slow
def test_worker_processes_stop_without_tracebacks(served_index, tmp_path):
    import subprocess
    import sys

    from tests.support.tool_server import REPO

    log = tmp_path / "workers.log"
    port = free_port()
    with open(log, "wb") as out:  # a process group of its own, as a terminal or a service manager starts it
        process = subprocess.Popen([sys.executable, "-m", "pipelines.serve", f"index.path={served_index.path}", f"serve.port={port}", "serve.token=none", "serve.workers=2", "serve.preload=false", "serve.log_level=warning"], cwd=REPO, env=server_env(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # a worker answered a call: the stop below is of running workers
            try:
                if httpx.post(f"http://127.0.0.1:{port}/tools/keyword_search", json={"keywords": ["Lothair"]}, timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.3)
        else:
            pytest.fail(f"the server never answered a call in 120 s: {log.read_text(errors='replace')[-2000:]}")
        import os

        os.killpg(process.pid, signal.SIGINT)  # Ctrl-C: the whole group gets it
        assert process.wait(timeout=WAIT_S) in (0, -signal.SIGINT)  # uvicorn ends by the signal it stopped for
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]


# 5. The small ones.


def test_a_deeply_nested_document_settings_header_is_a_400(hostile):
    nested = "[" * 1000 + "]" * 1000
    response = httpx.post(f"{hostile.url}/tools/search", json={"queries": ["Lothair"]}, headers={**hostile.headers(), "X-Document-Settings": nested}, timeout=WAIT_S)
    assert response.status_code == 400 and "X-Document-Settings" in response.json()["error"].replace("x-document-settings", "X-Document-Settings")
    assert "RecursionError" not in hostile.log_tail() and "Traceback" not in hostile.log_tail()


def test_the_http_layer_answers_json(hostile):
    assert_json_error(raw(hostile, b"NOT AN HTTP REQUEST\r\n\r\n"), 400, "malformed HTTP request")
    assert_json_error(raw(hostile, b"GET /tools HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: 127.0.0.1\r\n\r\n"), 400, "")
    endless = b"GET /tools HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X-Padding: " + b"a" * 20_000  # headers that never end
    assert_json_error(raw(hostile, endless), 400, "malformed HTTP request")


@pytest.mark.parametrize("path", ["/mcp", "/tools"])
@pytest.mark.parametrize("name, values", [("Origin", ["http://evil.example", "http://127.0.0.1"]), ("Origin", ["http://127.0.0.1", "http://evil.example"]), ("Authorization", [f"Bearer {TOKEN}", "Bearer wrong"])])
def test_duplicate_headers_are_refused(hostile, path, name, values):
    headers = [("Authorization", f"Bearer {TOKEN}")] if name != "Authorization" else []
    headers += [(name, v) for v in values] + list(MCP_HEADERS.items())
    response = httpx.request("POST" if path == "/mcp" else "GET", f"{hostile.url}{path}", json=INITIALIZE if path == "/mcp" else None, headers=httpx.Headers(headers), timeout=WAIT_S)
    assert response.status_code == 400 and response.headers["content-type"] == "application/json", response.text
    assert f"the {name} header appears more than once" in response.json()["error"]


@pytest.mark.parametrize("host, status", [("127.0.0.1:\u0661\u0662\u0663", 421), ("127.0.0.1:99999", 421), ("127.0.0.1:0", 421), ("LOCALHOST:{port}", 200), ("LocalHost", 200)])
def test_host_ports_are_ascii_and_in_range_and_names_any_case(hostile, host, status):
    request = f"GET /tools HTTP/1.1\r\nHost: {host.format(port=port_of(hostile))}\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
    data = raw(hostile, request.encode("utf-8"))
    assert data.startswith(f"HTTP/1.1 {status} ".encode()), data[:300]


def test_an_idle_event_stream_is_closed(tuned):
    session = mcp_session(tuned)
    headers = {**MCP_HEADERS, **tuned.headers(), "mcp-session-id": session}
    with httpx.stream("GET", f"{tuned.url}/mcp", headers=headers, timeout=WAIT_S) as stream:  # held forever before
        assert stream.status_code == 200
        for _ in stream.iter_bytes():
            pass
    assert authorised(tuned).status_code == 200


def test_wrong_tokens_are_slowed_and_limited(hostile):
    from arag.serve.guard import MAX_FAILING_TOKENS

    guesses = MAX_FAILING_TOKENS + 8
    request = f"GET /tools HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer guess\r\n\r\n".encode()
    conns = [socket.create_connection(("127.0.0.1", port_of(hostile)), timeout=WAIT_S) for _ in range(guesses)]
    try:
        for conn in conns:
            conn.sendall(request)
        statuses = [int(until_closed(conn).split(b" ", 2)[1]) for conn in conns]
    finally:
        for conn in conns:
            conn.close()
    # All guesses were answered 401 at once; now at most MAX_FAILING_TOKENS wait for theirs.
    assert statuses.count(401) <= MAX_FAILING_TOKENS and statuses.count(429) >= guesses - MAX_FAILING_TOKENS, statuses
    assert authorised(hostile).status_code == 200
