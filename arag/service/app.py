"""Assemble and run the tool server: one open index, MCP over stdio, or MCP (at /mcp) plus the
JSON API over HTTP in one ASGI app behind the token/size guard (`pipelines.serve` is the CLI)."""

from __future__ import annotations

import inspect
import logging
import os
from dataclasses import dataclass, fields
from typing import Any

from arag import __version__
from arag.service.guard import TOKEN_ENV, Guard
from arag.service.sessions import SessionTrackers
from arag.service.tool_service import ToolService, served_tool_names
from arag.tools import ToolContext

log = logging.getLogger("arag.service")

TRANSPORTS = ("stdio", "http")
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class ServeSettings:
    """The `serve:` block of conf/serve.yaml (see there for what each key does)."""

    transport: str = "http"
    host: str = "127.0.0.1"
    port: int = 8765
    token: str | None = None
    max_request_bytes: int = 256 * 1024
    threads: int = 16
    workers: int = 1
    max_sessions: int = 10_000
    session_idle_s: float = 3600.0
    full_text: bool = False
    tools: Any = None
    log_level: str = "info"

    @classmethod
    def from_dict(cls, cfg: dict[str, Any]) -> "ServeSettings":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(cfg) - known)
        if unknown:
            raise ValueError(f"unknown setting(s) {', '.join('serve.' + k for k in unknown)}; serve takes {', '.join(sorted(known))}")
        settings = cls(**cfg)
        if settings.transport not in TRANSPORTS:
            raise ValueError(f"serve.transport must be one of {', '.join(TRANSPORTS)}, got {settings.transport!r}")
        if not isinstance(settings.workers, int) or settings.workers < 1:
            raise ValueError(f"serve.workers must be a whole number of at least 1 (1: tool calls in the server's own process), got {settings.workers!r}")
        return settings

    def resolved_token(self) -> str | None:
        """serve.token, else the ARAG_SERVE_TOKEN environment variable; blank means none."""
        token = self.token if self.token is not None else os.environ.get(TOKEN_ENV)
        return str(token) if token is not None and str(token).strip() else None


def tool_context_options(cfg: dict[str, Any]) -> dict[str, Any]:
    """The `tools:` block: keyword arguments of ToolContext, checked by name (a misspelled key is
    named with the ones that exist)."""
    accepted = [p for p in inspect.signature(ToolContext.__init__).parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name != "encoder"]
    names = {p.name for p in accepted}
    unknown = sorted(set(cfg) - names)
    if unknown:
        raise ValueError(f"unknown setting(s) {', '.join('tools.' + k for k in unknown)}; tools takes {', '.join(sorted(names))}")
    return {k: v for k, v in cfg.items() if v is not None}


def open_service(index_path: str, settings: ServeSettings, tool_options: dict[str, Any] | None = None) -> ToolService:
    names = served_tool_names(settings.tools)
    sessions = SessionTrackers(max_sessions=settings.max_sessions, idle_s=settings.session_idle_s)
    options = tool_context_options(tool_options or {})
    ctx = ToolContext(index_path, **options)
    workers = None
    if settings.workers > 1:
        from arag.tools.worker_pool import ToolWorkerPool

        try:
            workers = ToolWorkerPool(index_path, workers=settings.workers, **options)
        except BaseException:
            ctx.close()
            raise
        log.info("tool calls run in %d worker processes (pids %s)", settings.workers, ", ".join(map(str, workers.pids())))
    return ToolService(ctx, sessions=sessions, tools=names, full_text=settings.full_text, threads=settings.threads, workers=workers)


def http_app(service: ToolService, settings: ServeSettings) -> Guard:
    """The ASGI app: MCP streamable HTTP at /mcp and the JSON API, all behind the guard."""
    from arag.service.http_api import json_api_routes
    from arag.service.mcp_server import mcp_server

    token = settings.resolved_token()
    server = mcp_server(service, version=__version__, stdio=False)
    starlette_app = server.streamable_http_app(
        streamable_http_path="/mcp",
        host=settings.host,
        max_request_body_size=settings.max_request_bytes,
        session_idle_timeout=settings.session_idle_s,
        max_sessions=settings.max_sessions,
        custom_starlette_routes=json_api_routes(service, token=token is not None, version=__version__),
    )
    return Guard(starlette_app, token=token, max_request_bytes=settings.max_request_bytes)


def serve_http(service: ToolService, settings: ServeSettings) -> None:
    import uvicorn

    app = http_app(service, settings)
    if settings.host not in LOOPBACK_HOSTS and settings.resolved_token() is None:
        log.warning("serving on %s without a token: anyone who can reach the port can use the index (set serve.token or %s)", settings.host, TOKEN_ENV)
    log.info("tool server on http://%s:%d (JSON API: /tools, MCP: /mcp)", settings.host, settings.port)
    uvicorn.Server(uvicorn.Config(app, host=settings.host, port=settings.port, log_level=settings.log_level, lifespan="on")).run()


def serve_stdio(service: ToolService) -> None:
    import anyio
    from mcp.server.stdio import stdio_server

    from arag.service.mcp_server import mcp_server

    server = mcp_server(service, version=__version__, stdio=True)

    async def run() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(run)
