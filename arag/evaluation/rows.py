"""One result row per episode (`EpisodeRow`) and the fixed Parquet schema every results file uses,
so DuckDB reads a whole results tree without merging schemas (docs/evaluation.md, "Results layout")."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import pyarrow as pa

from arag.tools.failures import FAILURE_KINDS
from arag.tools.registry import TOOLS

SCHEMA_VERSION = 5  # what each version added: docs/evaluation.md, "Results layout"
PASSAGE_RECALL_SCHEMA = 5  # the first whose Recall@k counts passages; older rows counted chunks (packed windows)
OK = "ok"
ROW_FAILED = "failed"  # EpisodeRow.status: the episode has no scored result (a rerun retries it)

# A calls_<tool> column per registered tool, in registration order, so files written with the same
# tools share a schema; any other name (a made-up tool, a method's retrieval record) is calls_other.
CALLS_OTHER = "calls_other"


def call_columns() -> list[str]:
    return [*(f"calls_{t}" for t in TOOLS), CALLS_OTHER]


# Tool errors get a column each per failure kind (arag.tools.failures.FAILURE_KINDS), beside their total.
ERROR_KIND_PREFIX = "tool_errors_"


def error_kind_columns() -> list[str]:
    return [f"{ERROR_KIND_PREFIX}{k}" for k in FAILURE_KINDS]


@dataclass
class EpisodeRow:
    run_id: str
    dataset: str
    question_id: str
    question: str
    gold_answers: list[str]
    supporting_titles: list[str]
    method: str
    model: str
    backend: str
    status: str = OK
    prediction: str | None = None
    failure: str | None = None
    attempt: int = 1  # 1 + earlier failed attempts of this question in this run
    protocol: str | None = None
    # swept settings
    max_steps: int | None = None
    token_budget: int | None = None
    reasoning_effort: str | None = None
    temperature: float | None = None
    settings: str = "{}"  # JSON: the run's identity settings (see arag.evaluation.run_settings)
    overrides: list[str] = field(default_factory=list)  # the command-line overrides of the run
    # what the agent did
    forced: bool = False
    forced_reason: str | None = None
    steps: int = 0
    invalid_replies: int = 0
    tool_calls: int = 0
    calls: dict[str, int] = field(default_factory=dict)  # calls per tool name; stored as the call_columns()
    tool_errors: int = 0  # calls whose result the model could not use (every kind below); these counts: arag.evaluation.episode_facts
    tool_error_kinds: dict[str, int] = field(default_factory=dict)  # tool errors per failure kind; stored as the error_kind_columns()
    repeated_calls: int = 0  # calls identical to an earlier call of the episode (arag.evaluation.episode_facts)
    retrieved_tokens: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    model_calls: int = 0
    # metrics
    contain_acc: float = 0.0  # the paper code's substring rule
    contain_acc_token: float = 0.0  # whole-token containment (stricter)
    exact_match: float = 0.0
    f1: float = 0.0
    llm_acc: float | None = None
    judge_status: str | None = None
    judge_error: str | None = None
    judge_reply: str | None = None
    evidence_supporting: int = 0
    evidence_seen: int = 0
    evidence_read: int = 0
    evidence_recall_seen: float | None = None
    evidence_recall_read: float | None = None
    evidence_recall_at_2: float | None = None  # Recall@2 over the passages the chunks retrieved cover, in retrieval order
    evidence_recall_at_5: float | None = None
    refused_calls: int = 0  # extra tool calls of a reply, not run (one tool per step)
    truncated_observations: int = 0  # tool results cut to fit the context window
    answer_cut_off: bool = False  # the answer stopped at the reply-length limit (scored as far as it went)
    forced_summaries: int = 0  # AgenticRAG: summaries the loop asked for at the context budget
    context_warnings: int = 0  # AgenticRAG: warnings at 90% of the context budget
    citation_recall_at_1: float | None = None  # methods that cite: Recall@k of the ranked cited documents
    citation_recall_at_3: float | None = None
    # time and place
    wall_s: float = 0.0
    llm_s: float = 0.0
    tool_s: float = 0.0
    judge_s: float = 0.0
    worker: str | None = None  # Ray node id of the worker that ran it
    finished_at: dt.datetime | None = None
    trajectory: str = "{}"  # JSON: the whole episode record (arag.agent.episode.Episode.to_json) and chunk_titles, {chunk id: title} of the chunks seen
    schema_version: int = SCHEMA_VERSION

    def call_counts(self) -> dict[str, int]:
        calls = dict(self.__dict__.get("calls") or {})
        counts = {f"calls_{t}": calls.pop(t, 0) for t in TOOLS}
        counts[CALLS_OTHER] = sum(calls.values())
        return counts

    def error_kind_counts(self) -> dict[str, int]:
        kinds = self.__dict__.get("tool_error_kinds") or {}
        if unknown := set(kinds) - set(FAILURE_KINDS):
            raise ValueError(f"tool_error_kinds: unknown failure kind(s) {', '.join(sorted(unknown))}; known: {', '.join(FAILURE_KINDS)}")
        return {f"{ERROR_KIND_PREFIX}{k}": int(kinds.get(k, 0)) for k in FAILURE_KINDS}

    def __getattr__(self, name: str) -> Any:
        for prefix, counts in (("calls_", self.call_counts), (ERROR_KIND_PREFIX, self.error_kind_counts)):
            if name.startswith(prefix) and name in (found := counts()):
                return found[name]
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def to_record(self) -> dict[str, Any]:
        expanded = {"calls": self.call_counts, "tool_error_kinds": self.error_kind_counts}
        out: dict[str, Any] = {}
        for key, value in asdict(self).items():
            out.update(expanded[key]() if key in expanded else {key: value})
        return out


# Column types by field annotation; counts are int32 except those that can pass 2**31 (tokens).
_BY_ANNOTATION: dict[str, pa.DataType] = {
    "int": pa.int32(), "float": pa.float64(), "bool": pa.bool_(), "list[str]": pa.list_(pa.string()),
    "dt.datetime": pa.timestamp("us"),  # UTC (naive: reading a zoned timestamp into Python would need pytz)
}
_INT64 = ("token_budget", "retrieved_tokens", "prompt_tokens", "completion_tokens", "reasoning_tokens")


def _column_type(f: Any) -> pa.DataType:
    return pa.int64() if f.name in _INT64 else _BY_ANNOTATION.get(str(f.type).removesuffix(" | None"), pa.string())


def row_schema() -> pa.Schema:
    """EpisodeRow's fields in order, `calls` and `tool_error_kinds` expanded to their (int32) columns."""
    expanded = {"calls": call_columns, "tool_error_kinds": error_kind_columns}
    columns = []
    for f in fields(EpisodeRow):
        columns += [pa.field(c, pa.int32()) for c in expanded[f.name]()] if f.name in expanded else [pa.field(f.name, _column_type(f))]
    return pa.schema(columns)


def rows_to_table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=row_schema())
