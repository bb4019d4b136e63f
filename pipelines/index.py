"""Build an A-RAG index: `python -m pipelines.index +corpus=<name> index.path=<dir>`."""

from __future__ import annotations

import logging
from functools import partial

from omegaconf import DictConfig, OmegaConf

from arag.config.cli import pipeline_main
from arag.corpus.readers import corpus_spec_from_config
from arag.index.build import IndexSettings, sample_rejects
from arag.index.embedding import EmbedderSpec
from arag.index.layout import IndexLayout
from arag.index.parts import ChunkingSettings
from arag.runtime.cluster import init_ray
from arag.runtime.index_job import EmbedRuntime, build_index
from pipelines.errors import exit_on_error
from pipelines.config_checks import check_index_config

log = logging.getLogger("pipelines.index")


def settings_from_config(cfg: DictConfig) -> IndexSettings:
    return IndexSettings(
        corpus=corpus_spec_from_config(OmegaConf.to_container(cfg.corpus, resolve=True)),
        embedder=EmbedderSpec.from_config(OmegaConf.to_container(cfg.embedder, resolve=True)),
        chunking=ChunkingSettings(
            mode=str(cfg.index.chunking),
            chunk_tokens=int(cfg.index.chunk_tokens),
            chunk_overlap=int(cfg.index.chunk_overlap),
            language=str(cfg.index.language),
        ),
        faiss_factory=str(cfg.index.faiss_factory),
        ann=str(cfg.index.ann),
        ann_recall=cfg.index.ann_recall,
        ann_questions=None if cfg.index.ann_questions is None else str(cfg.index.ann_questions),
    )


@pipeline_main("index")
def main(cfg: DictConfig) -> None:
    with exit_on_error():
        if "corpus" not in cfg:
            raise ValueError("choose a corpus with +corpus=<name> (wiki, 2wikimultihopqa, 2wikimultihopqa-passages, 2wikimultihopqa-linearrag, graphrag-bench-medical, graphrag-bench-novel, graphrag-bench-novel-docs, jsonl, json, parquet)")
        check_index_config(cfg)
        settings = settings_from_config(cfg)
        result = build_index(
            settings,
            str(cfg.index.path),
            embed=EmbedRuntime(**OmegaConf.to_container(cfg.runtime.embed)),
            overwrite=bool(cfg.index.overwrite),
            progress=bool(cfg.progress),
            ray_init=partial(init_ray, num_cpus=cfg.runtime.num_cpus),
            verify_inputs=bool(cfg.index.verify_inputs),
        )
    print(result.summary())
    if result.manifest["num_rejected"]:
        layout = IndexLayout(cfg.index.path)
        print(f"rejected records are kept in {layout.root / 'rejects'}; the first ones:")
        for source, line, reason in sample_rejects(layout, result.manifest, 5):
            print(f"  {source}:{line}: {reason}")
    print(f"index: {cfg.index.path}")


if __name__ == "__main__":
    main()
