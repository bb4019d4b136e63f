"""The token rule on a server whose token comes from ARAG_SERVE_TOKEN: every route, the MCP
endpoint included, answers 401 and nothing else without the token or with another one."""

from __future__ import annotations

import pytest

pytest.importorskip("mcp", reason="the tool server needs the serve extra: pip install -e '.[serve]'")

import httpx

from arag.serve.client import RemoteTools, ToolServerError
from tests.support.tool_server import TOKEN

REQUESTS = [
    ("GET", "/tools", None),
    ("POST", "/tools/keyword_search", {"keywords": ["Lothair"]}),
    ("POST", "/tools/no_such_tool", {}),
    ("GET", "/index", None),
    ("POST", "/chunks/titles", {"chunk_ids": ["1#0"]}),
    ("GET", "/openapi.json", None),
    ("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    ("GET", "/mcp", None),
    ("GET", "/no/such/path", None),
]
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-token", f"Bearer {TOKEN}x", TOKEN, f"Basic {TOKEN}", "Bearer"])
@pytest.mark.parametrize("method, path, body", REQUESTS)
def test_missing_or_wrong_token_is_401_and_nothing_else(token_server, authorization, method, path, body):
    headers = dict(MCP_HEADERS)
    if authorization is not None:
        headers["Authorization"] = authorization
    response = httpx.request(method, f"{token_server.url}{path}", json=body, headers=headers, timeout=30)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert set(response.json()) == {"error"} and "Authorization: Bearer" in response.json()["error"]
    assert "Lothair" not in response.text and "keyword_search" not in response.text


def test_the_right_token_is_served(token_server):
    headers = token_server.headers()
    assert httpx.get(f"{token_server.url}/tools", headers=headers).status_code == 200
    response = httpx.post(f"{token_server.url}/tools/keyword_search", json={"keywords": ["Lothair"]}, headers=headers)
    assert response.status_code == 200 and "Lothair" in response.json()["text"]
    doc = httpx.get(f"{token_server.url}/openapi.json", headers=headers).json()
    assert doc["security"] == [{"bearer": []}]


def test_remote_tools_token(token_server):
    with pytest.raises(ToolServerError, match="401"):
        RemoteTools(token_server.url, token="wrong")
    with pytest.raises(ToolServerError, match="401"):
        RemoteTools(token_server.url)
    with RemoteTools(token_server.url, token=TOKEN) as tools:
        assert tools.call("keyword_search", {"keywords": ["Lothair"]}).error is None
