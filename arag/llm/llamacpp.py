"""`llamacpp`: the embedded CPU default, a GGUF model run in-process by llama-cpp-python. JSON
actions only (free-form tool calls from a 1.5B model are unreliable), each reply constrained by a
grammar compiled from the action schema."""

from __future__ import annotations

import json
import os
from typing import Any, Mapping

from arag.llm.base import JSON, BlockingBackend
from arag.llm.models import MODELS, ensure_model
from arag.llm.reasoning import family_of, resolve
from arag.llm.types import Completion, ConfigurationError, LLMError, Message


class LlamaCppBackend(BlockingBackend):
    kind = "llamacpp"
    protocols = (JSON,)
    runtime_keys = frozenset({"n_threads", "n_batch", "verbose"})

    @classmethod
    def default_concurrency(cls, cfg: Mapping[str, Any]) -> int:
        # One sequence at a time, and interleaved episodes would defeat its prompt-prefix cache.
        return 1

    @classmethod
    def threads_in_process(cls, cfg: Mapping[str, Any], cores: int | None = None) -> int | None:
        return int(cfg.get("n_threads") or cores or os.cpu_count() or 1)

    def __init__(self, model: str = "qwen2.5-coder-1.5b-instruct", *, model_path: str | None = None, n_ctx: int = 8192,
                 n_threads: int | None = None, n_batch: int = 512, seed: int = 0, max_tokens: int | None = None, temperature: float = 0.0,
                 reasoning_effort: str | None = None, on_unsupported: str = "error", family: str | None = None, verbose: bool = False):
        family = family or (MODELS[model].chat_family if model in MODELS else family_of(model))
        reasoning = resolve(reasoning_effort, family, on_unsupported=on_unsupported)
        if reasoning.thinking_budget is not None or reasoning.request:
            # llama-cpp-python's chat API has no thinking budget or effort field: refuse, never ignore.
            raise ConfigurationError(f"the llamacpp backend cannot honour reasoning effort {reasoning_effort!r} for {family}")
        super().__init__(model, reasoning=reasoning, max_tokens=max_tokens, temperature=temperature)
        # Idle OpenMP threads sleep instead of spinning: on shared or oversubscribed CPUs spinning
        # threads starve each other (measured 3-7x slower calls); must be set before the library loads.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise ImportError("the llamacpp backend needs llama-cpp-python: pip install -e '.[llamacpp]' (see docs/agents.md)") from exc
        self.model_path = str(model_path or ensure_model(model))
        self.n_ctx, self.seed = n_ctx, seed
        self.n_threads = self.threads_in_process({"n_threads": n_threads})
        self.context_window = n_ctx
        self.llm = Llama(model_path=self.model_path, n_ctx=n_ctx, n_threads=self.n_threads, n_batch=n_batch, seed=seed, verbose=verbose)
        self._grammars: dict[str, Any] = {}

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "model_path": self.model_path, "n_ctx": self.n_ctx, "n_threads": self.n_threads, "seed": self.seed}

    def _grammar(self, schema: dict[str, Any]) -> Any:
        from llama_cpp import LlamaGrammar

        key = json.dumps(schema, sort_keys=True)
        if key not in self._grammars:
            self._grammars[key] = LlamaGrammar.from_json_schema(json.dumps(grammar_schema(schema)), verbose=False)
        return self._grammars[key]

    def _complete(self, messages: list[Message], *, tools, response_schema, max_tokens) -> Completion:
        if tools:
            raise LLMError("the llamacpp backend supports only the json action protocol (no native tool calls)", retryable=False)
        kwargs = {"grammar": self._grammar(response_schema)} if response_schema is not None else {}
        try:
            out = self.llm.create_chat_completion(
                messages=[m.to_openai() for m in messages], max_tokens=max_tokens, temperature=self.temperature, seed=self.seed, **kwargs
            )
        except ValueError as exc:  # e.g. the prompt exceeds the context window: retrying cannot help
            raise LLMError(f"llama.cpp: {exc}", retryable=False) from exc
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        return Completion(
            text=choice["message"].get("content") or "",
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            finish_reason=choice.get("finish_reason"),
        )

    def close(self) -> None:
        llm, self.llm = getattr(self, "llm", None), None
        if llm is not None:
            llm.close()


# llama-cpp-python writes a string's maxLength as that many nested optional groups, and llama.cpp's
# grammar parser recurses once per group: 1,000 works, 2,000 crashes the process (SIGSEGV, seen
# with 0.3.36). Larger bounds are left to the tool's own check, which refuses the argument.
GRAMMAR_MAX_STRING_BOUND = 1000


def grammar_schema(schema: Any) -> Any:
    """The schema without string length bounds above GRAMMAR_MAX_STRING_BOUND."""
    if isinstance(schema, list):
        return [grammar_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    return {k: grammar_schema(v) for k, v in schema.items() if not (k in ("maxLength", "minLength") and isinstance(v, int) and v > GRAMMAR_MAX_STRING_BOUND)}
