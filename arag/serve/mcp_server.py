"""The tools over MCP, with the official SDK's low-level server (`mcp.server.Server`): a call answers the
tool's agent-facing text as text content, the JSON API's result as structured content, `isError` when
the tool answered with an error. Read trackers: one per connection over stdio, one per MCP session
(under `mcp:<id>`) over streamable HTTP."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR

from arag.tools.hosting.admission import ClientGone, ServerBusy, ServerStopping, unless
from arag.serve.connections import CLIENT, CONNECTION_LOST, SLOT
from arag.serve.guard import BUSY, MCP_PATH, STOPPING
from arag.serve.sessions import SessionTrackers
from arag.serve.tool_service import ToolService, result_json
from arag.tools import DocumentSession, ToolSpec

MCP_SESSION_HEADER = "mcp-session-id"
SESSION_PREFIX = "mcp:"
# What an MCP session holds besides its read tracker (its transport, streams, server task and
# their buffers): 34-65 KiB measured on the streamable HTTP transport of mcp 2.3, counted in full.
MCP_SESSION_BYTES = 64 * 1024


def instructions(tools: dict[str, ToolSpec]) -> str:
    """What the server tells a client about itself: each served tool with the first sentence of its description."""
    lines = [f"- {name}: {spec.description.split('. ')[0].rstrip('.')}." for name, spec in tools.items()]
    return "Retrieval tools over one document index. The tools:\n" + "\n".join(lines)


def retryable_error(message: str) -> MCPError:
    """The JSON-RPC error of a call that did not run: retryable, as the JSON API's 503."""
    return MCPError(INTERNAL_ERROR, message, {"retryable": True, "retry_after_s": 1})


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
        # Over HTTP, the MCP session's tracker; a stateless (sessionless) request keeps no memory across calls.
        named = None if stdio else getattr(ctx.request, "headers", {}).get(MCP_SESSION_HEADER)
        session = SESSION_PREFIX + named if named else None
        tracker = stdio_tracker if stdio else (service.tracker(session) if session else None)
        scope = getattr(ctx.request, "scope", {})
        lost = scope.get(CONNECTION_LOST)
        # A call whose client disconnected is cancelled, queued or running, as the JSON API's are
        # (a JSON-RPC error nobody reads; MCPError: the SDK answers it without logging a traceback).
        if lost is not None and lost.is_set():
            raise MCPError(CONNECTION_CLOSED, "the client disconnected before the call ran")
        call = service.call(params.name, arguments, tracker=tracker, session_id=session, client=scope.get(CLIENT), caller=session or scope.get("client"), ticket=scope.get(SLOT))
        try:
            result, _ = await (call if lost is None else unless(lost.wait(), call))
        except ClientGone:
            raise MCPError(CONNECTION_CLOSED, "the client disconnected before the answer") from None
        except ServerStopping:
            raise retryable_error(STOPPING) from None
        except ServerBusy:
            raise retryable_error(BUSY) from None
        structured = result_json(result)
        del structured["text"]  # it is the text content
        return types.CallToolResult(content=[types.TextContent(text=result.text)], structured_content=structured, is_error=result.error is not None)

    return Server("arag", version=version, instructions=instructions(service.tools), on_list_tools=list_tools, on_call_tool=call_tool)


class McpSessionBounds:
    """ASGI middleware at /mcp: the SDK's sessions kept in the server's session store with the JSON API's,
    ended in the SDK when the store forgets them (their id then answers 404).
    Own code: the SDK's max_sessions refuses new sessions instead of ending the least recently used."""

    def __init__(self, app: Callable[..., Awaitable[None]], sessions: SessionTrackers, manager: Any):
        self.app = app
        self.sessions = sessions
        self.manager = manager
        self._loop: asyncio.AbstractEventLoop | None = None
        sessions.on_forget = self._forgotten

    def _open_sessions(self) -> dict[str, Any]:
        return self.manager._server_instances  # the SDK's own record of its open sessions

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("path") != MCP_PATH:
            await self.app(scope, receive, send)
            return
        self._loop = asyncio.get_running_loop()
        named = dict(scope.get("headers") or []).get(MCP_SESSION_HEADER.encode())
        if named is not None:
            session = named.decode("latin-1")
            if session in self._open_sessions():  # ids the SDK does not hold are not stored
                self.sessions.touch(SESSION_PREFIX + session)
            await self.app(scope, receive, send)
            if scope.get("method") == "DELETE" and session not in self._open_sessions():
                self.sessions.drop(SESSION_PREFIX + session)
            return

        async def opening(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                opened = dict(message.get("headers") or []).get(MCP_SESSION_HEADER.encode())
                if opened is not None:
                    self.sessions.open(SESSION_PREFIX + opened.decode("latin-1"), MCP_SESSION_BYTES)
            await send(message)

        await self.app(scope, receive, opening)

    def _forgotten(self, session_id: str) -> None:
        if not session_id.startswith(SESSION_PREFIX) or self._loop is None:
            return
        session = session_id[len(SESSION_PREFIX) :]
        transport = self._open_sessions().pop(session, None)  # its id answers 404 from now on
        if transport is not None:  # the SDK's own discard: its record of the session, then the transport ended
            self._loop.call_soon_threadsafe(lambda: asyncio.ensure_future(self.manager._discard_session(session, transport)))
