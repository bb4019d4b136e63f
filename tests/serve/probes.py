"""Raw-socket probes of a tool server started by tests.support.tool_server: requests sent byte for
byte, answers read until the server closes or has sent the whole body, the server's JSON error
shape checked, and the notes of tests.serve.slow_server waited for."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import httpx

WAIT_S = 30  # the longest any socket read or wait here takes (a hang fails the test, not the run)


def port_of(server) -> int:
    return int(server.url.rsplit(":", 1)[1])


def connect(server, source: str | None = None) -> socket.socket:
    """A connection to the server, from the loopback address `source` (e.g. 127.0.0.2: another client) if given."""
    return socket.create_connection(("127.0.0.1", port_of(server)), timeout=WAIT_S, source_address=(source, 0) if source else None)


def dict_headers(data: bytes) -> dict[bytes, bytes]:
    head = data.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]
    return {k.strip().lower(): v.strip() for k, _, v in (line.partition(b":") for line in head)}


def read_answer(conn: socket.socket) -> bytes:
    """One whole answer (headers and a Content-Length body), or what came before the server closed."""
    data = b""
    while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < int(dict_headers(data).get(b"content-length", b"0")):
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def raw(server, request: bytes) -> bytes:
    """Send `request` on a fresh connection; what comes back until the server closes it or WAIT_S."""
    with connect(server) as conn:
        conn.sendall(request)
        return read_answer(conn)


def until_closed(conn: socket.socket) -> bytes:
    data = b""
    try:
        while chunk := conn.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def status_of(data: bytes) -> int:
    return int(data.split(b" ", 2)[1])


def json_body(data: bytes) -> dict:
    return json.loads(data.split(b"\r\n\r\n", 1)[1])


def assert_json_error(data: bytes, status: int, fragment: str) -> None:
    assert data.startswith(f"HTTP/1.1 {status} ".encode()), data[:200]
    assert dict_headers(data)[b"content-type"].startswith(b"application/json"), data[:300]
    assert fragment in json_body(data)["error"]


def noted(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def wait_for_notes(path: Path, word: str, count: int = 1) -> list[str]:
    """The notes of tests.serve.slow_server once `word` appears `count` times in them (a bounded
    wait for the server to reach a state; the test's outcome is what the server answers after)."""
    deadline = time.monotonic() + WAIT_S
    while noted(path).count(word) < count:
        assert time.monotonic() < deadline, f"{word!r} not noted {count} time(s) in {path}: {noted(path)}"
        time.sleep(0.02)
    return noted(path)


MCP_HEADERS = {"Accept": "application/json, text/event-stream"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "0"}}}


def mcp_post(server, message: dict, session: str | None = None, **kwargs) -> httpx.Response:
    headers = {**MCP_HEADERS, **server.headers(), **({"mcp-session-id": session} if session else {})}
    return httpx.post(f"{server.url}/mcp", json=message, headers=headers, timeout=WAIT_S, **kwargs)


def mcp_session(server) -> str:
    opened = mcp_post(server, INITIALIZE)
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    mcp_post(server, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    return session


def mcp_tool_call(server, session: str, call_id: int, tool: str, arguments: dict) -> list[dict]:
    """The JSON-RPC messages of one tools/call's answer (its event stream, or its JSON body)."""
    response = mcp_post(server, {"jsonrpc": "2.0", "id": call_id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}, session)
    assert response.status_code == 200, response.text
    if response.headers["content-type"].startswith("application/json"):
        return [response.json()]
    return [json.loads(line[len("data:") :]) for line in response.text.splitlines() if line.startswith("data:") and line[len("data:") :].strip()]
