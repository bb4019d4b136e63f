"""The default LLM judge: the agent's model at the model's own defaults, so every run of a sweep
over generation settings is scored by one instrument (docs/evaluation.md, "Judges")."""

from __future__ import annotations

import copy
import inspect
from typing import Any, Mapping

from arag.llm.base import LLMBackend
from arag.llm.reasoning import resolve

# Model config keys that set how a reply is generated rather than which model gives it.
GENERATION_KEYS = ("reasoning_effort", "temperature", "max_tokens")


def judge_model_config(model_cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The default judge's backend config (what the run id records)."""
    return {k: v for k, v in model_cfg.items() if k not in GENERATION_KEYS}


def default_temperature(cls: type[LLMBackend]) -> Any:
    """The temperature a config that leaves it out gets (the constructor's default, else the base's)."""
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        parameter = inspect.signature(init).parameters.get("temperature") if init else None
        if parameter is not None and parameter.default is not inspect.Parameter.empty:
            return parameter.default
    return 0.0


def at_model_defaults(backend: LLMBackend) -> LLMBackend:
    """`backend`'s model as `make_backend(judge_model_config(cfg))` would build it, over the same
    engine (one model in memory per worker); the view's `close` does nothing."""
    view = copy.copy(backend)
    LLMBackend.__init__(view, backend.model, reasoning=resolve(None, backend.reasoning.family), max_tokens=None, temperature=default_temperature(type(backend)))
    share = getattr(view, "share_engine_of", None)
    if share is not None:
        share(backend)  # backends whose derived state or connections need it (openai, vllm, scripted)
    view.close = lambda: None  # type: ignore[method-assign]
    return view
