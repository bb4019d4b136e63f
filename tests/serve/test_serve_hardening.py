"""A tool server safe to leave running, against real server processes: each probe that once took
the server down or let a web page read it (a whole-corpus request, a foreign Host or Origin, a
text/plain body, stalled headers and bodies, deeply nested JSON, typed tokens, another front
end's session id) gets a clear JSON answer, and the server keeps serving after each."""

from __future__ import annotations

import pytest

pytest.importorskip("mcp", reason="the tool server needs the serve extra: pip install -e '.[serve]'")

import json
import socket
import subprocess
import sys

import httpx

from arag.serve.tool_service import result_json
from tests.support.tool_server import REPO, server_env, start_http_server, stop

FILE_TOKEN = "from-a-file 42"
SERVED = ["keyword_search", "chunk_read", "search", "open"]
STALLED = 12  # connections per stall probe
CLOSE_WAIT_S = 20  # how long a stalled connection may stay open (its timeout is 1 s)
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "0"}}}
# Every route, with a body for the POST ones.
ROUTES = [
    ("GET", "/tools", None),
    ("POST", "/tools/keyword_search", {"keywords": ["Lothair"]}),
    ("GET", "/index", None),
    ("POST", "/chunks/titles", {"chunk_ids": ["1#0"]}),
    ("GET", "/openapi.json", None),
    ("GET", "/health", None),
    ("POST", "/mcp", INITIALIZE),
    ("GET", "/mcp", None),
    ("GET", "/no/such/path", None),
]
POST_ROUTES = [(path, body) for method, path, body in ROUTES if method == "POST"]


@pytest.fixture(scope="module")
def hardened(served_index, tmp_path_factory):
    """A server with its token in a file, a subset of the tools, one-second read timeouts, a
    small answer limit and one web origin allowed."""
    logs = tmp_path_factory.mktemp("hardened")
    token_file = logs / "token"
    token_file.write_text(FILE_TOKEN + "\n")
    server = start_http_server(
        served_index.path, logs / "server.log",
        f"serve.token_file={token_file}", f"serve.tools=[{','.join(SERVED)}]", "serve.header_timeout_s=1", "serve.body_timeout_s=1",
        "serve.max_request_bytes=65536", "serve.max_response_bytes=1024", "serve.allowed_origins=[https://app.example]",
        token=FILE_TOKEN,
    )
    yield server
    stop(server)


def still_serves(server) -> None:
    response = httpx.post(f"{server.url}/tools/keyword_search", json={"keywords": ["Lothair"], "top_k": 1}, headers=server.headers(), timeout=30)
    assert response.status_code == 200 and "Lothair" in response.json()["text"]


def assert_json_error(response, status: int, fragment: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    assert set(response.json()) >= {"error"} and fragment in response.json()["error"], response.json()


# Item 1: ceilings owned by the server.


@pytest.mark.parametrize("settings, name, ceiling", [({"search_results": 1_000_000}, "search_results", 10), ({"max_queries": 100_000}, "max_queries", 5), ({"open_window_lines": 10**9}, "open_window_lines", 1800)])
def test_document_settings_over_the_ceiling_are_refused(http_server, settings, name, ceiling):
    response = httpx.post(f"{http_server.url}/tools/search", json={"queries": ["Lothair"]}, headers={"X-Session-Id": "greedy", "X-Document-Settings": json.dumps(settings)}, timeout=30)
    assert_json_error(response, 400, f"{name}={list(settings.values())[0]} is over this server's ceiling of {ceiling} (serve.max_document_settings.{name})")
    narrowed = httpx.post(f"{http_server.url}/tools/search", json={"queries": ["Lothair"]}, headers={"X-Session-Id": "greedy", "X-Document-Settings": json.dumps({"search_results": 2})}, timeout=30)
    assert narrowed.status_code == 200 and len(narrowed.json()["details"]["ref_ids"]) == 2
    still_serves(http_server)


def test_a_raised_ceiling_is_the_servers_choice(served_index, tmp_path):
    server = start_http_server(served_index.path, tmp_path / "raised.log", "serve.max_document_settings.search_results=3")
    try:
        url = f"{server.url}/tools/search"
        assert httpx.post(url, json={"queries": ["Lothair"]}, headers={"X-Document-Settings": '{"search_results": 3}'}, timeout=30).status_code == 200
        assert_json_error(httpx.post(url, json={"queries": ["Lothair"]}, headers={"X-Document-Settings": '{"search_results": 4}'}, timeout=30), 400, "ceiling of 3")
    finally:
        stop(server)


def test_an_answer_over_the_limit_is_an_error_saying_so(hardened, local_ctx):
    args = {"keywords": ["Lothair", "Teutberga", "Phoolwari", "Ermengarde"], "top_k": 20}
    assert len(json.dumps(result_json(local_ctx.call("keyword_search", args, full_text=True)))) > 1024
    response = httpx.post(f"{hardened.url}/tools/keyword_search", json=args, params={"full_text": "true"}, headers=hardened.headers(), timeout=30)
    assert_json_error(response, 400, "over this server's limit of 1024 bytes (serve.max_response_bytes)")
    assert response.json()["results"] == []
    still_serves(hardened)


# Item 2: one origin rule on every route, JSON bodies only.


@pytest.mark.parametrize("method, path, body", ROUTES)
@pytest.mark.parametrize("header, status", [({"Host": "evil.example"}, 421), ({"Host": "evil.example:8765"}, 421), ({"Origin": "http://evil.example"}, 403), ({"Origin": "null"}, 403)])
def test_a_foreign_host_or_origin_is_refused_on_every_route(http_server, method, path, body, header, status):
    response = httpx.request(method, f"{http_server.url}{path}", json=body, headers={**MCP_HEADERS, **header}, timeout=30)
    assert_json_error(response, status, "evil.example" if "evil" in str(header) else "origin")
    assert "Lothair" not in response.text and "keyword_search" not in response.text


def test_loopback_names_and_allowed_origins_are_served(http_server, hardened):
    port = http_server.url.rsplit(":", 1)[1]
    for host in (f"127.0.0.1:{port}", f"localhost:{port}"):
        assert httpx.get(f"{http_server.url}/tools", headers={"Host": host, "Origin": f"http://{host}"}).status_code == 200
    # A deliberate browser origin: served, with CORS answers (preflight included).
    origin = {"Origin": "https://app.example"}
    preflight = httpx.options(f"{hardened.url}/tools/keyword_search", headers={**origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type"})
    assert preflight.status_code == 200 and preflight.headers["access-control-allow-origin"] == "https://app.example"
    response = httpx.post(f"{hardened.url}/tools/keyword_search", json={"keywords": ["Lothair"], "top_k": 1}, headers={**origin, **hardened.headers()})
    assert response.status_code == 200 and response.headers["access-control-allow-origin"] == "https://app.example"
    assert_json_error(httpx.get(f"{hardened.url}/tools", headers={"Origin": "http://127.0.0.1.evil.example", **hardened.headers()}), 403, "serve.allowed_origins")


@pytest.mark.parametrize("path, body", POST_ROUTES)
@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None])
def test_bodies_must_be_json(http_server, path, body, content_type):
    headers = {**MCP_HEADERS, **({"Content-Type": content_type} if content_type else {})}
    response = httpx.post(f"{http_server.url}{path}", content=json.dumps(body), headers=headers, timeout=30)
    assert_json_error(response, 415, "Content-Type: application/json")
    still_serves(http_server)


# Item 3: bounded connections.


def stalled_connections(server, payload: bytes) -> list[socket.socket]:
    port = int(server.url.rsplit(":", 1)[1])
    conns = []
    for _ in range(STALLED):
        conn = socket.create_connection(("127.0.0.1", port), timeout=CLOSE_WAIT_S)
        if payload:
            conn.sendall(payload)
        conns.append(conn)
    return conns


def read_until_closed(conn: socket.socket) -> bytes:
    """What the server sends before closing (a timeout here means it kept the connection open)."""
    data = b""
    with conn:
        while chunk := conn.recv(65536):
            data += chunk
    return data


@pytest.mark.parametrize("payload", [b"", b"POST /tools/keyword_search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty"], ids=["nothing", "half-headers"])
def test_stalled_headers_are_cut_off(hardened, payload):
    conns = stalled_connections(hardened, payload)
    answers = [read_until_closed(conn) for conn in conns]  # each returns once the server closes it
    for answer in answers:
        assert answer.startswith(b"HTTP/1.1 408 ") and b"serve.header_timeout_s" in answer
    still_serves(hardened)


def test_a_stalled_body_is_cut_off(hardened):
    head = (
        "POST /tools/keyword_search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {FILE_TOKEN}\r\nContent-Length: 100\r\n\r\n" + '{"keywords": ['
    )
    conns = stalled_connections(hardened, head.encode())
    for conn in conns:
        answer = read_until_closed(conn)
        assert answer.startswith(b"HTTP/1.1 408 ") and b"serve.body_timeout_s" in answer
    still_serves(hardened)


def test_a_kept_alive_connection_with_stalled_next_headers_is_cut_off(hardened):
    port = int(hardened.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=CLOSE_WAIT_S) as conn:
        conn.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        first = b""
        while b'"ready"}' not in first:
            first += conn.recv(65536)
        assert first.startswith(b"HTTP/1.1 200 ")
        conn.sendall(b"GET /tools HTTP/1.1\r\nHost: 127.0.")
        rest = b""
        while chunk := conn.recv(65536):
            rest += chunk
    assert rest.startswith(b"HTTP/1.1 408 ")


# Item 4: JSON everywhere, tokens as text, sessions per front end, texts from what is served, readiness.


@pytest.mark.parametrize("path, body", POST_ROUTES)
def test_deeply_nested_bodies_are_a_clear_400(http_server, path, body):
    nested = b"[" * 1500 + b"]" * 1500  # within the fixture's 4096 bytes; deeper than Python's recursion limit
    response = httpx.post(f"{http_server.url}{path}", content=nested, headers={"Content-Type": "application/json", **MCP_HEADERS}, timeout=30)
    assert response.status_code == 400, response.text
    assert "Traceback" not in response.text and response.headers["content-type"].startswith("application/json")
    still_serves(http_server)
    assert "Traceback" not in http_server.log_tail()


@pytest.mark.parametrize(
    "method, path, status, fragment",
    [("GET", "/no/such/path", 404, "no route GET '/no/such/path'"), ("GET", "/tools/", 404, "no route"), ("GET", "/mcp/", 404, "no route"), ("GET", "/tools/keyword_search", 405, "allowed: POST"), ("POST", "/index", 405, "GET")],
)
def test_unknown_paths_and_methods_are_json_without_redirects(http_server, method, path, status, fragment):
    response = httpx.request(method, f"{http_server.url}{path}", json={} if method == "POST" else None, follow_redirects=False)
    assert_json_error(response, status, fragment)


def test_the_token_file_and_a_lowercase_scheme(hardened):
    assert httpx.get(f"{hardened.url}/tools", headers={"Authorization": f"bearer {FILE_TOKEN}"}).status_code == 200
    assert httpx.get(f"{hardened.url}/tools", headers={"Authorization": f"BEARER {FILE_TOKEN}"}).status_code == 200
    assert_json_error(httpx.get(f"{hardened.url}/tools", headers={"Authorization": f"Bearer {FILE_TOKEN}x"}), 401, "Authorization: Bearer")
    assert_json_error(httpx.get(f"{hardened.url}/index"), 401, "Authorization: Bearer")
    health = httpx.get(f"{hardened.url}/health")  # readiness needs no token and says nothing about the index
    assert health.status_code == 200 and health.json() == {"status": "ready"}


def test_a_typed_token_is_its_text(served_index, tmp_path):
    server = start_http_server(served_index.path, tmp_path / "typed.log", "serve.preload=false", "serve.token=1e3", token="1e3")
    try:
        assert httpx.get(f"{server.url}/tools", headers={"Authorization": "Bearer 1e3"}).status_code == 200
        assert httpx.get(f"{server.url}/tools", headers={"Authorization": "Bearer 1000.0"}).status_code == 401
    finally:
        stop(server)
    assert "visible to every local user" in server.log.read_text()


@pytest.mark.parametrize(
    "args, message",
    [
        (["serve.token=null"], "serve.token is 'null'"),
        (["serve.token="], "serve.token is ''"),
        ([], "the HTTP server needs a token"),
        (["serve.token=none", "serve.host=0.0.0.0"], "allowed only on a loopback host"),
        (["serve.token_file=/nonexistent/token"], "serve.token_file: cannot read /nonexistent/token"),
        (["serve.token=none", "serve.max_document_settings.search_result=5"], "unknown setting serve.max_document_settings.search_result (did you mean serve.max_document_settings.search_results?)"),
        (["serve.token=none", "serve.header_timeout_s=0"], "serve.header_timeout_s must be a positive number of seconds"),
    ],
)
def test_no_open_server_by_accident(args, message):
    done = subprocess.run([sys.executable, "-m", "pipelines.serve", "index.path=.", *args], cwd=REPO, env=server_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and message in done.stderr and "Traceback" not in done.stderr


def mcp_post(server, message: dict, session: str | None = None) -> httpx.Response:
    headers = {**MCP_HEADERS, **server.headers(), **({"mcp-session-id": session} if session else {})}
    return httpx.post(f"{server.url}/mcp", json=message, headers=headers, timeout=30)


def mcp_result(response: httpx.Response) -> dict:
    if response.headers["content-type"].startswith("text/event-stream"):
        data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
        return json.loads(data[-1])["result"]
    return response.json()["result"]


def test_an_mcp_session_cannot_be_named_from_the_json_api(http_server):
    opened = mcp_post(http_server, INITIALIZE)
    session = opened.headers["mcp-session-id"]
    mcp_post(http_server, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    read = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "chunk_read", "arguments": {"chunk_ids": ["1#0"]}}}
    assert mcp_result(mcp_post(http_server, read, session))["structuredContent"]["results"][0]["already_read"] is False
    for named in (f"mcp:{session}", session):
        api = httpx.post(f"{http_server.url}/tools/chunk_read", json={"chunk_ids": ["1#0"]}, headers={"X-Session-Id": named}, timeout=30)
        assert api.json()["results"][0]["already_read"] is False  # a JSON API session of its own
    read["id"] = 3
    assert mcp_result(mcp_post(http_server, read, session))["structuredContent"]["results"][0]["already_read"] is True


def test_the_texts_name_only_the_served_tools(hardened):
    instructions = mcp_result(mcp_post(hardened, INITIALIZE))["instructions"]
    for name in SERVED:
        assert f"- {name}: " in instructions
    for name in ("keyword_search", "semantic_search", "naive_embedding_search", "find", "summarize"):
        assert (f"- {name}: " in instructions) == (name in SERVED)
    assert "semantic_search" not in instructions
    assert [t["function"]["name"] for t in httpx.get(f"{hardened.url}/tools", headers=hardened.headers()).json()["tools"]] == SERVED
    paths = httpx.get(f"{hardened.url}/openapi.json", headers=hardened.headers()).json()["paths"]
    assert sorted(p.removeprefix("/tools/") for p in paths if p.startswith("/tools/")) == sorted(SERVED)

