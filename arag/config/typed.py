"""A composed config's nodes that have a schema (arag.config.schemas) hold only its keys. Hydra lets
`+key=value` add a key even to such a node; this refuses it by name, with the likely key, so a library
caller that composes a config gets the same line as the command line (arag.config.cli)."""

from __future__ import annotations

import dataclasses

from omegaconf import DictConfig, OmegaConf

from arag.strict_settings import check_keys, field_names


def check_schema_nodes(node: DictConfig, path: str = "") -> None:
    """Raise UnknownSettingError for a key of a schema-typed node (at any depth) that its schema
    does not declare; untyped mappings are their readers' to check."""
    schema = OmegaConf.get_type(node)
    if dataclasses.is_dataclass(schema):
        check_keys(path, list(node.keys()), field_names(schema))
    for key in node.keys():
        child = node._get_node(key)  # the node itself: an interpolation is not resolved here
        if isinstance(child, DictConfig) and not child._is_none():
            check_schema_nodes(child, f"{path}.{key}" if path else str(key))
