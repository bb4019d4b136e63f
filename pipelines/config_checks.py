"""A pipeline's one conversion to typed settings: arag.config.typed.typed_config (struct mode, the
schemas' types, a key added with `+` refused by name), then the keys of the untyped mappings that a
library object reads (the models, the method, the corpus, the embedder), checked against that object,
so that a misspelled key stops the command before the questions, the index and Ray."""

from __future__ import annotations

from typing import Any

from arag.config.typed import typed_config
from arag.strict_settings import check_keys, field_names

# Keys of a corpus config besides CorpusSpec's: its defaults for index.chunking and index.chunk_tokens
# (conf/index.yaml reads them) and questions.path (conf/evaluate.yaml), for a corpus that re-chunks a
# benchmark under its own name.
CORPUS_DEFAULTS = ("chunking", "chunk_tokens", "questions")


def setting(config: Any, path: str) -> Any:
    """The value at the dotted `path` of the settings, None where the pipeline has no such setting."""
    for name in path.split("."):
        config = getattr(config, name, None)
    return config


def checked_settings(cfg: Any) -> Any:
    """The typed settings of the composed `cfg` (typed settings are returned as they are), their
    untyped mappings' keys checked."""
    from arag.corpus.readers import CorpusSpec, FieldNames
    from arag.index.embedding import EmbedderSpec
    from arag.llm.factory import check_model_settings
    from arag.methods import method_class

    config = typed_config(cfg)
    if hasattr(config, "method"):
        method_class(config.method)
    for group in ("model", "judge.model", "graph.extractor.model"):
        if (model := setting(config, group)) is not None:
            check_model_settings(model, group)
    if getattr(config, "corpus", None) is not None:
        check_keys("corpus", config.corpus, (*field_names(CorpusSpec), *CORPUS_DEFAULTS))
        check_keys("corpus.fields", config.corpus.get("fields") or {}, field_names(FieldNames))
    if hasattr(config, "embedder"):
        EmbedderSpec.from_config(config.embedder or {})
    return config
