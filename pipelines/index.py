"""Build an A-RAG index: `python -m pipelines.index +corpus=<name> index.path=<dir>`."""

from __future__ import annotations

import logging
from functools import partial

from omegaconf import DictConfig

from pipelines.command_line import pipeline_main
from arag.config.schemas import IndexPipeline
from arag.config.typed import typed_config
from arag.index.embedding import EmbedderSpec
from arag.corpus.readers import corpus_spec_from_config
from arag.index.build import IndexSettings, sample_rejects
from arag.index.layout import IndexLayout
from arag.index.parts import ChunkingSettings
from arag.runtime.cluster import init_ray
from arag.runtime.index_job import build_index
from pipelines.config_checks import checked_settings
from pipelines.errors import exit_on_error

log = logging.getLogger("pipelines.index")
CORPORA = "wiki, 2wikimultihopqa, 2wikimultihopqa-passages, 2wikimultihopqa-linearrag, graphrag-bench-medical, graphrag-bench-novel, graphrag-bench-novel-docs, jsonl, json, parquet"


def settings_from_config(config: DictConfig | IndexPipeline) -> IndexSettings:
    config = typed_config(config)
    index = config.index
    return IndexSettings(
        corpus=corpus_spec_from_config(config.corpus),
        embedder=EmbedderSpec.from_config(config.embedder),
        chunking=ChunkingSettings(mode=index.chunking, chunk_tokens=index.chunk_tokens, chunk_overlap=index.chunk_overlap, language=index.language),
        faiss_factory=index.faiss_factory,
        ann=index.ann,
        ann_recall=index.ann_recall,
        ann_questions=index.ann_questions,
    )


def index_settings(cfg: DictConfig) -> IndexPipeline:
    if cfg.get("corpus") is None:
        raise ValueError(f"choose a corpus with +corpus=<name> ({CORPORA})")
    return checked_settings(cfg)


@pipeline_main("index", settings=index_settings)
def main(config: IndexPipeline) -> None:
    with exit_on_error():
        result = build_index(
            settings_from_config(config),
            str(config.index.path),
            embed=config.runtime.embed,
            overwrite=config.index.overwrite,
            progress=config.progress,
            ray_init=partial(init_ray, num_cpus=config.runtime.num_cpus),
            verify_inputs=config.index.verify_inputs,
        )
    print(result.summary())
    if result.manifest["num_rejected"]:
        layout = IndexLayout(config.index.path)
        print(f"rejected records are kept in {layout.root / 'rejects'}; the first ones:")
        for source, line, reason in sample_rejects(layout, result.manifest, 5):
            print(f"  {source}:{line}: {reason}")
    print(f"index: {config.index.path}")


if __name__ == "__main__":
    main()
