"""The one conversion of a composed config (conf/<pipeline>.yaml over its root schema,
arag.config.schemas) to its typed objects, at a pipeline's entry point: merged into its root schema,
whose struct mode refuses a key that Hydra's `+key=value` added (`+` bypasses struct mode), then built
by OmegaConf (`to_object`), the schemas' own checks running as they are built. OmegaConf's error for
an unknown key becomes one line naming it and the key probably meant (`unknown_key`)."""

from __future__ import annotations

import dataclasses
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError

from arag.strict_settings import UnknownSettingError, field_names, unknown_setting


def unknown_key(exc: ConfigKeyError | ConfigAttributeError) -> UnknownSettingError | None:
    """OmegaConf's error for a key its node (a schema's, or an untyped mapping's) does not have."""
    parent, _, key = str(exc.full_key).rpartition(".")
    schema = exc.object_type
    return unknown_setting(parent, [key], field_names(schema) if dataclasses.is_dataclass(schema) else exc.parent_node.keys())


def check_schema_nodes(cfg: DictConfig) -> DictConfig:
    """`cfg` merged into its root schema; UnknownSettingError for a key a schema node does not declare
    (an untyped mapping, such as model, method or corpus, is its reader's to check)."""
    try:
        return OmegaConf.merge(OmegaConf.structured(OmegaConf.get_type(cfg)), OmegaConf.to_container(cfg))
    except (ConfigKeyError, ConfigAttributeError) as exc:
        raise unknown_key(exc) from None


def _settle(node: DictConfig, path: str = "") -> None:
    """Null each value derived from a group that was not chosen (index.path from the name of a corpus
    not chosen with +corpus); a mandatory value left unset (???) is an error naming it."""
    for key in node.keys():
        child, name = node._get_node(key), f"{path}{key}"
        if isinstance(child, DictConfig) and not child._is_none():
            _settle(child, f"{name}.")
        elif OmegaConf.is_missing(node, str(key)):
            raise ValueError(f"setting {name} has no value: give one with {name}=...")
        elif OmegaConf.is_interpolation(node, str(key)) and OmegaConf.select(node, str(key), throw_on_resolution_failure=False) is None:
            node[key] = None


def typed_config(cfg: Any) -> Any:
    """The pipeline's settings object for the composed `cfg` (a typed one is returned as it is)."""
    if not isinstance(cfg, DictConfig):
        return cfg
    cfg = check_schema_nodes(cfg)
    _settle(cfg)
    return OmegaConf.to_object(cfg)
