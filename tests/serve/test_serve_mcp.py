"""The tools through the official MCP client: over stdio (the client starts `pipelines.serve
serve.transport=stdio`) and over streamable HTTP (/mcp of the shared HTTP server). Same tool list
and schemas as the agent sees, the same answers as ToolContext.call, a read tracker per session."""

from __future__ import annotations

import pytest

pytest.importorskip("mcp", reason="the tool server needs the serve extra: pip install -e '.[serve]'")

import sys

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from arag.serve.tool_service import result_json
from arag.tools import TOOLS, ReadTracker
from tests.support.tool_server import BAD_CALLS, CALLS, REPO, server_env


def structured(result) -> dict:
    body = result_json(result)
    del body["text"]
    return body


async def check_tools_and_answers(session: ClientSession, local_ctx) -> None:
    listed = (await session.list_tools()).tools
    assert [t.name for t in listed] == list(TOOLS)
    for tool in listed:  # as the agent sees them over the same index (its chunk ids in the texts)
        assert tool.description == TOOLS[tool.name].for_index(local_ctx.chunk_ids).description
        assert tool.input_schema == TOOLS[tool.name].for_index(local_ctx.chunk_ids).parameters
    assert local_ctx.chunk_ids.example in next(t.description for t in listed if t.name == "chunk_read")
    tracker = ReadTracker()
    for name, args in CALLS:
        got = await session.call_tool(name, args)
        expected = local_ctx.call(name, args, tracker=tracker)
        assert [c.type for c in got.content] == ["text"]
        assert got.content[0].text == expected.text, name
        assert got.structured_content == structured(expected), name
        assert got.is_error is False
    assert "Already read in this episode" in got.content[0].text  # the second read of 1#0 in this session
    for name, args, fragment in BAD_CALLS:
        got = await session.call_tool(name, args)
        expected = local_ctx.call(name, args)
        assert got.is_error is True and got.content[0].text == expected.text and fragment in expected.text
    unknown = await session.call_tool("web_search", {"q": "x"})
    assert unknown.is_error is True and "no tool named 'web_search'" in unknown.content[0].text
    # Still serving after the errors.
    again = await session.call_tool("keyword_search", {"keywords": ["Phoolwari"]})
    assert again.is_error is False and "3#0" in again.content[0].text


def test_stdio(served_index, local_ctx, tmp_path):
    env = server_env()
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "pipelines.serve", f"index.path={served_index.path}", "serve.transport=stdio", "serve.log_level=warning"],
        env={k: env[k] for k in ("PYTHONPATH", "HF_HUB_OFFLINE")},
        cwd=REPO,
    )

    async def main() -> None:
        with open(tmp_path / "stdio.log", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                await check_tools_and_answers(session, local_ctx)

    anyio.run(main)


def test_streamable_http_sessions(http_server, local_ctx):
    async def main() -> None:
        async with streamable_http_client(f"{http_server.url}/mcp") as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await check_tools_and_answers(session, local_ctx)
            # A second MCP session has its own tracker; the first still remembers.
            async with streamable_http_client(f"{http_server.url}/mcp") as (read2, write2), ClientSession(read2, write2) as other:
                await other.initialize()
                first = await other.call_tool("chunk_read", {"chunk_ids": ["1#0"]})
                assert first.structured_content["results"][0]["already_read"] is False
            again = await session.call_tool("chunk_read", {"chunk_ids": ["1#0"]})
            assert again.structured_content["results"][0]["already_read"] is True

    anyio.run(main)


def test_streamable_http_with_token(token_server, local_ctx):
    async def main() -> None:
        client = create_mcp_http_client(headers=token_server.headers())
        async with client, streamable_http_client(f"{token_server.url}/mcp", http_client=client) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            got = await session.call_tool("semantic_search", {"query": "Ermengarde of Tours"})
            assert got.content[0].text == local_ctx.call("semantic_search", {"query": "Ermengarde of Tours"}).text

    anyio.run(main)
