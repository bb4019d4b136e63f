"""The JSON API of a real server process: every tool answers as ToolContext.call does in-process,
sessions keep chunk_read's memory apart, errors are clear JSON and the server keeps serving."""

from __future__ import annotations

import pytest

pytest.importorskip("mcp", reason="the tool server needs the serve extra: pip install -e '.[serve]'")

import json
import subprocess
import sys

import httpx

from arag.serve.tool_service import result_json
from arag.tools import TOOLS, ReadTracker, tool_schemas
from tests.support.tool_server import BAD_CALLS, CALLS, REPO, server_env


def post(server, tool, body, session=None, **params):
    headers = {"Content-Type": "application/json", **server.headers()}
    if session:
        headers["X-Session-Id"] = session
    content = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return httpx.post(f"{server.url}/tools/{tool}", content=content, headers=headers, params=params, timeout=60)


def test_tools_lists_every_schema(http_server, local_ctx):
    """As the agent sees them over the same index: the texts name its chunk ids (none left as a slot)."""
    response = httpx.get(f"{http_server.url}/tools")
    assert response.status_code == 200
    assert response.json() == {"tools": tool_schemas(list(TOOLS), local_ctx.chunk_ids)}
    assert "{chunk_id" not in response.text and f'for example \\"{local_ctx.chunk_ids.example}\\"' in response.text


def test_every_tool_answers_as_in_process(http_server, local_ctx):
    tracker = ReadTracker()
    for tool, args in CALLS:
        response = post(http_server, tool, args, session="episode-1")
        expected = local_ctx.call(tool, args, tracker=tracker)
        assert response.status_code == 200, response.text
        assert response.json() == result_json(expected), tool
    body = response.json()  # the last call read 1#0 a second time in the same session
    assert [h["already_read"] for h in body["results"]] == [True, False]
    assert "Already read in this episode" in body["text"]


def test_the_answer_is_the_cli_json_plus_the_text(http_server, served_index):
    args = {"keywords": ["Lothair II"]}
    cli = subprocess.run(
        [sys.executable, "-m", "arag.tools", str(served_index.path), "keyword_search", json.dumps(args), "--json"],
        cwd=REPO, env=server_env(), capture_output=True, text=True, check=True,
    )
    served = post(http_server, "keyword_search", args).json()
    text = served.pop("text")
    assert served == json.loads(cli.stdout)
    assert text.startswith("Chunk ID: ") and "Lothair II" in text


def test_sessions_keep_their_own_reads(http_server):
    read = {"chunk_ids": ["2#0"]}
    assert post(http_server, "chunk_read", read, session="a").json()["results"][0]["already_read"] is False
    assert post(http_server, "chunk_read", read, session="a").json()["results"][0]["already_read"] is True
    assert post(http_server, "chunk_read", read, session="b").json()["results"][0]["already_read"] is False
    # The query parameter names the same session as the header.
    assert httpx.post(f"{http_server.url}/tools/chunk_read", json=read, params={"session": "b"}).json()["results"][0]["already_read"] is True
    # Without a session nothing is remembered.
    assert post(http_server, "chunk_read", read).json()["results"][0]["already_read"] is False
    assert post(http_server, "chunk_read", read).json()["results"][0]["already_read"] is False


def test_full_text_per_call(http_server, local_ctx):
    args = {"keywords": ["Lothair"], "top_k": 2}
    whole = post(http_server, "keyword_search", args, full_text="true").json()
    assert whole == result_json(local_ctx.call("keyword_search", args, full_text=True))
    assert "Snippets show only" not in whole["text"]
    assert post(http_server, "keyword_search", args, full_text="false").json() == result_json(local_ctx.call("keyword_search", args))
    bad = post(http_server, "keyword_search", args, full_text="maybe")
    assert bad.status_code == 400 and "full_text must be true or false" in bad.json()["error"]


def test_result_format_per_call(http_server, local_ctx):
    """The served tools honour the calling method's snippets_per_chunk and result_titles as a
    local call does; a call that gives neither gets the official format (5, no titles)."""
    from arag.tools.base import ResultFormat

    args = {"keywords": ["e"], "top_k": 3}  # every sentence of these chunks has an "e"
    default = post(http_server, "keyword_search", args).json()
    assert default == result_json(local_ctx.call("keyword_search", args))
    assert max(len(h["snippets"]) for h in default["results"]) == 2
    one = post(http_server, "keyword_search", args, snippets_per_chunk="1", result_titles="true").json()
    assert one == result_json(local_ctx.call("keyword_search", args, result_format=ResultFormat(snippets_per_chunk=1, result_titles=True)))
    assert [len(h["snippets"]) for h in one["results"]] == [1, 1, 1] and "(Title: " in one["text"] and "(Title: " not in default["text"]
    assert post(http_server, "keyword_search", args, snippets_per_chunk="all").json() == default
    for params, fragment in [({"snippets_per_chunk": "-1"}, "snippets_per_chunk must be"), ({"result_titles": "perhaps"}, "result_titles must be")]:
        bad = post(http_server, "keyword_search", args, **params)
        assert bad.status_code == 400 and fragment in bad.json()["error"]


@pytest.mark.parametrize("tool, args, fragment", BAD_CALLS)
def test_bad_arguments_are_the_tools_own_error(http_server, local_ctx, tool, args, fragment):
    response = post(http_server, tool, args)
    assert response.status_code == 400
    body = response.json()
    assert fragment in body["error"] and body == result_json(local_ctx.call(tool, args))
    assert "Traceback" not in response.text


@pytest.mark.parametrize("raw, fragment", [(b'{"keywords": ["x"', "not valid JSON"), (b"[1, 2]", "must be a JSON object"), (b"\xff\xfe", "not valid JSON"), (b"", "missing required")])
def test_malformed_bodies(http_server, raw, fragment):
    response = post(http_server, "keyword_search", raw)
    assert response.status_code == 400 and fragment in response.json()["error"]


def test_unknown_tool_is_404_with_the_list(http_server):
    response = post(http_server, "web_search", {"q": "x"})
    assert response.status_code == 404
    assert response.json()["tools"] == list(TOOLS) and "web_search" in response.json()["error"]


def test_oversized_requests_are_refused_and_the_server_keeps_serving(http_server):
    huge = json.dumps({"query": "x" * 10_000}).encode()  # the fixture's server takes 4096 bytes
    response = post(http_server, "semantic_search", huge)
    assert response.status_code == 413 and "at most 4096 bytes" in response.json()["error"]

    def chunked():
        for _ in range(10):
            yield b" " * 1000
        yield b'{"keywords": ["x"]}'

    response = httpx.post(f"{http_server.url}/tools/keyword_search", content=chunked(), headers={"Content-Type": "application/json"}, timeout=30)  # no Content-Length
    assert response.status_code == 413 and "serve.max_request_bytes" in response.json()["error"]
    mcp = httpx.post(f"{http_server.url}/mcp", content=huge, headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
    assert mcp.status_code == 413
    assert post(http_server, "keyword_search", {"keywords": ["Lothair"]}).status_code == 200


def test_bad_session_ids(http_server):
    response = post(http_server, "chunk_read", {"chunk_ids": ["1#0"]}, session="x" * 500)
    assert response.status_code == 400 and "session id" in response.json()["error"]


def test_openapi_describes_every_tool(http_server, local_ctx):
    doc = httpx.get(f"{http_server.url}/openapi.json").json()
    assert doc["openapi"].startswith("3.")
    for name, spec in TOOLS.items():
        operation = doc["paths"][f"/tools/{name}"]["post"]
        assert operation["requestBody"]["content"]["application/json"]["schema"] == spec.for_index(local_ctx.chunk_ids).parameters
        assert {"200", "400", "404", "413"} <= set(operation["responses"])
    assert "security" not in doc  # no token on this server


def test_a_remote_client_describes_the_chunk_ids_as_the_local_tools_do(http_server, local_ctx):
    """`index.url=` runs see the texts `index.path=` runs see: the served index's id form and example."""
    from arag.agent import Agent, AgentConfig
    from arag.llm.scripted import ScriptedBackend
    from arag.methods import load_method
    from arag.serve.client import RemoteTools

    assert httpx.get(f"{http_server.url}/index").json()["chunk_ids"] == local_ctx.chunk_ids.to_json()
    requests = []
    with RemoteTools(http_server.url) as remote:
        assert remote.chunk_ids == local_ctx.chunk_ids
        for ctx in (remote, local_ctx):
            backend = ScriptedBackend([{"answer": "x"}])
            Agent(backend, load_method("arag_full"), ctx, protocol="json", config=AgentConfig(max_steps=1)).run("q?")
            requests.append((backend.requests[0].messages[0].content, backend.requests[0].response_schema))
    assert requests[0] == requests[1] and f'"{local_ctx.chunk_ids.example}"' in requests[0][0]


def test_index_info_and_titles(http_server, served_index):
    from arag.index.fingerprint import index_build_fingerprint

    info = httpx.get(f"{http_server.url}/index").json()
    assert info["fingerprint"] == index_build_fingerprint(served_index.path) and info["tools"] == list(TOOLS)
    titles = httpx.post(f"{http_server.url}/chunks/titles", json={"chunk_ids": ["1#1", "0#0", "no#1"]}).json()
    assert titles == {"titles": {"1#1": "Lothair II", "0#0": "Teutberga"}}
    bad = httpx.post(f"{http_server.url}/chunks/titles", json={"chunk_ids": "1#1"})
    assert bad.status_code == 400 and "list of strings" in bad.json()["error"]
