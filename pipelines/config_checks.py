"""The keys each pipeline's config accepts, checked before any work starts: a misspelled or unknown
key, added with `+key=value` or in a YAML file, stops the command with the key named and the valid
keys listed (arag.strict_settings). A node with a schema (arag.config.schemas) is checked against it
(arag.config.typed); the groups a library object reads (model, method, corpus, embedder) against that
object; the top level and the untyped nodes against what the pipeline's YAML declares
(arag.config.declared). The command line's keys are checked before that, against the composed
config (arag.config.cli)."""

from __future__ import annotations

from typing import Any, Mapping

from omegaconf import DictConfig, OmegaConf

from arag.config.declared import declared_nodes
from arag.config.typed import check_schema_nodes
from arag.strict_settings import check_keys, field_names


def _mapping(group: str, node: Any, resolve: bool = False) -> Mapping[str, Any]:
    node = OmegaConf.to_container(node, resolve=resolve) if isinstance(node, DictConfig) else node
    if not isinstance(node, Mapping):
        raise ValueError(f"setting {group} must be a mapping of keys, got {node!r}")
    return node


def check_config(cfg: DictConfig, name: str, optional: Mapping[str, Any] | None = None) -> None:
    """The keys conf/<name>.yaml declares and the `optional` groups (those chosen with `+group=`,
    see check_nodes), then every schema-typed node."""
    check_nodes(cfg, {**declared_nodes(name, cfg), **(optional or {})})
    check_schema_nodes(cfg)


def check_nodes(cfg: Any, nodes: Mapping[str, Any], group: str = "") -> None:
    """`nodes` maps each valid key to None (a value, or a node with a schema) or to the valid keys of its own mapping."""
    given = _mapping(group or "the config", cfg)
    check_keys(group, given, nodes)
    for key, inner in nodes.items():
        if inner is not None and given.get(key) is not None:
            check_nodes(given[key], inner, f"{group}.{key}" if group else key)


# Keys of a corpus config that are not the corpus's own: its defaults for index.chunking and
# index.chunk_tokens (conf/index.yaml reads them), e.g. packed chunking for the benchmark corpora,
# and for questions.path (conf/evaluate.yaml), for a corpus that re-chunks a benchmark under its own name.
CORPUS_INDEX_DEFAULTS = ("chunking", "chunk_tokens", "questions")


def corpus_keys() -> dict[str, Any]:
    from arag.corpus.readers import CorpusSpec, FieldNames

    return {**dict.fromkeys(field_names(CorpusSpec)), **dict.fromkeys(CORPUS_INDEX_DEFAULTS), "fields": dict.fromkeys(field_names(FieldNames))}


def check_model(cfg: Any, group: str = "model") -> None:
    from arag.llm.factory import check_model_settings

    check_model_settings(_mapping(group, cfg), group)


def check_method(cfg: Any) -> None:
    from arag.methods import method_class

    method_class(_mapping("method", cfg))


def check_index_config(cfg: DictConfig) -> None:
    """`python -m pipelines.index` (conf/index.yaml, +corpus, embedder, runtime)."""
    from arag.index.embedding import EmbedderSpec

    check_config(cfg, "index", {"corpus": corpus_keys()})
    EmbedderSpec.from_config(_mapping("embedder", cfg.get("embedder"), resolve=True))


def check_graph_config(cfg: DictConfig) -> None:
    """`python -m pipelines.graph` (conf/graph.yaml, graph.extractor.model)."""
    check_config(cfg, "graph")
    if cfg.graph.extractor.get("model") is not None:  # kind=llm without one: make_extractor names the setting
        check_model(cfg.graph.extractor.get("model"), "graph.extractor.model")


def check_ask_config(cfg: DictConfig) -> None:
    """`python -m pipelines.ask` (conf/ask.yaml, model, method)."""
    check_config(cfg, "ask")
    check_model(cfg.model)
    check_method(cfg.method)


def check_count(key: str, value: Any, what: str) -> None:
    """A setting that counts `what` and may be null (all of them): a whole number of at least 1.
    Its YAML default is null, so neither Hydra nor a schema gives it a type."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return
    kind = "" if isinstance(value, int) and not isinstance(value, bool) else f" (a {type(value).__name__})"
    raise ValueError(f"setting {key}={value!r}{kind}: {key} takes a whole number of {what} of at least 1, or null for all of them")


def check_evaluate_config(cfg: DictConfig) -> None:
    """`python -m pipelines.evaluate` (conf/evaluate.yaml, model, method, +corpus)."""
    check_config(cfg, "evaluate", {"corpus": corpus_keys()})
    check_count("limit", cfg.get("limit"), "questions")
    check_model(cfg.model)
    if cfg.judge.get("model") is not None:
        check_model(cfg.judge.model, "judge.model")
    check_method(cfg.method)


def check_rejudge_config(cfg: DictConfig) -> None:
    """`python -m pipelines.rejudge` (conf/rejudge.yaml, judge)."""
    check_config(cfg, "rejudge")
    if cfg.judge.get("model") is not None:
        check_model(cfg.judge.model, "judge.model")


def check_serve_config(cfg: DictConfig) -> None:
    """`python -m pipelines.serve` (conf/serve.yaml; `serve` and `tools` have schemas, ServeConfig and ToolOptions)."""
    check_config(cfg, "serve")


def check_report_config(cfg: DictConfig) -> None:
    """`python -m pipelines.report` (conf/report.yaml)."""
    check_config(cfg, "report")


def check_view_config(cfg: DictConfig) -> None:
    """`python -m pipelines.view` (conf/view.yaml)."""
    check_config(cfg, "view")
    if not 0 <= cfg.view.port <= 65535:  # an int: the schema (ViewConfig) refuses any other type
        raise ValueError(f"view.port must be a port number from 0 to 65535 (0: any free one), got {cfg.view.port!r}")
