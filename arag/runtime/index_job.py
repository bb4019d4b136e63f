"""Run an index build on Ray: phase 1 (chunk) one Ray Data task per part, phase 2 (embed) on an actor
pool, the ANN phase, the manifest last (docs/development.md). No text or vector passes through the
driver; everything scheduled is plain Python from `arag.index`, so a part is built byte-for-byte as
without Ray."""

from __future__ import annotations

import json
import logging
import time
from typing import Callable

import ray

from arag.config.schemas import EmbedRuntime  # the `runtime.embed` node's schema, re-exported here
from arag.corpus.readers import CorpusSpec, InputPart, plan_parts
from arag.index.build import (
    BuildAction,
    IndexDirectoryError,
    IndexSettings,
    assemble_manifest,
    commit_manifest,
    find_duplicate_chunk_ids,
    prepare_directory,
    reopen_for_rebuild,
)
from arag.index.embedding import EmbedderSpec, SentenceEmbedder
from arag.index.layout import IndexLayout
from arag.index.part_vectors import committed_vectors, embed_part
from arag.index.parts import ChunkingSettings, PartRecord, build_or_keep_part, discard_parts_beyond, read_part_record, unchanged_since_read, verify_part
from arag.runtime.ann_job import run_ann_phase
from arag.runtime.cluster import init_ray
from arag.runtime.faults import hold_at_fault_point
from arag.runtime.build_job import JobResult, join_ray
from arag.runtime.part_runner import PartTasks, run_part_tasks, run_parts
from arag.runtime.progress import progress_bar
from arag.verbosity import harmless_ray_lines_hidden
from arag.index.keyword.part_cache import build_part_cache
from arag.tools.index_cache import part_cache_dir

log = logging.getLogger("arag.index")


class BuildResult(JobResult):
    def summary(self) -> str:
        m = self.manifest
        counts = f"{m['num_documents']} documents, {m['num_chunks']} chunks, {m['num_sentences']} sentences, {m['num_rejected']} rejected"
        if self.action is BuildAction.UP_TO_DATE:
            return f"index up to date: {counts} (nothing to do)"
        rate = m["num_sentences"] / self.elapsed_s if self.elapsed_s > 0 else 0.0
        return f"indexed {counts} in {self.elapsed_s:.1f}s ({rate:.0f} sentences/s)"


def _build_part_task(part: InputPart, *, corpus: CorpusSpec, chunking: ChunkingSettings, root: str, rehash: bool) -> PartRecord:
    """Phase 1's task: one input part in, its commit record out (kept if its input is unchanged), with
    the retrieval tools' cache of the part."""
    layout = IndexLayout(root)
    record, built = build_or_keep_part(corpus, part, chunking, layout, rehash)
    cache = part_cache_dir(layout.root, part.part)
    if built or not cache.exists():
        build_part_cache(layout.chunks(part.part), layout.sentences(part.part), part.part, cache)
    return record


def _verify_part_task(part: InputPart, *, corpus: CorpusSpec, root: str) -> dict:
    record = read_part_record(IndexLayout(root), part.part)
    return {"part": part.part, "same": record is not None and verify_part(corpus, part, record, rehash=True)}


class _PartEmbedder:
    """Phase 2's actor: loads the model once, embeds whole parts and writes their shards where it runs."""

    def __init__(self, spec: EmbedderSpec, root: str, factory: str, sentences_per_call: int):
        self.model = SentenceEmbedder(spec)
        self.layout = IndexLayout(root)
        self.factory, self.sentences_per_call = factory, sentences_per_call
        self.node = ray.get_runtime_context().get_node_id()
        self.written = 0

    def __call__(self, row: dict) -> dict:
        part = PartRecord(**json.loads(row["record"]))
        record = embed_part(self.layout, part, self.model.encode_documents, self.factory, self.sentences_per_call, self.node)
        self.written += 1
        hold_at_fault_point("ARAG_FAULT_HANG_AFTER_SHARDS", self.written, "build")  # kill tests: this actor stops after N shards
        return record.to_json()


def build_index(settings: IndexSettings, root: str, embed: EmbedRuntime = EmbedRuntime(), overwrite: bool = False, progress: bool = True,
                ray_init: Callable[[], object] = init_ray, verify_inputs: bool = False) -> BuildResult:
    """verify_inputs: hash every committed input again, not trusting an unchanged size and mtime."""
    started = time.perf_counter()
    layout = IndexLayout(root)
    settings.corpus.validate()  # a missing path or unknown format fails before any work
    action = prepare_directory(layout, settings, overwrite)
    plan = plan_parts(settings.corpus)
    log.info("planned %d parts from %s", len(plan), settings.corpus.path)
    if action is BuildAction.UP_TO_DATE:
        # A part whose file kept its size and mtime is trusted; the others must hash the same.
        suspect = plan if verify_inputs else _parts_touched_since_read(settings, layout, plan)
        if not suspect:
            return BuildResult.since(started, action, layout.manifest)
        join_ray(ray_init, log)
        stale = _stale_parts(settings, layout, suspect, progress)
        if not stale:
            return BuildResult.since(started, action, layout.manifest)
        log.info("input content changed under %d of %d parts (%s): rebuilding them", len(stale), len(plan), _part_files(plan, stale))
        reopen_for_rebuild(layout, settings, stale)
        action = BuildAction.RESUME
        verified = {p.part for p in plan} - set(stale)
    else:
        join_ray(ray_init, log)
        verified = set()
    if action is BuildAction.RESUME and discard_parts_beyond(layout, len(plan)):
        log.info("the inputs now plan into %d parts: the parts beyond were discarded", len(plan))

    # Chunk every part without a record; check the others against their input unless verified (a killed
    # build may be resumed on edited files).
    shared = {"corpus": settings.corpus, "chunking": settings.chunking, "root": str(layout.root), "rehash": verify_inputs}
    done = {p: read_part_record(layout, p) for p in verified}
    totals = {"chunks": "num_chunks", "rejected": "num_rejected"}
    records = run_parts(plan, done, _build_part_task, shared, progress=progress, desc="chunking", totals=totals)
    check = ray.remote(num_cpus=1, max_retries=1)(find_duplicate_chunk_ids)  # on a worker: only the duplicates come back
    duplicates = [tuple(d) for d in ray.get(check.remote(layout, records))]
    if duplicates:
        raise IndexDirectoryError(
            f"duplicate chunk ids (document ids repeat in the corpus): {duplicates}; "
            "fix the corpus or set corpus.fields.id=null to number documents by file and line"
        )
    dimension = _run_phase2(settings, layout, records, embed, progress)
    ann = run_ann_phase(settings, layout, records, progress, use_gpu=bool(embed.num_gpus))
    elapsed = time.perf_counter() - started
    manifest = assemble_manifest(layout, settings, plan, records, dimension, elapsed, ann=ann)
    commit_manifest(layout, manifest)
    return BuildResult(action, manifest, elapsed)


def _part_files(plan: list[InputPart], parts: list[int]) -> str:
    files = sorted({plan[p].file for p in parts})
    return ", ".join(files[:5]) + (f" and {len(files) - 5} more files" if len(files) > 5 else "")


def _parts_touched_since_read(settings: IndexSettings, layout: IndexLayout, plan: list[InputPart]) -> list[InputPart]:
    records = [(part, read_part_record(layout, part.part)) for part in plan]
    return [part for part, record in records if record is None or not unchanged_since_read(settings.corpus, part, record)]


def _stale_parts(settings: IndexSettings, layout: IndexLayout, plan: list[InputPart], progress: bool) -> list[int]:
    """Parts whose input no longer hashes to their record's digest (one Ray Data task per part)."""
    stale = []
    with progress_bar(len(plan), "checking inputs", progress, unit="part") as bar:
        for row in run_part_tasks(_verify_part_task, plan, {"corpus": settings.corpus, "root": str(layout.root)}, PartTasks()):
            if not row["same"]:
                stale.append(int(row["part"]))
            bar.update(1)
    return sorted(stale)


def _run_phase2(settings: IndexSettings, layout: IndexLayout, records: list[PartRecord], embed: EmbedRuntime, progress: bool) -> int:
    """Embed every part without a complete vectors record; the dimension."""
    import ray.data

    committed = {r.part: committed_vectors(layout, r) for r in records if r.num_sentences}
    todo = [r for r in records if r.num_sentences and committed[r.part] is None]
    total = sum(r.num_sentences for r in records)
    dimension = next((v.dimension for v in committed.values() if v is not None), 0)
    with progress_bar(total, "embedding", progress, unit="sent") as bar:
        bar.update(total - sum(r.num_sentences for r in todo))
        if not todo:
            return dimension
        rows = [{"record": json.dumps(r.to_json())} for r in todo]
        ds = ray.data.from_items(rows, override_num_blocks=len(rows)).map(
            _PartEmbedder,
            fn_constructor_kwargs={
                "spec": settings.embedder, "root": str(layout.root),
                "factory": settings.faiss_factory, "sentences_per_call": embed.rows_per_batch,
            },
            compute=ray.data.ActorPoolStrategy(size=embed.actors),
            num_gpus=embed.num_gpus or None,
            num_cpus=embed.num_cpus,
            **({"resources": dict(embed.resources)} if embed.resources else {}),
        )
        nodes: set[str] = set()
        with harmless_ray_lines_hidden():  # the actor pool's start logs one at error level
            for record in ds.iter_rows():
                bar.update(record["rows"])
                dimension = int(record["dimension"])
                nodes.add(record["node"])
        log.info("embedded %d parts on %d node(s)", len(todo), len(nodes))
    return dimension


__all__ = ["EmbedRuntime", "BuildResult", "build_index"]
