"""Each pipeline's config check: its one conversion to typed settings (arag.config.typed.typed_config:
struct mode, the schemas' types, a key added with `+` refused by name), then the keys of the untyped
mappings a library object reads (model, method, corpus, embedder), checked against that object.
Each returns the typed settings."""

from __future__ import annotations

from typing import Any

from arag.config.typed import typed_config
from arag.strict_settings import check_keys, field_names


def _model(cfg: Any, group: str) -> None:
    from arag.llm.factory import check_model_settings

    if cfg is not None:
        check_model_settings(cfg, group)


def _corpus(cfg: Any) -> None:
    """CorpusSpec's keys, and the corpus's defaults for index.chunking, index.chunk_tokens
    (conf/index.yaml reads them) and questions.path (conf/evaluate.yaml), for a corpus that re-chunks
    a benchmark under its own name."""
    from arag.corpus.readers import CorpusSpec, FieldNames

    if cfg is not None:
        check_keys("corpus", cfg, (*field_names(CorpusSpec), "chunking", "chunk_tokens", "questions"))
        check_keys("corpus.fields", cfg.get("fields") or {}, field_names(FieldNames))


def check_ask_config(cfg: Any) -> Any:
    from arag.methods import method_class

    config = typed_config(cfg)
    _model(config.model, "model")
    method_class(config.method)
    return config


def check_evaluate_config(cfg: Any) -> Any:
    config = check_ask_config(cfg)
    _corpus(config.corpus)
    _model(config.judge.model, "judge.model")
    return config


def check_rejudge_config(cfg: Any) -> Any:
    config = typed_config(cfg)
    _model(config.judge.model, "judge.model")
    return config


def check_index_config(cfg: Any) -> Any:
    from arag.index.embedding import EmbedderSpec

    config = typed_config(cfg)
    _corpus(config.corpus)
    EmbedderSpec.from_config(config.embedder or {})
    return config


def check_graph_config(cfg: Any) -> Any:
    config = typed_config(cfg)
    _model(config.graph.extractor.model, "graph.extractor.model")
    return config


check_serve_config = check_report_config = check_view_config = typed_config
