"""The model endpoints a command will call, asked once before it starts any work (Ray, a run folder,
an index): a server that is not running stops the command with one line naming the URL it tried,
the setting that holds it and the environment variable that set it, instead of every episode
failing its retries and the run printing accuracies of zero."""

from __future__ import annotations

import os
import re
from typing import Any

from omegaconf import DictConfig, OmegaConf

from arag.llm.endpoint import is_loopback, models_url, unreachable, workers_elsewhere

ENV_REFERENCE = re.compile(r"oc\.env:\s*([A-Za-z_][A-Za-z0-9_]*)")


def _source(node: DictConfig) -> tuple[str, str | None]:
    """Where a node's base_url came from (words for the error line) and the environment variable
    that sets it, if any: `model=openai` reads ARAG_OPENAI_BASE_URL, with a default."""
    raw = OmegaConf.to_container(node, resolve=False).get("base_url")
    variable = match[1] if isinstance(raw, str) and (match := ENV_REFERENCE.search(raw)) else None
    if variable is None:
        return "", None
    if os.environ.get(variable):
        return f" (from {variable})", variable
    return f" (the default: {variable} is not set)", variable


def endpoint_problem(node: Any, setting: str) -> str | None:
    """The error line for the model config `node` at `setting` (`model`, `judge.model`) when it names a
    base_url that nothing answers at; None when something does, or there is no URL to ask."""
    if not isinstance(node, DictConfig) or "base_url" not in node:
        return None
    url = node.get("base_url")
    if not isinstance(url, str) or not url:
        return None
    if is_loopback(url) and workers_elsewhere():
        return None  # each node's own server: the workers reach it, this process need not
    reason = unreachable(url)
    if reason is None:
        return None
    source, variable = _source(node)
    fix = f"{setting}.base_url=<url>" + (f" or {variable}=<url>" if variable else "")
    return f"{setting}.base_url={url}{source}: no model endpoint answers there (GET {models_url(url)}: {reason}); start the model server, or set {fix}"


def check_model_endpoints(cfg: DictConfig, settings: tuple[str, ...] = ("model", "judge.model")) -> None:
    """Raise ValueError for the first of `settings` whose endpoint does not answer (each URL asked once)."""
    asked: set[str] = set()
    for setting in settings:
        node = OmegaConf.select(cfg, setting, default=None)
        url = node.get("base_url") if isinstance(node, DictConfig) else None
        if url in asked:
            continue
        asked.add(url)
        problem = endpoint_problem(node, setting)
        if problem:
            raise ValueError(problem)
