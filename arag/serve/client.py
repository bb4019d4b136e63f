"""`RemoteTools`: a served index (pipelines.serve, http) as a `ToolCalls`, like a local ToolContext.

The server keeps each episode's state under the tracker's `session_id`; the local tracker follows the
results. A failed connection or a request turned away before a tool ran (429, 502, 503) is retried with
backoff; one that reached a tool is never sent twice (chunk_read would mark a chunk read twice).
Answers other than 200, 400 and 413 raise `ToolServerError` (docs/tools.md, "A served index ...").
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Iterable
from urllib.parse import urlsplit

import httpx
from tenacity import Retrying, retry_if_exception_type, retry_if_result, stop_after_attempt, wait_exponential_jitter

from arag.config.schemas import IndexSource
from arag.index.chunk_ids import ChunkIdFormat
from arag.index.tokens import RETRIEVED_TOKENS_TOKENIZER
from arag.serve.guard import CLIENT_KEEPALIVE_S, TOKEN_ENV
from arag.tools.base import MAX_CHUNK_IDS, RESULT_FORMAT_PARAMS, Hit, ResultFormat, ToolResult, error_result
from arag.tools.documents import DocumentSession
from arag.tools.failures import UNKNOWN_TOOL, ToolInfrastructureError
from arag.tools.hosting.calls import ToolCalls
from arag.tools.registry import TOOLS
from arag.tools.tracker import ReadTracker

if TYPE_CHECKING:
    from arag.tools import ToolContext

# Answers of POST /tools/<name> that the model reads: the tool's answer, its refusal of the arguments.
MODEL_STATUSES = (200, 400)
# Answers that turn a request away before any tool ran (rate limit, a proxy without its server, an
# overloaded server): safe to send again, so retried like a connection that could not be made.
RETRIED_STATUSES = (429, 502, 503)
# What failures name instead of the server's address: the run's records stay free of internal addresses.
URL_SETTING = "index.url"


DEFAULT_CONNECTIONS = 64  # a client's pooled connections unless it says how many calls it makes at once
DEFAULT_TIMEOUT_S = IndexSource.timeout_s  # seconds a call may take, time queued at a busy server included (index.timeout_s)


class ToolServerError(ToolInfrastructureError):
    """The tool server could not be reached, or failed or refused a request (not a tool's refusal of its arguments)."""


def same_counting(info: dict[str, Any]) -> str | None:
    """What would make a server's answers differ from a local call's (GET /index's facts), or None."""
    served = info.get("retrieved_tokens_tokenizer")
    if served != RETRIEVED_TOKENS_TOKENIZER:
        return f"counts retrieved tokens with {served or 'an older tokenizer (cl100k_base)'}, not {RETRIEVED_TOKENS_TOKENIZER}"
    ignored = [p for p in RESULT_FORMAT_PARAMS if p not in (info.get("result_format_params") or [])]
    return f"does not take the result-format parameter(s) {', '.join(ignored)}" if ignored else None


def served_run_fingerprint(info: dict[str, Any]) -> str:
    """A served index's fingerprint (GET /index), with the server's search overrides (tools.nprobe,
    rerank, probe_slices) where they change answers: what a run's identity holds for the index
    (arag.index.facts.search_overrides)."""
    overrides = info.get("search_overrides") or {}
    return str(info["fingerprint"]) + ("+search-" + ",".join(f"{k}={v}" for k, v in sorted(overrides.items())) if overrides else "")


class RemoteTools(ToolCalls):
    """url: http://host:port; token: its bearer token (None: none sent); retries: extra tries of a
    connection that cannot be made; max_connections: pooled connections, and calls at once through
    `acall`; require_tools: tool names the server must offer (checked now, before any episode)."""

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        connect_timeout_s: float = 10.0,
        retries: int = 4,
        backoff_s: float = 0.5,
        max_connections: int = DEFAULT_CONNECTIONS,
        require_tools: Iterable[str] = (),
        transport: httpx.BaseTransport | None = None,  # tests
    ):
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"index.url must be an http:// or https:// URL of a tool server, got {url!r}")
        self.url = url.rstrip("/")
        self.admit(max_connections)  # acall: one pooled connection per call at once
        self.attempts = 1 + max(0, retries)
        self._retrying = Retrying(
            retry=retry_if_exception_type((httpx.ConnectError, httpx.ConnectTimeout)) | retry_if_result(lambda r: r.status_code in RETRIED_STATUSES),
            stop=stop_after_attempt(self.attempts),
            wait=wait_exponential_jitter(multiplier=backoff_s, max=8.0, jitter=backoff_s),
            retry_error_callback=lambda state: state.outcome.result(),  # the last answer, or its exception raised
        )
        self._client = httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {token}"} if token else {},
            timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s),
            # Idle connections are dropped before the server drops them (arag.serve.guard).
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections, keepalive_expiry=CLIENT_KEEPALIVE_S),
            transport=transport,
        )
        try:
            self.info: dict[str, Any] = self._request("GET", "/index", where=self.url).json()
            self.tools: list[str] = list(self.info.get("tools") or [])
            missing = [t for t in require_tools if t not in self.tools]
            if missing:
                raise ToolServerError(f"the tool server at {self.url} does not serve {', '.join(missing)} (it serves {', '.join(self.tools)}; see serve.tools)")
            unlike = same_counting(self.info)
            if unlike:
                raise ToolServerError(f"the tool server at {self.url} {unlike}: run a server of this arag version")
        except BaseException:
            self._client.close()
            raise

    @property
    def fingerprint(self) -> str:
        return str(self.info["fingerprint"])

    @property
    def index_facts(self) -> dict[str, Any] | None:
        """The served index's facts (arag.index.facts); an older server names its embedder only."""
        given = self.info.get("index_facts")
        if isinstance(given, dict):
            return dict(given)
        return {"embedder": self.info["embedding_model"]} if self.info.get("embedding_model") else None

    @property
    def chunk_ids(self) -> ChunkIdFormat:
        """The served index's chunk-id form and example, as a local ToolContext gives them."""
        given = self.info.get("chunk_ids")
        if not isinstance(given, dict):
            raise ToolServerError(f"the tool server at {self.url} does not say what its chunk ids look like (GET /index has no chunk_ids): run a server of this arag version")
        return ChunkIdFormat.from_json(given)

    def call(self, tool: str, arguments: Any, *, tracker: ReadTracker | None = None, full_text: bool = False, result_format: ResultFormat | None = None) -> ToolResult:
        try:
            body = request_body(arguments)
        except (TypeError, ValueError, RecursionError) as exc:
            return error_result(str(tool)[:100], f"arguments are not JSON-serialisable ({str(exc)[:200]})")
        headers = {"Content-Type": "application/json"}
        if tracker is not None:
            headers["X-Session-Id"] = tracker.session_id
        if isinstance(tracker, DocumentSession):
            headers["X-Document-Settings"] = json.dumps(tracker.settings.to_dict())
        path = f"/tools/{tool}"
        response = self._request("POST", path, content=body, headers=headers, params={"full_text": "true" if full_text else "false", **(result_format or ResultFormat()).to_params()}, expect=(*MODEL_STATUSES, 404, 413, 500))
        if response.status_code == 404:
            return error_result(str(tool)[:100], f"unknown tool; available tools: {', '.join(self.tools)}", UNKNOWN_TOOL)
        if response.status_code == 413:  # the model's arguments were too large: its own refusal
            return error_result(str(tool)[:100], self._scrub(_error_message(response)))
        try:
            result = result_from_json(response.json())
        except (ValueError, KeyError, TypeError) as exc:
            raise ToolServerError(f"tool server ({URL_SETTING}): POST {path} answered {response.status_code} without a tool result ({type(exc).__name__}: {self._scrub(str(exc))[:200]})") from None
        if response.status_code == 500:
            raise ToolServerError(f"tool server ({URL_SETTING}): {str(tool)[:100]} failed on the server: {self._scrub(str(result.error))[:500]}")
        result.text, result.error = self._scrub(result.text), None if result.error is None else self._scrub(result.error)
        if tool in TOOLS and tracker is not None:
            tracker.follow(TOOLS[tool], result)
        return result

    def titles_of(self, chunk_ids: list[str]) -> dict[str, str]:
        """{chunk id: title} of the ids that exist (what the evaluation's evidence recall looks up)."""
        titles: dict[str, str] = {}
        for start in range(0, len(chunk_ids), MAX_CHUNK_IDS):
            batch = chunk_ids[start : start + MAX_CHUNK_IDS]
            titles.update(self._request("POST", "/chunks/titles", json={"chunk_ids": batch}).json()["titles"])
        return titles

    def close(self) -> None:
        super().close()
        self._client.close()

    def __repr__(self) -> str:
        return f"RemoteTools({self.url!r})"

    def _request(self, method: str, path: str, *, expect: tuple[int, ...] = (200,), where: str = f"({URL_SETTING})", **kwargs: Any) -> httpx.Response:
        """The server's answer with a status in `expect`, else ToolServerError naming the server `where`."""
        try:
            response = self._retrying(self._client.request, method, path, **kwargs)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            attempts = self._retrying.statistics["attempt_number"]  # this thread's call (tenacity keeps them per thread)
            raise ToolServerError(f"tool server {where} unreachable after {attempts} attempt(s): {method} {path} ({type(exc).__name__}: {self._scrub(str(exc))[:200]})") from exc
        except httpx.HTTPError as exc:  # reached the server, which did not answer: not sent again
            raise ToolServerError(f"tool server {where}: {method} {path} failed ({type(exc).__name__}: {self._scrub(str(exc))[:200]})") from exc
        if response.status_code not in expect:
            after = f" after {self._retrying.statistics['attempt_number']} attempt(s)" if response.status_code in RETRIED_STATUSES else ""
            raise ToolServerError(f"tool server {where}: {method} {path} answered {response.status_code}{after}: {self._scrub(_error_message(response))}")
        return response

    def _scrub(self, text: str) -> str:
        """`text` without the server's address (URL, then host:port): no internal address reaches a model or record."""
        for address in (self.url, urlsplit(self.url).netloc):
            text = text.replace(address, "the tool server")
        return text


def request_body(arguments: Any) -> bytes:
    """The arguments as a JSON body, ASCII-escaped so that a lone surrogate reaches the tool as such; JSON
    text that does not parse is sent as it is, for the tool's own error message."""
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


def index_timeout(value: Any) -> float:
    """`index.timeout_s` as seconds: a number > 0 (None: the client's default), else a ValueError naming it."""
    if value is None:
        return DEFAULT_TIMEOUT_S
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"index.timeout_s must be a number of seconds > 0, not {value!r}")
    return float(value)


def open_tools(index_path: str | None = None, index_url: str | None = None, *, token_env: str | None = None, require_tools: Iterable[str] = (),
               calls_at_once: int | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> "ToolContext | RemoteTools":
    """A served index when `index_url` is given (its token read from the environment variable
    `token_env`, ARAG_SERVE_TOKEN by default; `calls_at_once`: the tool calls this process may make
    at once, one connection each; `timeout_s`: per call), else the local index at `index_path`."""
    if index_url:
        pooled = max(DEFAULT_CONNECTIONS, int(calls_at_once or 0))
        return RemoteTools(str(index_url), token=os.environ.get(token_env or TOKEN_ENV) or None, require_tools=require_tools, max_connections=pooled, timeout_s=timeout_s)
    if not index_path:
        raise ValueError("no index: give index.path=<dir> or index.url=http://host:port")
    from arag.tools import ToolContext

    return ToolContext(str(index_path))
