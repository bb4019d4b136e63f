"""Method registry: `load_method(name)` reads `conf/method/<name>.yaml` and builds the method.

A config names its class with `kind` (a key of `KINDS`); everything else in the file are that
class's fields (prompts, tools, options). Register a new kind with `register_kind`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from arag.methods.base import Method
from arag.methods.naive_rag import NaiveRagMethod

KINDS: dict[str, type[Method]] = {"direct": Method, "agent": Method, "naive_rag": NaiveRagMethod}

METHOD_CONF_DIR = Path(__file__).resolve().parents[2] / "conf" / "method"


def register_kind(kind: str, cls: type[Method]) -> None:
    KINDS[kind] = cls


def available_methods() -> list[str]:
    return sorted(p.stem for p in METHOD_CONF_DIR.glob("*.yaml"))


def method_from_config(cfg: Mapping[str, Any]) -> Method:
    cfg = dict(cfg)
    kind = cfg.pop("kind", "agent")
    if kind not in KINDS:
        raise ValueError(f"unknown method kind {kind!r}; known: {', '.join(KINDS)}")
    if "tools" in cfg:
        cfg["tools"] = tuple(cfg["tools"] or ())
    if "system_prompt" in cfg:
        cfg["system_prompt"] = str(cfg["system_prompt"]).strip()
    return KINDS[kind](**cfg)


def load_method(name: str, overrides: Mapping[str, Any] | None = None) -> Method:
    import yaml

    path = METHOD_CONF_DIR / f"{name}.yaml"
    if not path.exists():
        raise ValueError(f"unknown method {name!r}; known: {', '.join(available_methods())}")
    cfg = yaml.safe_load(path.read_text())
    cfg.update(overrides or {})
    return method_from_config(cfg)


__all__ = ["KINDS", "Method", "NaiveRagMethod", "available_methods", "load_method", "method_from_config", "register_kind"]
