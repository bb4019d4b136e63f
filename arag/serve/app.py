"""Assemble and run the tool server over one open index: MCP over stdio, or MCP (at /mcp) and the
JSON API in one ASGI app behind the guard, on uvicorn (`pipelines.serve` is the CLI)."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import logging
import os
from pathlib import Path
from typing import Any

from arag import __version__
from arag.config.schemas import ServeConfig
from arag.tools.hosting.admission import CallGate
from arag.serve.guard import CLIENT_KEEPALIVE_S, LOOPBACK_HOSTS, LOOPBACK_NAMES, TOKEN_ENV, Guard
from arag.serve.sessions import SessionTrackers
from arag.strict_settings import check_keys
from arag.serve.tool_service import ToolService, document_ceilings, served_tool_names
from arag.tools import ToolContext

log = logging.getLogger("arag.serve")

TRANSPORTS = ("stdio", "http")
OPEN = "none"  # serve.token=none: an open server (loopback only)
SHUTDOWN_GRACE_S = 10  # seconds a stopping server gives the tool calls still running
ANSWER_S = 5  # then seconds for the answers to go out (calls answered, nothing left to run)
MAX_HEADER_BYTES = 16 * 1024  # h11's own default


@dataclasses.dataclass
class ServeSettings(ServeConfig):
    """The `serve:` node (keys and defaults: arag.config.schemas.ServeConfig) with its values checked."""

    def __post_init__(self) -> None:
        if dataclasses.is_dataclass(self.max_document_settings):  # the schema's default: no ceiling set
            self.max_document_settings = dataclasses.asdict(self.max_document_settings)

    @classmethod
    def from_dict(cls, cfg: dict[str, Any]) -> "ServeSettings":
        check_keys("serve", cfg, (f.name for f in dataclasses.fields(cls)))
        settings = cls(**{k: ([] if v is None and k.startswith("allowed_") else v) for k, v in cfg.items()})
        if settings.transport not in TRANSPORTS:
            raise ValueError(f"serve.transport must be one of {', '.join(TRANSPORTS)}, got {settings.transport!r}")
        if not isinstance(settings.workers, int) or settings.workers < 1:
            raise ValueError(f"serve.workers must be a whole number of at least 1 (1: tool calls in the server's own process), got {settings.workers!r}")
        for name in ("max_request_bytes", "max_response_bytes", "session_max_bytes", "sessions_max_bytes", "max_connections", "max_waiting_connections", "threads", "max_sessions"):
            value = getattr(settings, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"serve.{name} must be a whole number of at least 1, got {value!r}")
        for name in ("header_timeout_s", "body_timeout_s", "keep_alive_s", "session_idle_s", "stream_idle_s"):
            value = getattr(settings, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"serve.{name} must be a positive number of seconds, got {value!r}")
        if settings.keep_alive_s < 2 * CLIENT_KEEPALIVE_S:
            raise ValueError(f"serve.keep_alive_s must be at least {2 * CLIENT_KEEPALIVE_S:g} s (arag's clients keep an idle connection {CLIENT_KEEPALIVE_S:g} s, and one the server closes sooner can fail a call), got {settings.keep_alive_s!r}")
        for name in ("preload", "full_text"):
            value = getattr(settings, name)
            if not isinstance(value, bool):
                raise ValueError(f"serve.{name} must be true or false, got {value!r}")
        for name in ("allowed_hosts", "allowed_origins"):
            value = getattr(settings, name)
            if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v.strip() for v in value):
                raise ValueError(f"serve.{name} must be a list of names, e.g. [\"tools.example:8765\"], got {value!r}")
        if settings.token is not None and not isinstance(settings.token, str):
            raise ValueError(f"serve.token must be text, got {type(settings.token).__name__} {settings.token!r}: quote it, or better put it in serve.token_file or {TOKEN_ENV}")
        if not isinstance(settings.max_document_settings, dict):
            raise ValueError(f"serve.max_document_settings must be a mapping of document tool settings, got {settings.max_document_settings!r}")
        document_ceilings(settings.max_document_settings)
        return settings

    @property
    def loopback(self) -> bool:
        return self.host in LOOPBACK_HOSTS

    def resolved_token(self) -> str | None:
        """serve.token, else serve.token_file's text, else ARAG_SERVE_TOKEN; None only for `serve.token=none` on loopback."""
        if self.token is not None and self.token_file is not None:
            raise ValueError("give serve.token or serve.token_file, not both")
        if self.token is not None:
            if self.token.strip().lower() == OPEN:
                if not self.loopback:
                    raise ValueError(f"serve.token=none serves without a token, which is allowed only on a loopback host (serve.host={self.host!r}); give serve.token_file or {TOKEN_ENV}")
                return None
            if not self.token.strip() or self.token.strip().lower() == "null":
                raise ValueError(f"serve.token is {self.token!r}: give the token's text (better in serve.token_file or {TOKEN_ENV}), or serve.token=none for an open server on 127.0.0.1")
            return self.token
        if self.token_file is not None:
            try:
                token = Path(self.token_file).read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise ValueError(f"serve.token_file: cannot read {self.token_file}: {exc.strerror or exc}") from None
            if not token:
                raise ValueError(f"serve.token_file: {self.token_file} is empty")
            return token
        token = os.environ.get(TOKEN_ENV)
        if token is not None:
            if not token.strip():
                raise ValueError(f"{TOKEN_ENV} is set but blank: give the token's text, or unset it and say serve.token=none for an open server on 127.0.0.1")
            return token.strip()
        raise ValueError(f"the HTTP server needs a token: serve.token_file=<file> or {TOKEN_ENV} (serve.token=<text> works too, but shows in `ps`), or serve.token=none for an open server on 127.0.0.1")

    def origin_rule(self) -> tuple[list[str] | None, list[str]]:
        """(Host values served, None: any; Origin values served)."""
        loopback = [pattern for name in LOOPBACK_NAMES for pattern in (name, f"{name}:*")] if self.loopback else []
        hosts = (loopback + self.allowed_hosts) if self.loopback else (list(self.allowed_hosts) or None)
        return hosts, [f"http://{host}" for host in loopback] + list(self.allowed_origins)


def tool_context_options(cfg: dict[str, Any]) -> dict[str, Any]:
    """The `tools:` block: keyword arguments of ToolContext, checked by name."""
    accepted = inspect.signature(ToolContext.__init__).parameters.values()
    check_keys("tools", cfg, (p.name for p in accepted if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name != "encoder"))
    return {k: v for k, v in cfg.items() if v is not None}


def open_service(index_path: str, settings: ServeSettings, tool_options: dict[str, Any] | None = None) -> ToolService:
    names = served_tool_names(settings.tools)
    ceilings = document_ceilings(settings.max_document_settings)
    sessions = SessionTrackers(max_sessions=settings.max_sessions, idle_s=settings.session_idle_s, session_bytes=settings.session_max_bytes, total_bytes=settings.sessions_max_bytes)
    options = tool_context_options(tool_options or {})
    with contextlib.ExitStack() as opened:  # closed again if anything after fails
        ctx = ToolContext(index_path, **options)
        opened.callback(ctx.close)
        workers = None
        if settings.workers > 1:
            from arag.tools.hosting.worker_pool import ToolWorkerPool

            workers = ToolWorkerPool(index_path, workers=settings.workers, **options)
            opened.callback(workers.close)
            log.info("tool calls run in %d worker processes (pids %s)", settings.workers, ", ".join(map(str, workers.pids())))
        service = ToolService(ctx, sessions=sessions, tools=names, full_text=settings.full_text, threads=settings.threads, workers=workers, ceilings=ceilings, max_response_bytes=settings.max_response_bytes, max_connections=settings.max_connections)
        if settings.preload:
            service.preload()
        opened.pop_all()
    return service


def http_app(service: ToolService, settings: ServeSettings, token: str | None) -> Guard:
    """MCP streamable HTTP at /mcp and the JSON API, all behind the guard."""
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.exceptions import HTTPException

    from arag.serve.http_api import http_error, json_api_routes, server_error
    from arag.serve.mcp_server import McpSessionBounds, mcp_server

    server = mcp_server(service, version=__version__, stdio=False)
    starlette_app = server.streamable_http_app(
        streamable_http_path="/mcp", host=settings.host, max_request_body_size=settings.max_request_bytes, session_idle_timeout=settings.session_idle_s,
        # The session store bounds MCP sessions, least recently used first (McpSessionBounds); the SDK's cap refuses new ones.
        max_sessions=None,
        # The guard's origin rule covers every route, /mcp included; the SDK's (on /mcp only) compares
        # names case-sensitively and lets any port through, so it would answer differently.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        custom_starlette_routes=json_api_routes(service, token=token is not None, version=__version__),
    )
    starlette_app.router.redirect_slashes = False
    starlette_app.add_exception_handler(HTTPException, http_error)
    starlette_app.add_exception_handler(Exception, server_error)
    return Guard(McpSessionBounds(starlette_app, service.sessions, server.session_manager), settings, token)


def uvicorn_config(app: Any, settings: ServeSettings) -> Any:
    """uvicorn with its keep-alive timeout, graceful stop and bounded waiting connections."""
    import uvicorn
    from uvicorn.protocols.http.h11_impl import H11Protocol

    from arag.serve.connections import WaitingConnections, bounded_protocol

    return uvicorn.Config(
        app, host=settings.host, port=settings.port, log_level=settings.log_level, lifespan="on",
        # h11 named, not uvicorn's pick (httptools when installed): the bounds read h11's state.
        http=bounded_protocol(H11Protocol, settings.header_timeout_s, WaitingConnections(settings.max_waiting_connections)),
        timeout_keep_alive=settings.keep_alive_s,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,  # headers still arriving beyond it: a JSON 400 (connections.py)
        # uvicorn's cap counts connections before any token (stalled ones lock clients out, with a
        # plain-text 503): the guard's request slots, shared per client, replace it.
        limit_concurrency=None,
        # Once the stop has answered every call (stopping_server), what still runs after this long is cut.
        timeout_graceful_shutdown=ANSWER_S,
    )


def serve_http(service: ToolService, settings: ServeSettings, token: str | None) -> None:
    from arag.open_files import ensure_open_files

    app = http_app(service, settings, token)
    connections = settings.max_connections + settings.max_waiting_connections
    short = ensure_open_files(connections, f"serve.max_connections + serve.max_waiting_connections = {connections}")
    if short:
        log.warning("%s", short)
    if token is None:
        log.warning("serving on %s without a token (serve.token=none): any local user can use the index", settings.host)
    log.info("tool server on http://%s:%d (JSON API: /tools, MCP: /mcp, readiness: /health)", settings.host, settings.port)
    try:
        stopping_server(uvicorn_config(app, settings), app, service.gate).run()
    except KeyboardInterrupt:  # uvicorn raises the Ctrl-C it stopped for again once stopped: a stop, not a failure
        log.info("stopped")


def stopping_server(config: Any, guard: Guard, gate: CallGate) -> Any:
    """uvicorn's server whose stop answers every front (retryable 503s, running calls given SHUTDOWN_GRACE_S)
    before the listener closes. Own code: uvicorn closes the listener first."""
    import uvicorn
    from sse_starlette.sse import AppStatus

    # sse-starlette ends every event stream at uvicorn's exit signal, MCP answers still being computed
    # among them; its own switch leaves that to this server, which ends them once every call is answered.
    AppStatus.disable_automatic_graceful_drain()

    class StoppingServer(uvicorn.Server):
        async def shutdown(self, sockets: Any = None) -> None:
            guard.stop()
            gate.close()
            if not await gate.wait_idle(SHUTDOWN_GRACE_S):
                log.warning("tool calls still running after %g s: answered as stopping, their threads left to finish", SHUTDOWN_GRACE_S)
                gate.abandon()
            await guard.wait_answered(ANSWER_S)
            AppStatus.should_exit = True
            await super().shutdown(sockets)

    return StoppingServer(config)


def serve_stdio(service: ToolService) -> None:
    import anyio
    from mcp.server.stdio import stdio_server

    from arag.serve.mcp_server import mcp_server

    server = mcp_server(service, version=__version__, stdio=True)

    async def run() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(run)
