"""Dataclass schemas of config nodes that several pipelines share (plain Python: no Hydra, no Ray).
Hydra merges each under its YAML (arag.config.store), so the defaults here are the defaults."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from arag.strict_settings import from_settings

# Default token budget: the paper code's (128k), capped by the model's context window (arag.agent.loop.fit_budget).
PAPER_TOKEN_BUDGET = 128_000
# The environment variable a tool server (pipelines.serve) reads its token from, and its clients by default.
TOKEN_ENV = "ARAG_SERVE_TOKEN"


@dataclass
class GuardRails:
    """Extra help for small models; all off by default (the paper's methods run without them) and
    recorded in every episode.

    require_read_before_answer: refuse an answer until some tool call has put whole chunk text into
        the context (chunk_read, a whole-chunk search, or any search of a `full_text` method; search
        snippets are not enough), at most `max_refusals` times per episode (then it is accepted).
    tool_steps: the first `tool_steps` steps may only call tools: the JSON action schema of those
        steps has no answer branch, so the grammar itself rules out answering from memory
        (JSON protocol only).
    shown_chunk_ids_only: chunk_read's chunk_ids may only name ids the episode has been shown
        (search results, chunks read and their neighbours): an enum in the JSON action schema
        that grows as ids are shown; until one is shown, chunk_read is not offered (JSON
        protocol only; no effect on a method without chunk_read).
    """

    require_read_before_answer: bool = False
    max_refusals: int = 2
    tool_steps: int = 0
    shown_chunk_ids_only: bool = False

    def active(self) -> bool:
        return self.require_read_before_answer or self.tool_steps > 0 or self.shown_chunk_ids_only


@dataclass
class AgentConfig:
    max_steps: int = 15  # the official A-RAG configuration's step limit (max_loops: 15 in the paper code's config)
    token_budget: int | None = PAPER_TOKEN_BUDGET  # conversation tokens (prompt + reply) that trigger the forced answer
    max_reply_tokens: int | None = None  # per model call; None: the model config's max_tokens (arag.llm.base.PAPER_REPLY_TOKENS when null)
    llm_attempts: int = 4  # tries per model call (1 + retries) for retryable LLM errors
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 30.0
    backoff_jitter_s: float = 1.0
    keep_messages: bool = True  # store the whole conversation in the episode
    guard_rails: GuardRails = field(default_factory=GuardRails)

    @classmethod
    def from_dict(cls, cfg: dict[str, Any]) -> "AgentConfig":
        """From the `agent` config group; an unknown key (here or in guard_rails) lists the valid ones."""
        guard_rails = from_settings(GuardRails, cfg.get("guard_rails") or {}, "agent.guard_rails")
        return from_settings(cls, cfg, "agent", guard_rails=guard_rails)


@dataclass
class IndexSource:
    """How ask and evaluate reach an index: a folder, or a tool server (pipelines.serve)."""

    path: Any = None  # the index folder (a pipeline's YAML may derive it, e.g. from the corpus name)
    url: str | None = None  # a tool server instead: http://host:8765; path is then unused
    token_env: str | None = TOKEN_ENV  # the environment variable holding the server's token (if it has one)
    timeout_s: float = 120.0  # seconds a served tool call may take, time queued at a busy server included
