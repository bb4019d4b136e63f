"""The keys an entry config (conf/<name>.yaml) declares: its own top-level keys and the packages its
defaults list fills (`model: ...` → model, `schema/results@results: base` → results), so the
pipelines' key checks read them from the one file that sets them. A node with a schema is the
schema's to check (arag.config.typed); an untyped node the file writes holds only the keys written there."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

from arag.config.files import conf_path


def _package(entry: Any) -> str | None:
    """The top-level key a defaults-list entry fills; None for `_self_`, overrides and the global package."""
    if not isinstance(entry, dict) or len(entry) != 1:
        return None
    (key,) = entry
    key = key.removeprefix("optional ")
    if key.startswith("override "):
        return None
    group, _, package = key.partition("@")
    top = (package or group.replace("/", ".")).split(".")[0]
    return None if top.startswith("_") else top


def _written(value: Any, composed: Any) -> Any:
    """None (a value, or a node with a schema), else the keys of the mapping the file writes, each the same way."""
    if not isinstance(value, dict) or not isinstance(composed, DictConfig) or OmegaConf.get_type(composed) is not dict:
        return None
    return {key: _written(inner, composed._get_node(key)) for key, inner in value.items()}


def declared_nodes(name: str, cfg: DictConfig) -> dict[str, Any]:
    """The valid keys of conf/<name>.yaml composed into `cfg`, for pipelines.config_checks.check_nodes:
    each key maps to None or to the valid keys of its own mapping."""
    raw = OmegaConf.to_container(OmegaConf.load(conf_path(f"{name}.yaml")), resolve=False)
    nodes = {key: None for key in map(_package, raw.pop("defaults", [])) if key is not None}
    raw.pop("hydra", None)
    for key, value in raw.items():
        nodes[key] = _written(value, cfg._get_node(key) if key in cfg else None)
    return nodes
