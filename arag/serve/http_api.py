"""The JSON API: Starlette routes over a `ToolService` (ROUTES; requests, answers and statuses:
docs/tools.md, "Tool server"). Bodies are always JSON; a call whose client left first is cancelled
and answered 499."""

from __future__ import annotations

import json
import logging
from typing import Any, Awaitable, TypeVar

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from arag.tools.hosting.admission import ClientGone, ServerBusy, ServerStopping, unless
from arag.serve.connections import CLIENT, SLOT
from arag.serve.guard import BUSY, STOPPING
from arag.serve.openapi import openapi_document
from arag.serve.sessions import check_session_id
from arag.serve.tool_service import CeilingError, ToolService, is_internal_failure
from arag.tools import DocumentToolSettings, ToolArgumentError
from arag.tools.base import ResultFormat

log = logging.getLogger("arag.serve")

SESSION_HEADER = "x-session-id"
DOCUMENT_SETTINGS_HEADER = "x-document-settings"
BOOLEANS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}
SESSION_PREFIX = "api:"
ROUTES = "GET /tools, POST /tools/<name>, GET /index, POST /chunks/titles, GET /openapi.json, GET /health, /mcp"
CLIENT_GONE = 499  # nginx's name for it: the client closed the connection before the answer

T = TypeVar("T")


async def _disconnected(request: Request) -> None:
    """Returns when the client disconnects (its body already read: the next message is that)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T:
    """`work`'s result, or ClientGone (and `work` cancelled) if the client disconnects first."""
    return await unless(_disconnected(request), work)


def request_session(request: Request) -> str | None:
    session = request.headers.get(SESSION_HEADER) or request.query_params.get("session")
    return None if session is None else SESSION_PREFIX + check_session_id(session)


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
        raise ValueError(f"{DOCUMENT_SETTINGS_HEADER} header: nested too deeply") from None
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{DOCUMENT_SETTINGS_HEADER} header: {str(exc)[:300]}") from None


def request_full_text(request: Request) -> bool | None:
    value = request.query_params.get("full_text")
    if value is None:
        return None
    if value.lower() not in BOOLEANS:
        raise ValueError(f"full_text must be true or false, got {value[:40]!r}")
    return BOOLEANS[value.lower()]


def json_api_routes(service: ToolService, *, token: bool, version: str) -> list[Route]:
    openapi = openapi_document(service.tools, token=token, version=version)

    async def call_tool(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in service.tools:
            return JSONResponse({"error": f"unknown tool {name[:100]!r}; served tools: {', '.join(service.tools)}", "tools": list(service.tools)}, status_code=404)
        try:
            session, full_text = request_session(request), request_full_text(request)
            result_format = ResultFormat.from_params(request.query_params)
            tracker = service.tracker(session, request_document_settings(request))
        except CeilingError as exc:
            return JSONResponse({"error": f"{DOCUMENT_SETTINGS_HEADER} header: {exc}"}, status_code=400)
        except ValueError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        body = await request.body()
        try:
            call = service.call(name, body if body.strip() else b"{}", tracker=tracker, full_text=full_text, session_id=session, result_format=result_format, client=request.scope.get(CLIENT), caller=session or request.scope.get("client"), ticket=request.scope.get(SLOT))
            result, answer = await unless_disconnected(request, call)
        except ClientGone:
            log.info("POST /tools/%s: the client left before the answer (the call was cancelled)", name)
            return Response(status_code=CLIENT_GONE)
        except ServerStopping:
            return JSONResponse({"error": STOPPING}, status_code=503, headers={"Retry-After": "1", "Connection": "close"})
        except ServerBusy:
            return JSONResponse({"error": BUSY}, status_code=503, headers={"Retry-After": "1"})
        status = 200 if result.error is None else (500 if is_internal_failure(result) else 400)
        return Response(answer, status_code=status, media_type="application/json")

    async def chunk_titles(request: Request) -> JSONResponse:
        try:
            args: Any = await request.json()
        except (ValueError, RecursionError) as exc:
            return JSONResponse({"error": f"the body is not valid JSON ({str(exc)[:200]})"}, status_code=400)
        if not isinstance(args, dict) or set(args) != {"chunk_ids"}:
            return JSONResponse({"error": 'the body must be {"chunk_ids": [...]}'}, status_code=400)
        try:
            return JSONResponse({"titles": await service.titles(args["chunk_ids"])})
        except ToolArgumentError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)

    def returning(body: Any) -> Any:
        """An endpoint answering `body` as JSON (a callable: called for each request)."""

        async def endpoint(request: Request) -> JSONResponse:
            return JSONResponse(body() if callable(body) else body)

        return endpoint

    return [
        Route("/tools", returning(lambda: {"tools": service.schemas()}), methods=["GET"]),
        Route("/tools/{name}", call_tool, methods=["POST"]),
        Route("/index", returning(service.info), methods=["GET"]),
        Route("/chunks/titles", chunk_titles, methods=["POST"]),
        Route("/openapi.json", returning(openapi), methods=["GET"]),
        Route("/health", returning({"status": "ready"}), methods=["GET"]),
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
