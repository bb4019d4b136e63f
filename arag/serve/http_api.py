"""The JSON API: Starlette routes over a `ToolService`.

    GET  /tools               {"tools": [function schema, ...]}
    POST /tools/<name>        body: the tool's JSON arguments → the tool result (as `python -m
                              arag.tools ... --json`) plus "text", the agent-facing answer;
                              X-Session-Id header or ?session= picks the read tracker,
                              X-Document-Settings (JSON) the document tools' settings,
                              ?full_text=true|false the snippet level
    GET  /index               the served index's fingerprint, sizes, chunk-id form and facts (embedder, chunking, splitter), the server's max_connections (remote clients check them)
    POST /chunks/titles       {"chunk_ids": [...]} → {"titles": {...}} (evaluation's evidence recall)
    GET  /openapi.json        the OpenAPI document
    GET  /health              {"status": "ready"} once the server serves (no token asked, no index content)

A call whose client disconnects before its answer (a client that timed out, an evaluation that
was stopped) is cancelled: one still waiting for a tool worker never runs, so a backlog left by
clients that gave up does not hold the workers from the calls behind it. Its status is 499 (nobody
reads it). A call still queued when the server stops gets a 503 (it did not run: send it again).

Statuses: 200 answered, 400 bad arguments (the body is the tool's error result) or a setting over
the server's ceiling, 404 unknown tool (with the list) or path, 405 wrong method, 500 the tool
failed on its own. Bodies are always JSON, never a traceback; no redirects.

Sessions of the JSON API live under `api:<id>`, those of MCP under `mcp:<id>`, so no caller of
one front end can name a session of the other.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Awaitable, TypeVar

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from arag.serve.admission import ClientGone, ServerBusy, ServerStopping, unless
from arag.serve.connections import CLIENT, SLOT
from arag.serve.guard import BUSY, STOPPING
from arag.serve.openapi import openapi_document
from arag.serve.sessions import SessionIdError, check_session_id
from arag.serve.tool_service import CeilingError, ToolService, is_internal_failure
from arag.tools import DocumentToolSettings, ToolArgumentError
from arag.tools.base import ResultFormat

log = logging.getLogger("arag.serve")

SESSION_HEADER = "x-session-id"
DOCUMENT_SETTINGS_HEADER = "x-document-settings"
TRUE_WORDS = {"1", "true", "yes", "on"}
FALSE_WORDS = {"0", "false", "no", "off"}
SESSION_PREFIX = "api:"
ROUTES = "GET /tools, POST /tools/<name>, GET /index, POST /chunks/titles, GET /openapi.json, GET /health, /mcp"


T = TypeVar("T")
CLIENT_GONE = 499  # nginx's name for it: the client closed the connection before the answer


class BadRequest(ValueError):
    pass


async def _disconnected(request: Request) -> None:
    """Returns when the client disconnects (its body already read: the next message is that)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T:
    """`work`'s result, or ClientGone (and `work` cancelled) if the client disconnects first."""
    return await unless(_disconnected(request), work)


def stopping_response() -> JSONResponse:
    return JSONResponse({"error": STOPPING}, status_code=503, headers={"Retry-After": "1", "Connection": "close"})


def request_session(request: Request) -> str | None:
    session = request.headers.get(SESSION_HEADER) or request.query_params.get("session")
    if session is None:
        return None
    try:
        return SESSION_PREFIX + check_session_id(session)
    except SessionIdError as exc:
        raise BadRequest(str(exc)) from None


def request_document_settings(request: Request) -> DocumentToolSettings | None:
    value = request.headers.get(DOCUMENT_SETTINGS_HEADER)
    if value is None:
        return None
    try:
        values = json.loads(value)
        if not isinstance(values, dict):
            raise ValueError(f"expected a JSON object, got {type(values).__name__}")
        return DocumentToolSettings.from_dict(values)
    except RecursionError:
        raise BadRequest(f"{DOCUMENT_SETTINGS_HEADER} header: nested too deeply") from None
    except (ValueError, TypeError) as exc:
        raise BadRequest(f"{DOCUMENT_SETTINGS_HEADER} header: {str(exc)[:300]}") from None


def request_full_text(request: Request) -> bool | None:
    value = request.query_params.get("full_text")
    if value is None:
        return None
    if value.lower() in TRUE_WORDS:
        return True
    if value.lower() in FALSE_WORDS:
        return False
    raise BadRequest(f"full_text must be true or false, got {value[:40]!r}")


def json_api_routes(service: ToolService, *, token: bool, version: str) -> list[Route]:
    openapi = openapi_document(service.tools, token=token, version=version)

    async def list_tools(request: Request) -> JSONResponse:
        return JSONResponse({"tools": service.schemas()})

    async def call_tool(request: Request) -> JSONResponse:
        name = request.path_params["name"]
        if name not in service.tools:
            return JSONResponse({"error": f"unknown tool {name[:100]!r}; served tools: {', '.join(service.tools)}", "tools": list(service.tools)}, status_code=404)
        try:
            session, full_text = request_session(request), request_full_text(request)
            result_format = ResultFormat.from_params(request.query_params)
            tracker = service.tracker(session, request_document_settings(request))
        except CeilingError as exc:
            return JSONResponse({"error": f"{DOCUMENT_SETTINGS_HEADER} header: {exc}"}, status_code=400)
        except (BadRequest, ValueError) as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        body = await request.body()
        try:
            call = service.call(name, body if body.strip() else b"{}", tracker=tracker, full_text=full_text, session_id=session, result_format=result_format, client=request.scope.get(CLIENT), caller=session or request.scope.get("client"), ticket=request.scope.get(SLOT))
            result, answer = await unless_disconnected(request, call)
        except ClientGone:
            log.info("POST /tools/%s: the client left before the answer (the call was cancelled)", name)
            return Response(status_code=CLIENT_GONE)
        except ServerStopping:
            return stopping_response()
        except ServerBusy:
            return JSONResponse({"error": BUSY}, status_code=503, headers={"Retry-After": "1"})
        status = 200 if result.error is None else (500 if is_internal_failure(result) else 400)
        return Response(answer, status_code=status, media_type="application/json")

    async def index_info(request: Request) -> JSONResponse:
        return JSONResponse(service.info())

    async def chunk_titles(request: Request) -> JSONResponse:
        try:
            args: Any = await request.json()
        except (ValueError, RecursionError) as exc:
            return JSONResponse({"error": f"the body is not valid JSON ({str(exc)[:200]})"}, status_code=400)
        if not isinstance(args, dict) or set(args) != {"chunk_ids"}:
            return JSONResponse({"error": 'the body must be {"chunk_ids": [...]}'}, status_code=400)
        try:
            titles = await service.titles(args["chunk_ids"])
        except ToolArgumentError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return JSONResponse({"titles": titles})

    async def openapi_json(request: Request) -> JSONResponse:
        return JSONResponse(openapi)

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ready"})

    return [
        Route("/tools", list_tools, methods=["GET"]),
        Route("/tools/{name}", call_tool, methods=["POST"]),
        Route("/index", index_info, methods=["GET"]),
        Route("/chunks/titles", chunk_titles, methods=["POST"]),
        Route("/openapi.json", openapi_json, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
    ]


async def http_error(request: Request, exc: Exception) -> JSONResponse:
    """Starlette's own 404 and 405 (no route, wrong method), as JSON."""
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        message = f"no route {request.method} {request.url.path[:200]!r}; routes: {ROUTES}"
    elif exc.status_code == 405:
        message = f"method {request.method} is not allowed on {request.url.path[:200]!r} (allowed: {(exc.headers or {}).get('Allow', '?')})"
    else:
        message = str(exc.detail)
    return JSONResponse({"error": message}, status_code=exc.status_code, headers=exc.headers)


async def server_error(request: Request, exc: Exception) -> JSONResponse:
    """An exception escaping a route: JSON, never a traceback (the guard logs it)."""
    return JSONResponse({"error": "the server failed on this request (details in its log)"}, status_code=500)
