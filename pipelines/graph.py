"""Build the knowledge graph of an index (A2RAG): `python -m pipelines.graph index.path=<dir>`."""

from __future__ import annotations

import logging
from functools import partial

from omegaconf import DictConfig, OmegaConf

from arag.config.cli import pipeline_main
from arag.graph.build import GraphSettings
from arag.runtime.cluster import init_ray
from arag.runtime.graph_job import GraphRuntime, build_graph
from pipelines.errors import exit_on_error
from pipelines.config_checks import check_graph_config

log = logging.getLogger("pipelines.graph")


def settings_from_config(cfg: DictConfig) -> GraphSettings:
    g = OmegaConf.to_container(cfg.graph, resolve=True)
    return GraphSettings(
        extractor=g["extractor"], chunks_per_part=int(g["chunks_per_part"]), summaries=g["summaries"], summary_sentences=int(g["summary_sentences"]), limit_chunks=g["limit_chunks"]
    )


@pipeline_main("graph")
def main(cfg: DictConfig) -> None:
    with exit_on_error():
        if not cfg.index.path:
            raise ValueError("name the index: index.path=<dir> (built with python -m pipelines.index)")
        check_graph_config(cfg)
        result = build_graph(
            str(cfg.index.path),
            settings_from_config(cfg),
            GraphRuntime(**OmegaConf.to_container(cfg.runtime.graph)),
            overwrite=bool(cfg.graph.overwrite),
            progress=bool(cfg.progress),
            ray_init=partial(init_ray, num_cpus=cfg.runtime.num_cpus),
        )
    print(result.summary())
    if result.manifest["num_rejected"] or result.manifest.get("num_summary_rejected"):
        print(f"extractor output that could not be used is kept in {cfg.index.path}/graph/rejects")
    print(f"graph: {cfg.index.path}/graph")


if __name__ == "__main__":
    main()
