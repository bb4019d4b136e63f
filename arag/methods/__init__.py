"""Method registry: `load_method(name)` reads `conf/method/<name>.yaml` and builds the method.

A config names its class with `kind` (a key of `KINDS`); everything else in the file are that
class's fields (prompts, tools, options). Register a new kind with `register_kind`.
"""

from __future__ import annotations

from typing import Any, Mapping

from arag.conf_files import conf_path
from arag.methods.a2rag import A2RagMethod
from arag.methods.agenticrag import AgenticRagMethod
from arag.methods.base import Method
from arag.methods.naive_rag import NaiveRagMethod
from arag.strict_settings import check_keys

KINDS: dict[str, type[Method]] = {"direct": Method, "agent": Method, "naive_rag": NaiveRagMethod, "a2rag": A2RagMethod, "agenticrag": AgenticRagMethod}

# conf/method in a checkout, arag/conf/method in an installed package.
METHOD_CONF_DIR = conf_path("method")


def register_kind(kind: str, cls: type[Method]) -> None:
    KINDS[kind] = cls


def available_methods() -> list[str]:
    return sorted(p.stem for p in METHOD_CONF_DIR.glob("*.yaml"))


def method_class(cfg: Mapping[str, Any]) -> type[Method]:
    """The class a method config names (`kind`), after checking its keys are that class's fields."""
    kind = cfg.get("kind", "agent")
    if kind not in KINDS:
        raise ValueError(f"unknown method kind {kind!r}; known: {', '.join(KINDS)}")
    check_keys("method", cfg, ("kind", *KINDS[kind].config_keys()))
    return KINDS[kind]


def method_from_config(cfg: Mapping[str, Any]) -> Method:
    cls = method_class(cfg)
    cfg = {k: v for k, v in cfg.items() if k != "kind"}
    if "tools" in cfg:
        cfg["tools"] = tuple(cfg["tools"] or ())
    if "system_prompt" in cfg:
        cfg["system_prompt"] = str(cfg["system_prompt"]).strip()
    return cls.from_config(cfg)


def load_method(name: str, overrides: Mapping[str, Any] | None = None) -> Method:
    cfg = read_method_config(name)
    cfg.update(overrides or {})
    return method_from_config(cfg)


def read_method_config(name: str) -> dict[str, Any]:
    """conf/method/<name>.yaml with its Hydra `defaults` (other method configs) merged in, as Hydra
    composes it: a config built on another (an ablation) sets only what it changes, top-level keys."""
    import yaml

    path = METHOD_CONF_DIR / f"{name}.yaml"
    if not path.exists():
        raise ValueError(f"unknown method {name!r}; known: {', '.join(available_methods())}")
    own = yaml.safe_load(path.read_text())
    defaults = own.pop("defaults", None) or ["_self_"]
    cfg: dict[str, Any] = {}
    for entry in defaults if "_self_" in defaults else [*defaults, "_self_"]:
        cfg.update(own if entry == "_self_" else read_method_config(str(entry)))
    return cfg


__all__ = ["KINDS", "AgenticRagMethod", "Method", "NaiveRagMethod", "available_methods", "load_method", "method_class", "method_from_config", "register_kind"]
