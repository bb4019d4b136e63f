"""The keys each pipeline's config accepts, checked before any work starts (arag.strict_settings):
a misspelled or unknown key, added with `+key=value` or in a YAML file, stops the command with the
key named and the valid keys listed. The config groups are checked against the settings objects
that read them (dataclass fields, a backend's constructor), the pipelines' own nodes against the
names below; the command line's keys are checked before that, against the composed config
(arag.config.cli)."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from omegaconf import DictConfig, OmegaConf

from arag.config.schemas import AgentConfig, EvalRuntime, IndexSource, JudgeNode
from arag.strict_settings import check_keys, field_names


def schema_keys(schema: type) -> dict[str, Any]:
    """`check_nodes`' key tree of a dataclass schema (arag.config.schemas): a nested dataclass field is a mapping."""
    return {f.name: schema_keys(f.default_factory) if dataclasses.is_dataclass(f.default_factory) else None for f in dataclasses.fields(schema) if f.init}


def _plain(node: Any) -> Any:
    return OmegaConf.to_container(node, resolve=False) if isinstance(node, DictConfig) else node


def _mapping(group: str, node: Any) -> Mapping[str, Any]:
    node = _plain(node)
    if not isinstance(node, Mapping):
        raise ValueError(f"setting {group} must be a mapping of keys, got {node!r}")
    return node


def check_nodes(cfg: Any, nodes: Mapping[str, Any], group: str = "") -> None:
    """`nodes` maps each valid key to None (a value) or to the valid keys of its own mapping."""
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
    from arag.runtime.index_job import EmbedRuntime

    check_nodes(
        cfg,
        {
            "data_dir": None,
            "progress": None,
            "index": dict.fromkeys(("path", "chunking", "chunk_tokens", "chunk_overlap", "language", "faiss_factory", "overwrite", "ann", "ann_recall", "ann_questions", "verify_inputs")),
            "corpus": corpus_keys(),
            "embedder": dict.fromkeys(field_names(EmbedderSpec)),
            "runtime": {"num_cpus": None, "embed": dict.fromkeys(field_names(EmbedRuntime))},
        },
    )


def check_graph_config(cfg: DictConfig) -> None:
    """`python -m pipelines.graph` (conf/graph.yaml, graph.extractor.model)."""
    from arag.graph.build import GraphSettings
    from arag.graph.extract import EXTRACTOR_KEYS
    from arag.runtime.graph_job import GraphRuntime

    graph_keys = {k: None for k in field_names(GraphSettings) if k != "extractor"}
    check_nodes(
        cfg,
        {
            "index": {"path": None},
            "graph": {**graph_keys, "overwrite": None, "extractor": dict.fromkeys(EXTRACTOR_KEYS)},
            "runtime": {"num_cpus": None, "graph": dict.fromkeys(field_names(GraphRuntime))},
            "progress": None,
        },
    )
    if cfg.graph.extractor.get("model") is not None:  # kind=llm without one: make_extractor names the setting
        check_model(cfg.graph.extractor.get("model"), "graph.extractor.model")


def check_ask_config(cfg: DictConfig) -> None:
    """`python -m pipelines.ask` (conf/ask.yaml, model, method)."""
    check_nodes(
        cfg,
        {
            "model": None,
            "method": None,
            "index": schema_keys(IndexSource),
            "question": None,
            "question_id": None,
            "agent": schema_keys(AgentConfig),
            "show": {"observation_lines": None},
            "output": None,
        },
    )
    check_model(cfg.model)
    check_method(cfg.method)


def check_evaluate_config(cfg: DictConfig) -> None:
    """`python -m pipelines.evaluate` (conf/evaluate.yaml, model, method, +corpus)."""

    check_nodes(
        cfg,
        {
            "model": None,
            "method": None,
            "corpus": corpus_keys(),
            "data_dir": None,
            "questions": {"path": None, "on_bad_line": None},
            "limit": None,
            "index": schema_keys(IndexSource),
            "results": {"path": None},
            "agent": schema_keys(AgentConfig),
            "judge": schema_keys(JudgeNode),
            "runtime": schema_keys(EvalRuntime),
            "progress": None,
        },
    )
    check_model(cfg.model)
    if cfg.judge.get("model") is not None:
        check_model(cfg.judge.model, "judge.model")
    check_method(cfg.method)


def check_rejudge_config(cfg: DictConfig) -> None:
    """`python -m pipelines.rejudge` (conf/rejudge.yaml, judge)."""

    check_nodes(
        cfg,
        {
            "results": {"path": None},
            "runs": None,
            "out": None,
            "concurrency": None,
            "batch_size": None,
            "progress": None,
            "judge": schema_keys(JudgeNode),
        },
    )
    if cfg.judge.get("model") is not None:
        check_model(cfg.judge.model, "judge.model")


def check_serve_config(cfg: DictConfig) -> None:
    """`python -m pipelines.serve` (conf/serve.yaml); `serve` is checked by ServeSettings.from_dict,
    `tools` by arag.serve.app.tool_context_options (the keys each reads, checked where they are read)."""
    from arag.serve.app import tool_context_options

    check_nodes(cfg, {"index": {"path": None}, "serve": None, "tools": None})
    if cfg.get("tools") is not None:
        tool_context_options(_mapping("tools", cfg.tools))


def check_report_config(cfg: DictConfig) -> None:
    """`python -m pipelines.report` (conf/report.yaml)."""
    check_nodes(cfg, {"results": {"path": None}, "report": {"path": None, "title": None, "where": None, "paper_columns": None}})


def check_view_config(cfg: DictConfig) -> None:
    """`python -m pipelines.view` (conf/view.yaml)."""
    check_nodes(cfg, {"results": {"path": None}, "view": {"host": None, "port": None, "open_browser": None}})
    port, open_browser = cfg.view.port, cfg.view.open_browser
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"view.port must be a port number from 0 to 65535 (0: any free one), got {port!r}")
    if not isinstance(open_browser, bool):
        raise ValueError(f"view.open_browser must be true or false, got {open_browser!r}")
