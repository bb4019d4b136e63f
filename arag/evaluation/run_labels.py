"""How a run's settings read on its protocol card, in the report and on the results page."""

from __future__ import annotations

import dataclasses
import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import yaml
from omegaconf import OmegaConf

from arag.config.files import conf_path
from arag.config.schemas import IndexBuild
from arag.index.facts import embedder_facts, manifest_facts
from arag.index.layout import IndexLayout


def index_facts(index_path: str | Path, build_fingerprint: str | None = None, manifest: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The embedder and chunking of the index at `index_path`; None when its manifest is missing or
    of another index than `build_fingerprint`."""
    if manifest is None:
        try:
            manifest = json.loads(IndexLayout(index_path).manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
    # An A2RAG run's fingerprint is the index's with its graph's appended (`<index>+graph-<graph>`).
    if build_fingerprint is not None and manifest.get("build_fingerprint") != build_fingerprint.split("+graph-")[0]:
        return None
    return manifest_facts(manifest)


@lru_cache(maxsize=1)
def _index_defaults() -> tuple[str, dict[str, Any]]:
    index_conf = yaml.safe_load(conf_path("index.yaml").read_text())
    embedder = next(d["embedder"] for d in index_conf["defaults"] if isinstance(d, dict) and "embedder" in d)
    name = yaml.safe_load(conf_path("embedder", f"{embedder}.yaml").read_text())["name"]
    return str(name), {**dataclasses.asdict(IndexBuild()), **index_conf["index"]}


@lru_cache(maxsize=16)
def embedder_config(name: str) -> dict[str, Any] | None:
    configs = (yaml.safe_load(path.read_text()) for path in sorted(conf_path("embedder").glob("*.yaml")))
    return next((cfg for cfg in configs if isinstance(cfg, dict) and cfg.get("name") == name), None)


# The sentence splitter every index of ours was built with (manifests name it since it was recorded).
OUR_SPLITTER = "sentencex"


def assumed_index_facts(corpus: Mapping[str, Any] | None) -> dict[str, Any]:
    """What `pipelines.index +corpus=<corpus>` builds at its defaults (conf/index.yaml)."""
    name, section = _index_defaults()
    cfg = OmegaConf.create({"corpus": dict(corpus or {}), "index": section})

    def pick(key: str) -> Any:
        return OmegaConf.select(cfg, f"index.{key}", throw_on_resolution_failure=False)

    facts = {"embedder": name, "chunking": pick("chunking"), "chunk_tokens": pick("chunk_tokens"), "chunk_overlap": pick("chunk_overlap"), "splitter": OUR_SPLITTER}
    return {**facts, **embedder_facts(embedder_config(name) or {})}


@lru_cache(maxsize=1)
def judge_presets() -> dict[str, tuple[str, str]]:
    configs = {path.stem: yaml.safe_load(path.read_text()) for path in sorted(conf_path("judge").glob("*.yaml"))}
    return {str(cfg.get("name") or stem): (str(cfg["system_prompt"]), str(cfg["user_template"])) for stem, cfg in configs.items()}


def judge_preset(judge: Mapping[str, Any]) -> str:
    """The judge preset a run's judge settings are, by name, else by its prompts."""
    prompts = (str(judge.get("system_prompt")), str(judge.get("user_template")))
    presets = judge_presets()
    if name := judge.get("name"):
        return f"preset {name}" + ("" if name not in presets or presets[name] == prompts else ", prompts changed")
    same = [n for n, p in presets.items() if p == prompts]
    return f"preset {same[0]}" if same else "unnamed preset"


def judge_model_name(judge_model: Any, agent_model: str | None) -> str | None:
    if not isinstance(judge_model, Mapping):  # None or "agent": the agent's model
        return agent_model
    at_defaults = judge_model.get("agent_model_at_defaults")
    if isinstance(at_defaults, Mapping):
        return str(at_defaults.get("model") or agent_model)
    return str(judge_model["model"]) if judge_model.get("model") is not None else agent_model


def guard_rails_label(rails: Mapping[str, Any] | None) -> str:
    rails = rails or {}
    on = [f"tool_steps={rails['tool_steps']}"] if int(rails.get("tool_steps") or 0) > 0 else []
    on += [k for k in ("require_read_before_answer", "shown_chunk_ids_only") if rails.get(k)]
    return " ".join(on) or "off"
