"""The tools over MCP, with the official SDK's low-level server (`mcp.server.Server`).

The tool list is the served tools' names, descriptions and JSON schemas as the agent loop gives
them to a model; a call answers the tool's agent-facing text as text content, the structured
result (as the JSON API's, without the text) as structured content, and `isError` when the tool
answered with an error. Arguments are checked by the tools themselves, so a bad call gets the
same message as in-process.

Read trackers (with the document tools' reference ids, at their default settings): over stdio the
process serves one client, so one tracker serves the whole connection; over streamable HTTP each
MCP session (its `Mcp-Session-Id`) has its own, under `mcp:<id>` (the JSON API's are `api:<id>`).
The server's instructions name exactly the tools it serves.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext

from arag.service.tool_service import ToolService, result_json
from arag.tools import DocumentSession, ReadTracker, ToolSpec

MCP_SESSION_HEADER = "mcp-session-id"
SESSION_PREFIX = "mcp:"


def instructions(tools: dict[str, ToolSpec]) -> str:
    """What the server tells a client about itself: each served tool with the first sentence of its description."""
    lines = [f"- {name}: {spec.description.split('. ')[0].rstrip('.')}." for name, spec in tools.items()]
    return "Retrieval tools over one document index. The tools:\n" + "\n".join(lines)


def _session(ctx: ServerRequestContext[Any, Any]) -> str | None:
    request = ctx.request
    session = request.headers.get(MCP_SESSION_HEADER) if request is not None and hasattr(request, "headers") else None
    # A stateless (sessionless) request keeps no memory across calls.
    return SESSION_PREFIX + session if session else None


def mcp_server(service: ToolService, *, version: str, stdio: bool) -> Server:
    """stdio: the server talks to one client over stdin/stdout (one tracker for the connection)."""
    listed = [types.Tool(name=spec.name, description=spec.description, input_schema=spec.parameters) for spec in service.tools.values()]
    stdio_tracker = DocumentSession() if stdio else None

    async def list_tools(ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in service.tools:
            text = f"Error: there is no tool named {params.name[:100]!r}; the tools are {', '.join(service.tools)}."
            return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
        arguments = params.arguments if params.arguments is not None else {}
        session = None if stdio_tracker is not None else _session(ctx)
        tracker = stdio_tracker if stdio_tracker is not None else (service.tracker(session) if session else None)
        result, _ = await service.call(params.name, arguments, tracker=tracker, session_id=session)
        structured = result_json(result)
        del structured["text"]  # it is the text content
        return types.CallToolResult(content=[types.TextContent(text=result.text)], structured_content=structured, is_error=result.error is not None)

    return Server("arag", version=version, instructions=instructions(service.tools), on_list_tools=list_tools, on_call_tool=call_tool)
