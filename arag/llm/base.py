"""The backend interface the agent loop talks to: async, because the serving backends run many
episodes at once; `complete` is the blocking form for scripts and tests."""

from __future__ import annotations

import asyncio
import threading
from abc import ABC, abstractmethod
from dataclasses import asdict
from typing import Any, Mapping

from arag.llm.reasoning import ReasoningSetting, resolve
from arag.llm.types import Completion, Message

# Ways of acting a backend offers (arag.agent.protocols).
NATIVE = "native"
JSON = "json"

# The reply cap of a model config that leaves `max_tokens` null, for every model family: the A-RAG
# paper runs every method with max_tokens >= 16384 (appendix B) and its official config sets 16384.
PAPER_REPLY_TOKENS = 16_384
# Room kept free for a reply in a window that cannot hold the whole cap beside as much conversation.
MIN_REPLY_ROOM = 1_024


def reply_room(cap: int, window: int | None) -> int:
    """Tokens kept free for a reply: the whole cap where the window holds it twice over (or is
    unknown), else MIN_REPLY_ROOM (never more than the cap)."""
    return cap if window is None or window >= 2 * cap else min(cap, MIN_REPLY_ROOM)


class LLMBackend(ABC):
    """A chat model. `tools`: OpenAI function schemas (native protocol only); `response_schema`: a
    JSON schema the reply must satisfy (JSON protocol only)."""

    kind: str = "?"
    protocols: tuple[str, ...] = (NATIVE, JSON)
    # Constructor keys that change speed, capacity or plumbing, not replies: left out of run ids
    # (arag.evaluation.run_settings) so a rerun with other values continues the same run.
    runtime_keys: frozenset[str] = frozenset()
    context_window: int | None = None  # tokens, where known: the agent fits its token budget into it

    @classmethod
    def default_concurrency(cls, cfg: Mapping[str, Any]) -> int:
        """Episodes (or judge calls) in flight per worker when the settings leave it null."""
        return 16

    @classmethod
    def concurrency_caps(cls, cfg: Mapping[str, Any], in_flight: int, engine_in_flight: int, role: str = "model") -> tuple[dict[str, Any], list[str]]:
        """Config keys raising a plumbing limit to `in_flight` (per worker) or `engine_in_flight` (per
        engine), and a warning for each limit `cfg` keeps lower; `role` names the config in them."""
        return {}, []

    @classmethod
    def worker_overrides(cls, cfg: Mapping[str, Any], slot: int, engines: int) -> dict[str, Any]:
        """Config keys for the evaluation worker in `slot` when `engines` engines serve the workers."""
        return {}

    @classmethod
    def threads_in_process(cls, cfg: Mapping[str, Any], cores: int | None = None) -> int | None:
        """CPU threads the model keeps busy in the process that builds the backend; None: it runs elsewhere."""
        return None

    @classmethod
    def prepare_runtime(cls, cfg: Mapping[str, Any]) -> None:
        """Make ready what the engines run on, in every process that builds a backend."""

    def __init__(self, model: str, *, reasoning: ReasoningSetting | None = None, max_tokens: int | None = None, temperature: float = 0.0):
        self.model = model
        self.reasoning = reasoning or resolve(None, "none")
        self.max_tokens = max_tokens if max_tokens is not None else PAPER_REPLY_TOKENS
        self.temperature = temperature

    @abstractmethod
    async def acomplete(
        self, messages: list[Message], *, tools: list[dict[str, Any]] | None = None, response_schema: dict[str, Any] | None = None, max_tokens: int | None = None
    ) -> Completion: ...

    def complete(self, messages: list[Message], **kwargs: Any) -> Completion:
        return asyncio.run(self.acomplete(messages, **kwargs))

    def describe(self) -> dict[str, Any]:
        """Settings recorded with every episode."""
        return {"backend": self.kind, "model": self.model, "max_tokens": self.max_tokens, "temperature": self.temperature,
                "reasoning": asdict(self.reasoning), "context_window": self.context_window}

    def close(self) -> None:
        pass


class BlockingBackend(LLMBackend):
    """A backend around a blocking, single-threaded engine: calls run in a worker thread, one at a
    time, so the event loop (other episodes' tool calls) goes on."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._engine_lock = threading.Lock()

    @abstractmethod
    def _complete(self, messages: list[Message], *, tools: list[dict[str, Any]] | None, response_schema: dict[str, Any] | None, max_tokens: int) -> Completion: ...

    async def acomplete(self, messages, *, tools=None, response_schema=None, max_tokens=None) -> Completion:
        return await asyncio.to_thread(self.complete, messages, tools=tools, response_schema=response_schema, max_tokens=max_tokens)

    def complete(self, messages: list[Message], *, tools=None, response_schema=None, max_tokens=None) -> Completion:
        with self._engine_lock:
            return self._complete(messages, tools=tools, response_schema=response_schema, max_tokens=max_tokens or self.max_tokens)
