"""The tools over MCP, with the official SDK's low-level server (`mcp.server.Server`).

The tool list is the served tools' names, descriptions and JSON schemas as the agent loop gives
them to a model; a call answers the tool's agent-facing text as text content, the structured
result (as the JSON API's, without the text) as structured content, and `isError` when the tool
answered with an error. Arguments are checked by the tools themselves, so a bad call gets the
same message as in-process.

Read trackers (with the document tools' reference ids, at their default settings): over stdio the
process serves one client, so one tracker serves the whole connection; over streamable HTTP each
MCP session (its `Mcp-Session-Id`) has its own.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext

from arag.service.tool_service import ToolService, result_json
from arag.tools import DocumentSession, ReadTracker

INSTRUCTIONS = (
    "Retrieval tools over one document index. Search with keyword_search (exact words or names) or "
    "semantic_search (a question or description); results show chunk ids and matching sentences. "
    "Read whole chunks with chunk_read, passing those chunk ids."
)
MCP_SESSION_HEADER = "mcp-session-id"


def _session_tracker(service: ToolService, ctx: ServerRequestContext[Any, Any], stdio_tracker: ReadTracker | None) -> ReadTracker | None:
    if stdio_tracker is not None:
        return stdio_tracker
    request = ctx.request
    session = request.headers.get(MCP_SESSION_HEADER) if request is not None and hasattr(request, "headers") else None
    # A stateless (sessionless) request keeps no memory across calls.
    return service.tracker(f"mcp:{session}") if session else None


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
        result = await service.call(params.name, arguments, tracker=_session_tracker(service, ctx, stdio_tracker))
        structured = result_json(result)
        del structured["text"]  # it is the text content
        return types.CallToolResult(content=[types.TextContent(text=result.text)], structured_content=structured, is_error=result.error is not None)

    return Server("arag", version=version, instructions=INSTRUCTIONS, on_list_tools=list_tools, on_call_tool=call_tool)
