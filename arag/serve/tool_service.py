"""The tools of one open index as a server offers them: which tools, run where, with whose tracker.

MCP and the JSON API both call `ToolService.call`, through the one tool call (arag.tools.hosting.calls):
the same answers as `ToolContext.call` in-process. Sessions stay here and travel with each call;
client-set document settings are checked against `serve.max_document_settings`, and an answer over
`serve.max_response_bytes` becomes an error saying so.
"""

from __future__ import annotations

import asyncio
import json
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Hashable

from arag.index.facts import manifest_facts
from arag.index.fingerprint import index_build_fingerprint
from arag.serve.sessions import SessionTrackers
from arag.tools import TOOL_SETS, TOOLS, DocumentSession, DocumentToolSettings, ReadTracker, ToolContext, ToolResult, ToolSpec
from arag.index.tokens import RETRIEVED_TOKENS_TOKENIZER
from arag.tools.arguments import check_arguments
from arag.tools.base import RESULT_FORMAT_PARAMS, ResultFormat, error_result
from arag.tools.chunk_read import chunk_titles
from arag.tools.failures import DIAGNOSTICS, is_internal_failure
from arag.tools.hosting.worker_pool import ToolWorkerPool

log = logging.getLogger("arag.serve")


def served_tool_names(tools: str | list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    """`serve.tools`: null (every tool), a method's tool set (e.g. arag_full), a tool name, or a list of names."""
    if tools is None:
        return tuple(TOOLS)
    names = TOOL_SETS.get(tools, (tools,)) if isinstance(tools, str) else tuple(str(t) for t in tools)
    unknown = [n for n in names if n not in TOOLS]
    if unknown or not names:
        raise ValueError(f"serve.tools: unknown tool(s) {', '.join(map(repr, unknown)) or '(none given)'}; tools: {', '.join(TOOLS)}; tool sets: {', '.join(TOOL_SETS)}")
    return tuple(dict.fromkeys(names))


class CeilingError(ValueError):
    """A client asked for more than the server's ceiling of a setting."""


def document_ceilings(values: dict[str, Any] | None) -> DocumentToolSettings:
    """`serve.max_document_settings`; keys not given (or null) keep the paper's values."""
    try:
        return DocumentToolSettings.from_dict({k: v for k, v in (values or {}).items() if v is not None})
    except (ValueError, TypeError) as exc:
        raise ValueError(f"serve.max_document_settings: {exc}") from None


def check_ceilings(settings: DocumentToolSettings, ceilings: DocumentToolSettings) -> None:
    for name, limit in ceilings.to_dict().items():
        value = getattr(settings, name)
        if not isinstance(limit, bool) and value > limit:
            raise CeilingError(f"{name}={value} is over this server's ceiling of {limit} (serve.max_document_settings.{name})")


def result_json(result: ToolResult) -> dict[str, Any]:
    """What a client gets: `python -m arag.tools ... --json`'s result plus `text`; tracebacks stay in the log."""
    body = result.to_json()
    body["details"] = {k: v for k, v in body["details"].items() if k != DIAGNOSTICS}
    body["text"] = result.text
    return body


class ToolService:
    """full_text: the default for calls that do not say (MCP calls never do); the other arguments are
    the `serve.*` settings of the same names (docs/configuration.md)."""

    def __init__(self, ctx: ToolContext, *, sessions: SessionTrackers, tools: tuple[str, ...] = tuple(TOOLS), full_text: bool = False,
                 threads: int = 16, workers: ToolWorkerPool | None = None, ceilings: DocumentToolSettings | None = None,
                 max_response_bytes: int = 4 * 2**20, max_connections: int | None = None):
        if max_response_bytes < 1024:
            raise ValueError(f"serve.max_response_bytes must be at least 1024, got {max_response_bytes}")
        if threads < 1:
            raise ValueError(f"serve.threads must be at least 1, got {threads}")
        self.ctx = ctx
        self.workers = workers  # tool calls run there when given (ctx still answers titles and info)
        self.sessions = sessions
        # Their texts describe this index's chunk ids, as the agent's do (GET /tools, MCP's list).
        self.tools: dict[str, ToolSpec] = {name: TOOLS[name].for_index(ctx.chunk_ids) for name in tools}
        self.full_text = full_text
        self.ceilings = ceilings or DocumentToolSettings()
        self.max_response_bytes = max_response_bytes
        self.max_connections = max_connections  # serve.max_connections, told to clients (GET /index)
        self.host = workers if workers is not None else ctx
        self.host.admit(workers.workers if workers is not None else threads)
        # Calls beyond the threads (or workers) queue here, where a stopping server can answer them.
        self.gate = self.host.gate

    def schemas(self) -> list[dict[str, Any]]:
        return [spec.schema() for spec in self.tools.values()]

    def tracker(self, session_id: str | None, document_settings: DocumentToolSettings | None = None) -> ReadTracker | None:
        """The session's tracker (None without a session: no memory across calls). document_settings,
        the calling method's, are kept by the session from then on; over a ceiling: CeilingError."""
        if document_settings is not None:
            check_ceilings(document_settings, self.ceilings)
        if session_id is None:
            return None if document_settings is None else DocumentSession(settings=document_settings)
        session = self.sessions.get(session_id)
        if document_settings is not None:
            session.settings = document_settings
        return session

    async def call(self, tool: str, arguments: Any, *, tracker: ReadTracker | None, full_text: bool | None = None, session_id: str | None = None, result_format: ResultFormat | None = None, client: Hashable = None, caller: Hashable = None, ticket: Any = None) -> tuple[ToolResult, bytes]:
        """A served tool's result and its encoded `result_json`. `arguments`: a dict, or the raw JSON
        text, for the tool's own error message; client, caller, ticket: as CallGate.turn takes them."""
        result = await self._run(tool, arguments, tracker=tracker, full_text=full_text, result_format=result_format, client=client, caller=caller, ticket=ticket)
        if session_id is not None:
            self.sessions.settle(session_id)
        body = json.dumps(result_json(result), ensure_ascii=False).encode("utf-8")
        if len(body) > self.max_response_bytes:
            result = error_result(tool, f"the answer is {len(body)} bytes, over this server's limit of {self.max_response_bytes} bytes (serve.max_response_bytes); ask for fewer or narrower results")
            body = json.dumps(result_json(result), ensure_ascii=False).encode("utf-8")
        return result, body

    async def _run(self, tool: str, arguments: Any, *, tracker: ReadTracker | None, full_text: bool | None, result_format: ResultFormat | None, client: Hashable = None, caller: Hashable = None, ticket: Any = None) -> ToolResult:
        # The step where a call joins the gate's queue (tests.serve.slow_server notes it here).
        if tool not in self.tools:
            raise KeyError(tool)
        full_text = self.full_text if full_text is None else full_text
        result = await self.host.acall(tool, arguments, tracker=tracker, full_text=full_text, result_format=result_format, client=client, caller=caller, ticket=ticket)
        if is_internal_failure(result):
            log.error("%s failed: %s\n%s", tool, result.error, result.details[DIAGNOSTICS])
        return result

    async def titles(self, chunk_ids: Any) -> dict[str, str]:
        """{chunk id: title} for up to 50 ids (as chunk_read takes); raises ToolArgumentError."""
        ids = check_arguments("chunk_read", TOOLS["chunk_read"].validator(), {"chunk_ids": chunk_ids})["chunk_ids"]
        return await asyncio.to_thread(chunk_titles, self.ctx, ids)

    def preload(self) -> None:
        """Load the query encoder (in every worker) before serving: the first semantic call is then no slower."""
        if not any(spec.encodes_queries for spec in self.tools.values()):
            return
        warm = next((spec for spec in self.tools.values() if spec.warm_up is not None), None)
        if self.workers is None:
            try:
                self.ctx.encode_query("warm start")
            except Exception as exc:
                raise RuntimeError(f"serve.preload: the query encoder did not load ({type(exc).__name__}: {exc}); serve.preload=false starts without it") from None
            return
        if warm is None:  # no served tool states a warm-up call: the first call loads the encoder
            return
        # One call per worker at once: each holds its worker until it answers, so every worker loads.
        with ThreadPoolExecutor(max_workers=self.workers.workers) as pool:
            results = list(pool.map(lambda _: self.workers.call(warm.name, dict(warm.warm_up)), range(self.workers.workers)))
        failed = [r.error for r in results if r.error is not None]
        if failed:
            raise RuntimeError(f"serve.preload: a worker could not load the query encoder: {failed[0]}")

    def info(self) -> dict[str, Any]:
        """What a remote client checks before use: the index's identity and the tools offered."""
        index = self.ctx.index
        return {
            "fingerprint": index_build_fingerprint(index.root),
            "chunk_ids": self.ctx.chunk_ids.to_json(),
            "num_chunks": index.manifest.get("num_chunks"),
            "num_sentences": index.manifest.get("num_sentences"),
            "embedding_model": index.manifest.get("embedding", {}).get("model"),
            # the embedder (query instruction, precision), chunking, sentence splitter and vector search as served
            # (the tools' overrides applied), for the protocol card of a run against it
            "index_facts": {**manifest_facts(index.manifest), "vector_search": self.ctx.vectors.search_fact()},
            # search settings that change answers from the index's own: a client's run id includes them
            "search_overrides": self.ctx.vectors.search_overrides(),
            "tools": list(self.tools),
            "full_text": self.full_text,
            # A client checks these: its retrieved tokens and its result formats must be counted and shown here as it would.
            "retrieved_tokens_tokenizer": RETRIEVED_TOKENS_TOKENIZER,
            "result_format_params": list(RESULT_FORMAT_PARAMS),
            "workers": self.workers.workers if self.workers is not None else 1,
            "max_connections": self.max_connections,
        }

    def close(self) -> None:
        if self.workers is not None:
            self.workers.close()
