"""Bodies judged as bodies (issue 52), against a real server process on 127.0.0.1: a body under
serve.max_request_bytes gets its answer however it arrives (in the headers' read or after), one
over it gets 413 by the body's own limit (declared or chunked), and a client that leaves mid-call
costs the log no traceback."""

from __future__ import annotations

import pytest

pytest.importorskip("mcp", reason="the tool server needs the serve extra: pip install -e '.[serve]'")

import json

import httpx

from tests.support.tool_server import TOKEN, server_env, start_http_server, stop
from tests.serve.probes import WAIT_S, assert_json_error, connect, json_body, port_of, raw, read_answer, wait_for_notes

MAX_REQUEST_BYTES = 400_000
CALL = {"keywords": ["Lothair"], "top_k": 1}


@pytest.fixture(scope="module")
def bodies(served_index, tmp_path_factory):
    """Bodies up to 400 kB, one tool thread whose calls can be held until released."""
    logs = tmp_path_factory.mktemp("bodies")
    (logs / "release").mkdir()
    env = server_env(ARAG_SERVE_TOKEN=TOKEN, ARAG_TEST_CALL_LOG=str(logs / "calls.log"), ARAG_TEST_RELEASE_DIR=str(logs / "release"))
    server = start_http_server(served_index.path, logs / "server.log", f"serve.max_request_bytes={MAX_REQUEST_BYTES}", "serve.threads=1", "serve.preload=false", token=TOKEN, env=env, module="tests.serve.slow_server")
    server.calls, server.release = logs / "calls.log", logs / "release"
    yield server
    stop(server)


def padded(arguments: dict, size: int) -> bytes:
    """`arguments` as a JSON body of exactly `size` bytes (trailing whitespace: still the same JSON)."""
    body = json.dumps(arguments).encode()
    return body + b" " * (size - len(body))


def request(server, body: bytes, path: str = "/tools/keyword_search") -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port_of(server)}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    return head.encode() + body


@pytest.mark.parametrize("size", [70_000, 150_000, 300_000])
def test_a_body_under_the_limit_sent_with_its_headers_is_answered(bodies, local_ctx, size):
    data = raw(bodies, request(bodies, padded(CALL, size)))  # one write: the body arrives in the headers' read
    assert data.startswith(b"HTTP/1.1 200 "), data[:300]  # was 431 "request headers over 65536 bytes"
    assert json_body(data)["text"] == local_ctx.call("keyword_search", CALL).text


def test_a_body_under_the_limit_from_httpx_is_answered(bodies, local_ctx):
    response = httpx.post(f"{bodies.url}/tools/keyword_search", content=padded(CALL, 200_000), headers={**bodies.headers(), "Content-Type": "application/json"}, timeout=WAIT_S)
    assert response.status_code == 200 and response.json()["text"] == local_ctx.call("keyword_search", CALL).text


def test_a_declared_body_over_the_limit_gets_413_and_the_connection_serves_on(bodies, local_ctx):
    over = padded(CALL, MAX_REQUEST_BYTES + 100_000)
    with connect(bodies) as conn:
        head = f"POST /tools/keyword_search HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {len(over)}\r\n\r\n"
        conn.sendall(head.encode() + over)
        assert_json_error(read_answer(conn), 413, f"({len(over)} bytes): this server accepts at most {MAX_REQUEST_BYTES} bytes (serve.max_request_bytes)")
        conn.sendall(request(bodies, json.dumps(CALL).encode()))  # the rest of the big body was read and dropped
        answer = read_answer(conn)
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:300]
    assert json_body(answer)["text"] == local_ctx.call("keyword_search", CALL).text


def test_a_chunked_body_over_the_limit_gets_413(bodies):
    def chunks():
        for _ in range(10):
            yield b" " * 60_000

    response = httpx.post(f"{bodies.url}/tools/keyword_search", content=chunks(), headers={**bodies.headers(), "Content-Type": "application/json"}, timeout=WAIT_S)
    assert response.status_code == 413 and response.headers["content-type"] == "application/json"
    assert "serve.max_request_bytes" in response.json()["error"]


def test_a_client_that_leaves_mid_call_costs_no_traceback(bodies):
    with connect(bodies) as conn:
        conn.sendall(request(bodies, json.dumps({"keywords": ["held-left"]}).encode()))
        wait_for_notes(bodies.calls, "held-left")  # its call runs
    (bodies.release / "left").touch()
    fresh = httpx.post(f"{bodies.url}/tools/keyword_search", json={"keywords": ["fresh"]}, headers=bodies.headers(), timeout=WAIT_S)
    assert fresh.status_code == 200  # answered after the abandoned call's thread is free: the disconnect was handled before
    log = bodies.log.read_text()
    assert "Traceback" not in log and "HTTPStatus" not in log, log[-3000:]  # was ~50 lines ending in "ValueError: 499 is not a valid HTTPStatus"
