"""Build a backend from a config mapping (`conf/model/*.yaml`): `backend` names the kind, `protocol` the
action protocol the agent uses with it; every other key goes to the backend's constructor."""

from __future__ import annotations

from typing import Any, Mapping

from arag.llm.base import LLMBackend

# Keys of a model config that are for the agent, not the backend constructor.
AGENT_KEYS = ("backend", "protocol")


def make_backend(cfg: Mapping[str, Any], **extra: Any) -> LLMBackend:
    cfg = {**dict(cfg), **extra}
    kind = cfg.get("backend")
    kwargs = {k: v for k, v in cfg.items() if k not in AGENT_KEYS}
    if kind == "llamacpp":
        from arag.llm.llamacpp import LlamaCppBackend

        return LlamaCppBackend(**kwargs)
    if kind == "scripted":
        from arag.llm.scripted import ScriptedBackend

        return ScriptedBackend(**kwargs)
    if kind == "openai":
        from arag.llm.openai import OpenAIBackend

        return OpenAIBackend(**kwargs)
    if kind == "vllm":
        from arag.llm.vllm import VLLMBackend

        return VLLMBackend(**kwargs)
    raise ValueError(f"unknown backend {kind!r}; known: llamacpp, openai, scripted, vllm")
