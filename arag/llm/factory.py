"""Build a backend from a config mapping (`conf/model/*.yaml`): `backend` names the kind, `protocol` the
action protocol the agent uses with it; every other key goes to the backend's constructor, and a key
the constructor does not take is an error naming it and the valid ones."""

from __future__ import annotations

from typing import Any, Mapping

from arag.llm.base import LLMBackend
from arag.strict_settings import check_keys, constructor_keys

# Keys of a model config that are for the agent, not the backend constructor: `guard_rails` are the
# agent.guard_rails a small model needs to act as an agent (conf/ask.yaml and conf/evaluate.yaml
# take their defaults from it, so runs record them in their identity).
AGENT_KEYS = ("backend", "protocol", "guard_rails")
KINDS = ("llamacpp", "openai", "scripted", "vllm")


def backend_class(kind: Any) -> type[LLMBackend]:
    """The backend class for a config's `backend` key (imported only when chosen: heavy modules)."""
    if kind == "llamacpp":
        from arag.llm.llamacpp import LlamaCppBackend

        return LlamaCppBackend
    if kind == "scripted":
        from arag.llm.scripted import ScriptedBackend

        return ScriptedBackend
    if kind == "openai":
        from arag.llm.openai import OpenAIBackend

        return OpenAIBackend
    if kind == "vllm":
        from arag.llm.vllm import VLLMBackend

        return VLLMBackend
    raise ValueError(f"unknown backend {kind!r}; known: {', '.join(KINDS)}")


def check_model_settings(cfg: Mapping[str, Any], group: str = "model") -> type[LLMBackend]:
    """Check a model config's keys against its backend's constructor (nothing is built); returns the class."""
    cls = backend_class(cfg.get("backend"))
    check_keys(group, cfg, (*AGENT_KEYS, *constructor_keys(cls)))
    return cls


def make_backend(cfg: Mapping[str, Any], **extra: Any) -> LLMBackend:
    cfg = {**dict(cfg), **extra}
    cls = check_model_settings(cfg)
    return cls(**{k: v for k, v in cfg.items() if k not in AGENT_KEYS})
