"""Build a backend from a config mapping (`conf/model/*.yaml`): `backend` names the kind, `protocol` the
action protocol the agent uses with it; every other key goes to the backend's constructor, and a key
the constructor does not take is an error naming it and the valid ones. The built-in backends are
registered here (arag.registry, kind "backend"); their modules import their engines only when built."""

from __future__ import annotations

from typing import Any, Mapping

from arag.llm.base import LLMBackend
from arag.llm.llamacpp import LlamaCppBackend
from arag.llm.openai import OpenAIBackend
from arag.llm.scripted import ScriptedBackend
from arag.llm.vllm import VLLMBackend
from arag.registry import BACKEND, plugin, plugins, register
from arag.strict_settings import check_keys, constructor_keys

# Keys of a model config that are for the agent, not the backend constructor: `guard_rails` are the
# agent.guard_rails a small model needs to act as an agent (conf/ask.yaml and conf/evaluate.yaml
# take their defaults from it, so runs record them in their identity).
AGENT_KEYS = ("backend", "protocol", "guard_rails")

for _cls in (LlamaCppBackend, OpenAIBackend, ScriptedBackend, VLLMBackend):
    register(BACKEND, _cls.kind, _cls)

# Every registered backend by its `backend` key, live.
KINDS: Mapping[str, type[LLMBackend]] = plugins(BACKEND)


def backend_class(kind: Any) -> type[LLMBackend]:
    """The backend class for a config's `backend` key; an unknown one is an error listing the known."""
    return plugin(BACKEND, kind)


def default_concurrency(model_cfg: Mapping[str, Any]) -> int:
    """Episodes (or judge calls) in flight per worker when the settings leave it null: what the
    config's backend declares (arag.llm.base.LLMBackend.default_concurrency)."""
    return backend_class(model_cfg.get("backend")).default_concurrency(model_cfg)


def backend_caps(model_cfg: Mapping[str, Any], in_flight: int, engine_in_flight: int, role: str = "model") -> tuple[dict[str, Any], list[str]]:
    """The config keys that raise the backend's plumbing limits to the episodes in flight, and a
    warning for each limit the config keeps lower (arag.llm.base.LLMBackend.concurrency_caps)."""
    return backend_class(model_cfg.get("backend")).concurrency_caps(model_cfg, in_flight, engine_in_flight, role)


def worker_overrides(model_cfg: Mapping[str, Any], slot: int, engines: int) -> dict[str, Any]:
    """Config keys for the evaluation worker in `slot` (arag.llm.base.LLMBackend.worker_overrides)."""
    return backend_class(model_cfg.get("backend")).worker_overrides(model_cfg, slot, engines)


def threads_in_process(model_cfg: Mapping[str, Any], cores: int | None = None) -> int | None:
    """CPU threads the model keeps busy in the process that builds it; None: it runs elsewhere."""
    return backend_class(model_cfg.get("backend")).threads_in_process(model_cfg, cores)


def runtime_model_keys() -> frozenset[str]:
    """Model config keys that change speed, capacity or plumbing, not replies: every registered
    backend's `runtime_keys` (run ids leave them out)."""
    return frozenset().union(*(cls.runtime_keys for cls in KINDS.values()))


def check_model_settings(cfg: Mapping[str, Any], group: str = "model") -> type[LLMBackend]:
    """Check a model config's keys against its backend's constructor (nothing is built); returns the class."""
    cls = backend_class(cfg.get("backend"))
    check_keys(group, cfg, (*AGENT_KEYS, *constructor_keys(cls)))
    return cls


def make_backend(cfg: Mapping[str, Any], **extra: Any) -> LLMBackend:
    cfg = {**dict(cfg), **extra}
    cls = check_model_settings(cfg)
    cls.prepare_runtime(cfg)
    return cls(**{k: v for k, v in cfg.items() if k not in AGENT_KEYS})
