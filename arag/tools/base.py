"""What every tool shares: the result record, the result format, and the tool spec.

A tool call never raises: a refusal of its arguments (checked against its schema, arag.tools.arguments)
is a result whose `error` is set and whose `text` tells the agent what was wrong; a tool's own failure
is a result with diagnostics, on which an episode fails (arag.tools.failures) and a server answers 500.
"""

from __future__ import annotations

import copy
import traceback
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, Mapping, Protocol

import numpy as np
from jsonschema import Draft202012Validator

from arag.index.chunk_ids import ChunkIdFormat
from arag.tools.arguments import Arguments, ToolArgumentError, check_arguments
from arag.tools.failures import DIAGNOSTICS, EMPTY, FAILURE, INFRASTRUCTURE, REFUSED, UNKNOWN_IDS
from arag.tools.index_cache import ChunkStore
from arag.tools.tracker import ReadTracker
from arag.tools.vector_search import VectorSearch

# The paper caps every search at 20 results.
MAX_TOP_K = 20
DEFAULT_TOP_K = 5
# Limits that keep a malformed call cheap; far above anything a sensible agent sends. The tools'
# parameter schemas state them too (maxItems, maxLength), so a grammar-constrained model (llama.cpp,
# vLLM) cannot write an argument the tool would refuse, nor loop inside one string until its reply is cut.
MAX_KEYWORDS = 32
MAX_KEYWORD_CHARS = 200
MAX_QUERY_CHARS = 1000  # ~200 words; the default embedder reads 256 word pieces of it
MAX_CHUNK_IDS = 50
MAX_CHUNK_ID_CHARS = 1000


class UnknownIdsError(ToolArgumentError):
    """A refusal of arguments naming an id (a reference id) that does not exist: failure kind UNKNOWN_IDS."""


@dataclass
class Hit:
    """One chunk in a tool's structured results: `snippets`, the pieces of its text the agent was shown;
    `score`, the keyword score (an integer, as float), the best sentence's cosine, or None (chunk_read)."""

    chunk_id: str
    score: float | None = None
    snippets: list[str] = field(default_factory=list)
    title: str | None = None
    doc_id: str | None = None
    # chunk_read only: neighbours in the same document and whether the text was withheld.
    prev_id: str | None = None
    next_id: str | None = None
    already_read: bool = False

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass
class ToolResult:
    """The answer of one tool call: `text`, exactly what the agent sees; `retrieved_tokens`, o200k_base
    tokens of the retrieved text only (arag.tools.render); `error`, None or the message (also in `text`);
    `details`, tool-specific facts ({"unknown_ids": [...]}) and the failure kind (arag.tools.failures)."""

    tool: str
    text: str
    results: list[Hit] = field(default_factory=list)
    retrieved_tokens: int = 0
    error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def failure(self) -> str | None:
        """Why the model cannot use this result (arag.tools.failures.FAILURE_KINDS); None if it can."""
        return self.details.get(FAILURE)

    def to_json(self) -> dict[str, Any]:
        fields = {k: v for k, v in vars(self).items() if k != "text"}
        return {**fields, "results": [h.to_json() for h in self.results]}


def error_result(tool: str, message: str, failure: str = REFUSED) -> ToolResult:
    return ToolResult(tool=tool, text=f"Error in {tool}: {message}", error=message, details={FAILURE: failure})


class ToolHost(Protocol):
    """What a tool uses of the open index (ToolContext), so the tools and the context do not import each other."""

    store: ChunkStore
    vectors: VectorSearch
    accelerate: bool

    def encode_query(self, query: str) -> np.ndarray: ...


ToolFn = Callable[[ToolHost, dict[str, Any], "ToolOptions"], ToolResult]


def require_vectors(ctx: ToolHost, what: str) -> None:
    mode = ctx.store.index.vectors_mode
    if mode != "embedded":
        raise ToolArgumentError(
            f"{what} is not available: this index was built in {mode} mode (manifest vectors: {mode}), without "
            "sentence vectors; search it with keyword_search, or build it with embeddings to search by meaning"
        )


# The authors' keyword_search keeps the first 5 matching sentences of a chunk (src/arag/tools/keyword_search.py).
SNIPPETS_PER_CHUNK = 5


@dataclass(frozen=True)
class ResultFormat:
    """How the A-RAG tools show their results (a method's settings of the same names; docs/tools.md,
    "What the agent reads"); the defaults give the authors' tools' results. snippets_per_chunk None or 0: all."""

    snippets_per_chunk: int | None = SNIPPETS_PER_CHUNK
    result_titles: bool = False

    def __post_init__(self) -> None:
        cap = self.snippets_per_chunk
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 0):
            raise ValueError(f"snippets_per_chunk must be a whole number ≥ 0 or null (all), got {cap!r}")
        if not isinstance(self.result_titles, bool):
            raise ValueError(f"result_titles must be true or false, got {self.result_titles!r}")

    def cap(self, sentences: list[str]) -> list[str]:
        return sentences[: self.snippets_per_chunk] if self.snippets_per_chunk else sentences

    def to_params(self) -> dict[str, str]:
        """As the query parameters of a served call (POST /tools/<name>, RESULT_FORMAT_PARAMS)."""
        cap = self.snippets_per_chunk
        return {"snippets_per_chunk": str(cap) if cap else "all", "result_titles": "true" if self.result_titles else "false"}

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> ResultFormat | None:
        """From a served call's query parameters; None when it gives none. A bad value: ValueError naming it."""
        if not any(name in params for name in RESULT_FORMAT_PARAMS):
            return None
        cap = params.get("snippets_per_chunk", str(SNIPPETS_PER_CHUNK))
        titles = params.get("result_titles", "false").lower()
        if cap.lower() not in ("all", "null") and not (cap.isdigit() and len(cap) <= 6):
            raise ValueError(f"snippets_per_chunk must be a whole number or all, got {cap[:40]!r}")
        if titles not in ("true", "false"):
            raise ValueError(f"result_titles must be true or false, got {titles[:40]!r}")
        return cls(snippets_per_chunk=int(cap) if cap.isdigit() else None, result_titles=titles == "true")


RESULT_FORMAT_PARAMS = ("snippets_per_chunk", "result_titles")


@dataclass(frozen=True)
class ToolOptions:
    """Per-method settings that are not the agent's to choose. full_text: searches return whole chunks
    (the paper's ablation without snippets); tracker: the episode's, None for no memory across calls."""

    full_text: bool = False
    tracker: ReadTracker | None = None
    result_format: ResultFormat = ResultFormat()


# How a tool's results count as evidence (arag.evaluation.evidence): READ, the whole text of every
# chunk in its results enters the context (the chunks count as read); SNIPPET, pieces of them (seen;
# read only for a method with `full_text`, whose searches return whole chunks); NOT_EVIDENCE, its
# results name no chunks of the collection (notes, bookkeeping).
READ = "read"
SNIPPET = "snippet"
NOT_EVIDENCE = "none"
EVIDENCE_KINDS = (READ, SNIPPET, NOT_EVIDENCE)


@dataclass(frozen=True)
class ToolSpec:
    """A tool: its name, the function schema the LLM sees, the code that runs it, and how its results
    count as evidence (one of EVIDENCE_KINDS). Registered under its name (arag.registry, kind "tool")."""

    name: str
    description: str
    parameters: dict[str, Any]
    fn: ToolFn
    evidence: str
    unit: str = "chunk"  # what its results are pieces of, as the agent's texts name it: "chunk", or "document" (AgenticRAG's tools)
    encodes_queries: bool = False  # embeds its query with the index's embedder (a tool server's warm start loads it)
    # Its calls mark the chunks they show as read in the episode's ReadTracker (a served index's client's too).
    tracks_reads: bool = False
    # The argument that takes chunk ids shown by earlier results (guard_rails.shown_chunk_ids_only).
    shown_ids_argument: str | None = None
    # A cheap call's arguments that load what the tool needs (its query encoder), before a server serves.
    warm_up: Mapping[str, Any] | None = None
    # (tracker, result) -> None: brings a client's tracker up to date with a served result, beyond its reads.
    mirror: Callable[[Any, ToolResult], None] | None = None
    # The ResultFormat settings (a method's settings of the same names) its result texts follow.
    result_settings: tuple[str, ...] = ()
    # A successful call replaces the conversation with the agent's notes (arag.agent.context): a
    # method that offers it manages its context instead of being cut off at the budget.
    compacts_context: bool = False
    # Its result text is one block per reference id ("[<ref id>] ..."), which a compaction removes one by one.
    ref_entries: bool = False
    # (function schema, DocumentToolSettings) -> None: narrows the schema, in place, to a method's
    # document-tool settings (the ablations' limits), so the model is told what the tool allows.
    fit_schema: Callable[[dict[str, Any], Any], None] | None = None
    # Argument -> schema keywords its values are checked against beyond the schema the model is
    # shown (which is part of a run's identity), e.g. {"notes": {"maxLength": 16000}}.
    ceilings: Mapping[str, Mapping[str, Any]] | None = None
    _validators: dict[Any, Draft202012Validator] = field(default_factory=dict, init=False, compare=False, repr=False)  # by document settings

    def __post_init__(self) -> None:
        if self.evidence not in EVIDENCE_KINDS:
            raise ValueError(f"tool {self.name}: evidence must be one of {', '.join(EVIDENCE_KINDS)}, got {self.evidence!r}")
        unknown = [s for s in self.result_settings if s not in RESULT_FORMAT_PARAMS]
        if unknown:
            raise ValueError(f"tool {self.name}: result_settings must be among {', '.join(RESULT_FORMAT_PARAMS)}, got {unknown[0]!r}")

    def schema(self, documents: Any = None) -> dict[str, Any]:
        """OpenAI-style function schema, narrowed to a method's DocumentToolSettings where the tool follows them."""
        schema = {"type": "function", "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}
        if documents is not None and self.fit_schema is not None:
            schema = copy.deepcopy(schema)
            self.fit_schema(schema["function"], documents)
        return schema

    def validator(self, documents: Any = None) -> Draft202012Validator:
        """What a call's arguments are checked against: the parameters the model is shown, plus `ceilings`."""
        if documents not in self._validators:
            parameters = copy.deepcopy(self.schema(documents)["function"]["parameters"])
            for name, limits in (self.ceilings or {}).items():
                parameters["properties"][name].update(limits)
            self._validators[documents] = Draft202012Validator(parameters)
        return self._validators[documents]

    def for_index(self, chunk_ids: ChunkIdFormat | None) -> ToolSpec:
        """This tool with its texts describing the chunk ids of an opened index (arag.index.chunk_ids)."""
        if chunk_ids is None:
            return self
        return replace(self, description=chunk_ids.fill(self.description), parameters=chunk_ids.fill_all(self.parameters))

    def call(self, ctx: ToolHost, arguments: Any, options: ToolOptions | None = None) -> ToolResult:
        options = options or ToolOptions()
        try:
            # A DocumentSession's settings narrow the schema the arguments are checked against.
            result = self.fn(ctx, check_arguments(self.name, self.validator(getattr(options.tracker, "settings", None)), arguments), options)
        except UnknownIdsError as exc:
            return error_result(self.name, str(exc), UNKNOWN_IDS)
        except ToolArgumentError as exc:
            return error_result(self.name, str(exc))
        except Exception as exc:  # a result, not a raise: a server sends it on; an agent's episode fails on it (arag.tools.failures)
            result = error_result(self.name, f"internal error ({type(exc).__name__}: {str(exc)[:300]})", INFRASTRUCTURE)
            result.details[DIAGNOSTICS] = traceback.format_exc(limit=8)
            return result
        if self.evidence != NOT_EVIDENCE and result.error is None and not result.results:
            result.details.setdefault(FAILURE, EMPTY)  # a search or find that matched nothing
        return result


def get_top_k(args: Arguments, details: dict[str, Any]) -> int:
    """`top_k` (a whole number ≥ 1, its schema says); above MAX_TOP_K it is capped, with a note."""
    value = int(args.get("top_k", DEFAULT_TOP_K))
    if value > MAX_TOP_K:
        details["top_k_capped_from"] = value if value < 10**12 else "a huge number"
        value = MAX_TOP_K
    return value
