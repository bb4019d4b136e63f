"""Build an index's graph on Ray: one task per extraction part (committed parts are skipped), one
merge task, the graph manifest last (docs/agents.md, "The graph job")."""

from __future__ import annotations

import logging
import os
import socket
import time
from typing import Any, Callable, Mapping

from arag.config.schemas import GraphRuntime  # the `runtime.graph` node's schema, re-exported here
from arag.graph.build import (
    GraphLayout,
    GraphPartRecord,
    GraphSettings,
    assemble_graph_manifest,
    commit_graph_manifest,
    extract_part,
    merge_graph,
    plan_graph_parts,
    prepare_graph_directory,
)
from arag.graph.extract import make_extractor
from arag.index.layout import read_json
from arag.index.store import open_index
from arag.llm.factory import threads_in_process
from arag.runtime.build_job import JobResult, join_ray
from arag.runtime.cluster import init_ray
from arag.runtime.faults import hold_at_fault_point
from arag.runtime.part_runner import PartTasks, run_parts

log = logging.getLogger("arag.graph")


class GraphResult(JobResult):
    def summary(self) -> str:
        m = self.manifest
        if self.action == "up_to_date":
            return f"graph up to date: {m['num_nodes']} nodes, {m['num_edges']} edges (nothing to do)"
        return (
            f"graph: {m['num_nodes']} nodes, {m['num_edges']} edges, {m['num_triples']} triples from {m['num_chunks']} chunks "
            f"({m['num_rejected']} rejected; extractor {m['extractor']}, gate summaries {m['summaries']}"
            + (f", {m['num_summary_rejected']} summaries rejected" if m.get("num_summary_rejected") else "")
            + f") in {self.elapsed_s:.1f}s by {len(m['workers'])} worker processes on {len({w.split('/')[0] for w in m['workers']})} Ray node(s)"
        )


def oversubscribed_cores(extractor_cfg: Mapping[str, Any], task_cpus: float, cores: int | None = None) -> str | None:
    """A warning when an extraction task's in-process model runs more threads than the task's CPUs:
    tasks side by side then share cores, and llama.cpp's spinning threads slow each many times over."""
    model = extractor_cfg.get("model") or {}
    if not model:
        return None
    threads = threads_in_process(model, cores)
    if threads is None or threads <= task_cpus:
        return None
    return (
        f"graph.extractor.model runs {model.get('backend')} in-process on {threads} threads per task but runtime.graph.num_cpus={task_cpus:g} "
        f"reserves fewer CPUs: tasks side by side will oversubscribe the cores; set runtime.graph.num_cpus={threads}"
        + (f" (or graph.extractor.model.n_threads={max(1, int(task_cpus))})" if "n_threads" in model else "")
    )


def _extract_task(part: Any, *, index_root: str, extractor_cfg: Mapping[str, Any], summaries: str) -> GraphPartRecord:
    import ray

    # Kill tests: the task of part N (and later) stops before extracting, so parts 0..N-1 are committed.
    hold_at_fault_point("ARAG_FAULT_HANG_AFTER_GRAPH_PARTS", part.part, "graph build")
    node = ray.get_runtime_context().get_node_id()[:8]
    worker = f"{node}/{socket.gethostname()}:{os.getpid()}"
    return extract_part(index_root, part, extractor_cfg, worker=worker, summaries=summaries)


def build_graph(index_root: str, settings: GraphSettings, runtime: GraphRuntime = GraphRuntime(), overwrite: bool = False, progress: bool = True,
                ray_init: Callable[[], object] = init_ray, encoder: Callable | None = None) -> GraphResult:
    """`encoder` embeds nodes, relations and summaries (default: the index's embedder, loaded in the merge task)."""
    import ray

    started = time.perf_counter()
    index = open_index(index_root)
    layout = GraphLayout(index_root)
    identity = settings.identity(index, make_extractor(settings.extractor))
    action = prepare_graph_directory(layout, identity, overwrite)
    if action == "up_to_date":
        return GraphResult.since(started, action, layout.manifest)
    plan = plan_graph_parts(index, settings.chunks_per_part, settings.limit_chunks)
    join_ray(ray_init, log)
    if warning := oversubscribed_cores(settings.extractor, runtime.num_cpus):
        log.warning(warning)
    done = {p.part: GraphPartRecord(**read_json(layout.part_file("parts", p.part))) for p in plan if layout.part_file("parts", p.part).exists()}
    shared = {"index_root": str(layout.index_root), "extractor_cfg": dict(settings.extractor), "summaries": settings.summary_mode}
    tasks = PartTasks(num_cpus=runtime.num_cpus, num_gpus=runtime.num_gpus, max_in_flight=runtime.max_in_flight)
    totals = {"triples": "num_triples", "rejected": "num_rejected"}
    records = run_parts(
        plan, done, _extract_task, shared, tasks=tasks, totals=totals, size=lambda p: p.end - p.start,
        progress=progress, desc="extracting", unit="chunk",
    )
    log.info("merging %d parts", len(plan))
    merge = ray.remote(num_cpus=runtime.merge_num_cpus, max_retries=1)(merge_graph)
    counts = ray.get(merge.remote(str(layout.index_root), plan, settings.summary_sentences, encoder, settings.summary_mode == "llm"))
    elapsed = time.perf_counter() - started
    manifest = assemble_graph_manifest(layout, identity, records, counts, elapsed)
    commit_graph_manifest(layout, manifest)
    return GraphResult(action, manifest, elapsed)
