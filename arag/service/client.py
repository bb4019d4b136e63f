"""`RemoteTools`: a served index (pipelines.serve, transport http) used like a local ToolContext.

    tools = RemoteTools("http://tools-host:8765", token=...)     # checks the server and its token now
    result = tools.call("keyword_search", {"keywords": ["Lothair II"]}, tracker=ReadTracker())

`call` has ToolContext.call's shape and answers the same `ToolResult` (the server runs the same
tools). The tracker's `session_id` names the episode to the server, which keeps chunk_read's
memory per session; the local tracker mirrors what was read. AgenticRAG's `DocumentSession` works
the same way: its settings travel with each call (X-Document-Settings), the server's session hands
out and resolves the reference ids, and the local session mirrors the ids a search answered (the
method cites them). Connections are pooled (one client
is shared by every thread of an evaluation worker); a connection that cannot be made is retried
with backoff, but a request that reached the server is never sent twice (chunk_read would mark a
chunk read twice). A server that cannot be reached, refuses the token or answers something other
than a tool result raises `ToolServerError`.

`open_tools(index_path, index_url)` picks a local ToolContext or a RemoteTools, so the agent's and
the evaluation's `index.url=http://host:port` switch is one line where they open the index.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Iterable

import httpx
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from arag.service.guard import TOKEN_ENV
from arag.tools.base import MAX_CHUNK_IDS, Hit, ToolResult, error_result
from arag.tools.documents import DocumentSession
from arag.tools.tracker import ReadTracker

if TYPE_CHECKING:
    from arag.tools import ToolContext

# Answers of POST /tools/<name> that carry a tool result (answered, bad arguments, tool failure).
TOOL_RESULT_STATUSES = (200, 400, 500)


class ToolServerError(RuntimeError):
    """The tool server could not be reached, or refused the request (not a tool's own error)."""


class RemoteTools:
    """url: the server's base URL (http://host:port); token: its bearer token (None: none sent);
    timeout_s: per request; retries: extra tries of a connection that cannot be made;
    max_connections: pooled connections (≥ the tool calls a worker runs at once);
    require_tools: tool names the server must offer (checked now, so a method's missing tool
    fails before its first episode)."""

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        timeout_s: float = 120.0,
        connect_timeout_s: float = 10.0,
        retries: int = 4,
        max_connections: int = 64,
        require_tools: Iterable[str] = (),
    ):
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"index.url must be an http:// or https:// URL of a tool server, got {url!r}")
        self.url = url.rstrip("/")
        self._retrying = Retrying(
            retry=retry_if_exception_type((httpx.ConnectError, httpx.ConnectTimeout)),
            stop=stop_after_attempt(1 + max(0, retries)),
            wait=wait_exponential_jitter(multiplier=0.5, max=8.0, jitter=0.5),
            reraise=True,
        )
        self._client = httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {token}"} if token else {},
            timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s),
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
        )
        try:
            self.info: dict[str, Any] = self._request("GET", "/index").json()
        except BaseException:
            self._client.close()
            raise
        self.tools: list[str] = list(self.info.get("tools") or [])
        missing = [t for t in require_tools if t not in self.tools]
        if missing:
            self._client.close()
            raise ToolServerError(f"the tool server at {self.url} does not serve {', '.join(missing)} (it serves {', '.join(self.tools)}; see serve.tools)")

    @property
    def fingerprint(self) -> str:
        return str(self.info["fingerprint"])

    # ---- ToolContext's interface -------------------------------------------------------------
    def call(self, tool: str, arguments: Any, *, tracker: ReadTracker | None = None, full_text: bool = False) -> ToolResult:
        """Run `tool` on the server. Bad arguments come back as the tool's error result, as locally."""
        try:
            body = request_body(arguments)
        except (TypeError, ValueError, RecursionError) as exc:
            return error_result(str(tool)[:100], f"arguments are not JSON-serialisable ({str(exc)[:200]})")
        headers = {"Content-Type": "application/json"}
        if tracker is not None:
            headers["X-Session-Id"] = tracker.session_id
        if isinstance(tracker, DocumentSession):
            headers["X-Document-Settings"] = json.dumps(tracker.settings.to_dict())
        response = self._request("POST", f"/tools/{tool}", content=body, headers=headers, params={"full_text": "true" if full_text else "false"}, expect=(*TOOL_RESULT_STATUSES, 404))
        if response.status_code == 404:
            return error_result(str(tool)[:100], f"unknown tool; available tools: {', '.join(self.tools)}")
        result = result_from_json(response.json())
        if tracker is not None and tool == "chunk_read":
            for hit in result.results:
                if not hit.already_read:
                    tracker.mark(hit.chunk_id)
        if isinstance(tracker, DocumentSession) and tool == "search" and result.error is None:
            tracker.mirror_search(result)
        return result

    def titles_of(self, chunk_ids: list[str]) -> dict[str, str]:
        """{chunk id: title} of the ids that exist (what the evaluation's evidence recall looks up)."""
        titles: dict[str, str] = {}
        for start in range(0, len(chunk_ids), MAX_CHUNK_IDS):
            batch = chunk_ids[start : start + MAX_CHUNK_IDS]
            titles.update(self._request("POST", "/chunks/titles", json={"chunk_ids": batch}).json()["titles"])
        return titles

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> "RemoteTools":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RemoteTools({self.url!r})"

    # ---- HTTP --------------------------------------------------------------------------------
    def _request(self, method: str, path: str, *, expect: tuple[int, ...] = (200,), **kwargs: Any) -> httpx.Response:
        try:
            response = self._retrying(self._client.request, method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ToolServerError(f"tool server {self.url}: {method} {path} failed ({type(exc).__name__}: {str(exc)[:200]})") from exc
        if response.status_code not in expect:
            raise ToolServerError(f"tool server {self.url}: {method} {path} answered {response.status_code}: {_error_message(response)}")
        return response


def request_body(arguments: Any) -> bytes:
    """The arguments as the JSON body the server parses as the local tool would: ASCII-escaped, so
    text the tool rejects (a lone surrogate) reaches it as such; JSON text that does not parse is
    sent as it is, for the tool's own error message."""
    if isinstance(arguments, bytes):
        return arguments
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            return arguments.encode("utf-8", "surrogatepass")
    return json.dumps(arguments).encode("ascii")


def _error_message(response: httpx.Response) -> str:
    try:
        return str(response.json().get("error"))[:500]
    except (ValueError, AttributeError):
        return response.text[:500]


def result_from_json(body: dict[str, Any]) -> ToolResult:
    """The ToolResult a served tool answered (the JSON API's body)."""
    return ToolResult(
        tool=body["tool"],
        text=body["text"],
        results=[Hit(**hit) for hit in body.get("results", [])],
        retrieved_tokens=int(body.get("retrieved_tokens", 0)),
        error=body.get("error"),
        details=dict(body.get("details") or {}),
    )


def open_tools(index_path: str | None = None, index_url: str | None = None, *, token_env: str | None = None, require_tools: Iterable[str] = ()) -> "ToolContext | RemoteTools":
    """A served index when `index_url` is given (its token read from the environment variable
    `token_env`, ARAG_SERVE_TOKEN by default), else the local index at `index_path`."""
    if index_url:
        return RemoteTools(str(index_url), token=os.environ.get(token_env or TOKEN_ENV) or None, require_tools=require_tools)
    if not index_path:
        raise ValueError("no index: give index.path=<dir> or index.url=http://host:port")
    from arag.tools import ToolContext

    return ToolContext(str(index_path))
