"""Each pipeline's config check: its one conversion to typed settings (arag.config.typed.typed_config:
struct mode, the schemas' types, a key added with `+` refused by name), then the keys of the untyped
mappings a library object reads (model, method, corpus, embedder), checked against that object.
Each returns the typed settings."""

from __future__ import annotations

from typing import Any

from arag.config.typed import typed_config
from arag.strict_settings import check_keys, field_names

# Keys of a corpus config besides CorpusSpec's: its defaults for index.chunking and index.chunk_tokens
# (conf/index.yaml reads them) and questions.path (conf/evaluate.yaml), for a corpus that re-chunks a
# benchmark under its own name.
CORPUS_DEFAULTS = ("chunking", "chunk_tokens", "questions")


def check_ask_config(cfg: Any, *, judged: bool = False) -> Any:
    """ask's settings; `judged`: evaluate's (the judge's model and a corpus besides)."""
    from arag.corpus.readers import CorpusSpec, FieldNames
    from arag.llm.factory import check_model_settings
    from arag.methods import method_class

    config = typed_config(cfg)
    method_class(config.method)
    for model, group in ((config.model, "model"), (config.judge.model if judged else None, "judge.model")):
        if model is not None:
            check_model_settings(model, group)
    if judged and config.corpus is not None:
        check_keys("corpus", config.corpus, (*field_names(CorpusSpec), *CORPUS_DEFAULTS))
        check_keys("corpus.fields", config.corpus.get("fields") or {}, field_names(FieldNames))
    return config


def check_evaluate_config(cfg: Any) -> Any:
    return check_ask_config(cfg, judged=True)


def check_rejudge_config(cfg: Any) -> Any:
    from arag.llm.factory import check_model_settings

    config = typed_config(cfg)
    if config.judge.model is not None:
        check_model_settings(config.judge.model, "judge.model")
    return config


def check_index_config(cfg: Any) -> Any:
    from arag.corpus.readers import CorpusSpec, FieldNames
    from arag.index.embedding import EmbedderSpec

    config = typed_config(cfg)
    if config.corpus is not None:
        check_keys("corpus", config.corpus, (*field_names(CorpusSpec), *CORPUS_DEFAULTS))
        check_keys("corpus.fields", config.corpus.get("fields") or {}, field_names(FieldNames))
    EmbedderSpec.from_config(config.embedder or {})
    return config


def check_graph_config(cfg: Any) -> Any:
    from arag.llm.factory import check_model_settings

    config = typed_config(cfg)
    if config.graph.extractor.model is not None:
        check_model_settings(config.graph.extractor.model, "graph.extractor.model")
    return config


check_serve_config = check_report_config = check_view_config = typed_config
