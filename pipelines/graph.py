"""Build the knowledge graph of an index (A2RAG): `python -m pipelines.graph index.path=<dir>`."""

from __future__ import annotations

import dataclasses
import logging
from functools import partial

from omegaconf import DictConfig

from pipelines.command_line import pipeline_main
from arag.config.schemas import GraphPipeline
from arag.config.typed import typed_config
from arag.graph.build import GraphSettings
from arag.runtime.cluster import init_ray
from arag.runtime.graph_job import build_graph
from pipelines.errors import exit_on_error

log = logging.getLogger("pipelines.graph")


def settings_from_config(config: DictConfig | GraphPipeline) -> GraphSettings:
    graph = typed_config(config).graph
    return GraphSettings(
        extractor=dataclasses.asdict(graph.extractor), chunks_per_part=graph.chunks_per_part, summaries=graph.summaries, summary_sentences=graph.summary_sentences, limit_chunks=graph.limit_chunks
    )


@pipeline_main("graph")
def main(config: GraphPipeline) -> None:
    with exit_on_error():
        if not config.index.path:
            raise ValueError("name the index: index.path=<dir> (built with python -m pipelines.index)")
        result = build_graph(
            str(config.index.path),
            settings_from_config(config),
            config.runtime.graph,
            overwrite=config.graph.overwrite,
            progress=config.progress,
            ray_init=partial(init_ray, num_cpus=config.runtime.num_cpus),
        )
    print(result.summary())
    if result.manifest["num_rejected"] or result.manifest.get("num_summary_rejected"):
        print(f"extractor output that could not be used is kept in {config.index.path}/graph/rejects")
    print(f"graph: {config.index.path}/graph")


if __name__ == "__main__":
    main()
