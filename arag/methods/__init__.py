"""Method registry: `load_method(name)` reads `conf/method/<name>.yaml` and builds the method.

A config names its class with `kind` (a method kind registered in arag.registry, kind "method");
everything else in the file are that class's fields (prompts, tools, options), besides `label`, the
method's name in reports. A new kind registers with arag.registry.register(METHOD, kind, cls).
"""

from __future__ import annotations

from typing import Any, Mapping

from arag.config.files import conf_path, method_names, read_method_config
from arag.methods.a2rag import A2RagMethod
from arag.methods.agenticrag import AgenticRagMethod
from arag.methods.base import Method
from arag.methods.naive_rag import NaiveRagMethod
from arag.registry import METHOD, TOOL, plugins, register
from arag.strict_settings import check_keys
from arag.tools.base import NOT_EVIDENCE, READ, SNIPPET

for _kind, _cls in (("direct", Method), ("agent", Method), ("naive_rag", NaiveRagMethod), ("a2rag", A2RagMethod), ("agenticrag", AgenticRagMethod)):
    register(METHOD, _kind, _cls)

# Every registered method kind by name, live.
KINDS: Mapping[str, type[Method]] = plugins(METHOD)
# Keys of a method config that are not its class's: `kind` picks the class, `label` names the method in reports.
CONFIG_ONLY_KEYS = ("kind", "label")

# conf/method in a checkout, arag/conf/method in an installed package.
METHOD_CONF_DIR = conf_path("method")


def available_methods() -> list[str]:
    return method_names()


def evidence_of(record: str) -> str:
    """How the chunks of a tool-call record named `record` count as evidence (arag.tools.base READ,
    SNIPPET or NOT_EVIDENCE): the registered tool's own declaration, else a registered method kind's
    for a retrieval step it records like a tool call (A2RAG's graph_retrieval); other names (a tool
    the model made up) are not evidence."""
    tool = plugins(TOOL).get(record)
    if tool is not None:
        return tool.evidence
    for cls in KINDS.values():
        if record in cls.evidence_records:
            return cls.evidence_records[record]
    return NOT_EVIDENCE


def shows_full_text(record: str, full_text: bool) -> bool:
    """Whether a call recorded as `record` put its chunks' whole texts into the context (they count
    as read, not only seen); `full_text`: the method's full_text setting (its searches return whole
    chunks). The one read/seen rule: evidence recall, the read-before-answer guard rail and the viewer use it."""
    evidence = evidence_of(record)
    return evidence == READ or (full_text and evidence == SNIPPET)


def method_class(cfg: Mapping[str, Any]) -> type[Method]:
    """The class a method config names (`kind`), after checking its keys are that class's fields."""
    kind = cfg.get("kind", "agent")
    if kind not in KINDS:
        raise ValueError(f"unknown method kind {kind!r}; known: {', '.join(KINDS)}")
    check_keys("method", cfg, (*CONFIG_ONLY_KEYS, *KINDS[kind].config_keys()))
    return KINDS[kind]


def method_from_config(cfg: Mapping[str, Any]) -> Method:
    cls = method_class(cfg)
    cfg = {k: v for k, v in cfg.items() if k not in CONFIG_ONLY_KEYS}
    if "tools" in cfg:
        cfg["tools"] = tuple(cfg["tools"] or ())
    if "system_prompt" in cfg:
        cfg["system_prompt"] = str(cfg["system_prompt"]).strip()
    return cls.from_config(cfg)


def load_method(name: str, overrides: Mapping[str, Any] | None = None) -> Method:
    cfg = read_method_config(name)
    cfg.update(overrides or {})
    return method_from_config(cfg)


__all__ = ["KINDS", "AgenticRagMethod", "Method", "NaiveRagMethod", "available_methods", "evidence_of", "load_method", "method_class", "method_from_config", "read_method_config", "shows_full_text"]
