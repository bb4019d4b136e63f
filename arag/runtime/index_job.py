"""Run an index build on Ray: phase 1 (chunk and split) as Ray Data tasks, phase 2 (embed) on a
Ray Data actor pool, FAISS shards written as their parts complete, the manifest last.

This is the only index code that imports Ray. Everything it schedules is plain Python from
`arag.index`, so a part built here is byte-for-byte what a test builds without Ray.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from arag.corpus.readers import CorpusSpec, InputPart, plan_parts
from arag.index.build import (
    BuildAction,
    IndexDirectoryError,
    IndexSettings,
    assemble_manifest,
    commit_manifest,
    find_duplicate_chunk_ids,
    prepare_directory,
)
from arag.index.embedding import EmbedderSpec, SentenceEmbedder
from arag.index.layout import IndexLayout, part_of_sentence, read_json
from arag.index.parts import ChunkingSettings, PartRecord, build_part
from arag.index.vectors import build_shard, read_shard, write_shard
from arag.runtime.ann_job import run_ann_phase
from arag.runtime.cluster import init_ray

log = logging.getLogger("arag.index")


@dataclass(frozen=True)
class EmbedRuntime:
    actors: int = 1  # embedding actors (one per GPU on a GPU cluster)
    num_gpus: float = 0  # per actor
    num_cpus: float = 1  # per actor (torch may still use more threads: see EmbedderSpec.threads)
    rows_per_batch: int = 2048  # sentences handed to an actor at a time; it sorts them by length


@dataclass(frozen=True)
class BuildResult:
    action: BuildAction
    manifest: dict[str, Any]
    elapsed_s: float

    def summary(self) -> str:
        m = self.manifest
        rate = m["num_sentences"] / self.elapsed_s if self.elapsed_s > 0 else 0.0
        if self.action is BuildAction.UP_TO_DATE:
            return f"index up to date: {m['num_documents']} documents, {m['num_chunks']} chunks, {m['num_sentences']} sentences, {m['num_rejected']} rejected (nothing to do)"
        return (
            f"indexed {m['num_documents']} documents, {m['num_chunks']} chunks, {m['num_sentences']} sentences, "
            f"{m['num_rejected']} rejected in {self.elapsed_s:.1f}s ({rate:.0f} sentences/s)"
        )


def _build_part_row(row: dict, corpus: CorpusSpec, chunking: ChunkingSettings, root: str) -> dict:
    """Ray Data row function for phase 1: one input part in, its commit record out."""
    part = InputPart(**{k: row[k] for k in ("part", "file", "start", "end", "first_line")})
    return build_part(corpus, part, chunking, IndexLayout(root)).to_json()


class _Embedder:
    """Ray Data actor for phase 2: loads the model once, embeds batches of sentences."""

    def __init__(self, spec: EmbedderSpec):
        self.model = SentenceEmbedder(spec)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        vectors = self.model.encode_documents(list(batch["text"]))
        return {"sentence_id": batch["sentence_id"], "vector": vectors}


def _fault_point(variable: str, count: int) -> None:
    """Fault injection for the kill tests: with `variable`=N set, the build stops making progress
    (sleeps) once `count` reaches N, so a test can kill it at a known point however fast the
    machine is. Unset (always, outside tests) it does nothing."""
    limit = os.environ.get(variable)
    if limit and count >= int(limit):
        log.warning("%s=%s: holding the build here until it is killed", variable, limit)
        while True:
            time.sleep(3600)


class _ShardAssembler:
    """Collects embedded rows per part and writes a part's FAISS shard once all its rows arrived."""

    def __init__(self, layout: IndexLayout, expected: dict[int, int], factory: str):
        self.layout, self.expected, self.factory = layout, expected, factory
        self.buffers: dict[int, tuple[np.ndarray, np.ndarray, int]] = {}
        self.dimension: int | None = None
        self.written = 0

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        self.dimension = vectors.shape[1]
        parts = ids >> 32
        for part in np.unique(parts):
            mask = parts == part
            self._add_part(int(part), ids[mask], vectors[mask])

    def _add_part(self, part: int, ids: np.ndarray, vectors: np.ndarray) -> None:
        n = self.expected[part]
        if part not in self.buffers:
            self.buffers[part] = (np.empty((n, vectors.shape[1]), np.float32), np.empty(n, np.int64), 0)
        buf_v, buf_ids, filled = self.buffers[part]
        buf_v[filled : filled + len(ids)] = vectors
        buf_ids[filled : filled + len(ids)] = ids
        filled += len(ids)
        if filled < n:
            self.buffers[part] = (buf_v, buf_ids, filled)
            return
        del self.buffers[part]
        write_shard(build_shard(buf_v, buf_ids, self.factory), self.layout.vectors(part))
        self.written += 1
        _fault_point("ARAG_FAULT_HANG_AFTER_SHARDS", self.written)

    def check_complete(self) -> None:
        if self.buffers:
            incomplete = {p: f"{b[2]}/{self.expected[p]}" for p, b in self.buffers.items()}
            raise IndexDirectoryError(f"embedding finished with incomplete parts (rows received/expected): {incomplete}")


def build_index(
    settings: IndexSettings,
    root: str,
    embed: EmbedRuntime = EmbedRuntime(),
    overwrite: bool = False,
    progress: bool = True,
    ray_init: Callable[[], object] = init_ray,
) -> BuildResult:
    started = time.perf_counter()
    layout = IndexLayout(root)
    settings.corpus.validate()  # a missing path or unknown format fails before any work
    action = prepare_directory(layout, settings, overwrite)
    if action is BuildAction.UP_TO_DATE:
        return BuildResult(action, read_json(layout.manifest), time.perf_counter() - started)
    plan = plan_parts(settings.corpus)
    log.info("planned %d parts from %s", len(plan), settings.corpus.path)
    log.info("ray: %s", ray_init())
    _quiet_ray_data()

    records = _run_phase1(settings, layout, plan, progress)
    duplicates = find_duplicate_chunk_ids(layout, records)
    if duplicates:
        raise IndexDirectoryError(
            f"duplicate chunk ids (document ids repeat in the corpus): {duplicates}; "
            "fix the corpus or set corpus.fields.id=null to number documents by file and line"
        )
    dimension = _run_phase2(settings, layout, records, embed, progress)
    # One ANN over all parts' exact shards when index.ann asks for it (arag.runtime.ann_job).
    ann = run_ann_phase(settings, layout, records, progress, use_gpu=bool(embed.num_gpus))
    elapsed = time.perf_counter() - started
    manifest = assemble_manifest(layout, settings, plan, records, dimension, elapsed, ann=ann)
    commit_manifest(layout, manifest)
    return BuildResult(action, manifest, elapsed)


def _quiet_ray_data() -> None:
    import ray.data

    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False  # our own bars below say what matters
    ctx.execution_options.preserve_order = True  # parts complete in order: bounded buffering
    ctx.print_on_execution_start = False
    # Small output blocks: vectors reach the shard writer (and the progress bar) every few
    # thousand sentences instead of once per input file.
    ctx.target_max_block_size = 8 * 2**20
    logging.getLogger("ray.data").setLevel(logging.WARNING)


def _bar(total: int, unit: str, desc: str, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, unit=unit, desc=desc, disable=not enabled, file=sys.stderr, dynamic_ncols=True)


def _run_phase1(settings: IndexSettings, layout: IndexLayout, plan: list[InputPart], progress: bool) -> list[PartRecord]:
    import ray.data

    done = {p.part: PartRecord(**read_json(layout.part_record(p.part))) for p in plan if layout.part_record(p.part).exists()}
    pending = [p for p in plan if p.part not in done]
    with _bar(len(plan), "part", "chunking", progress) as bar:
        bar.update(len(done))
        if pending:
            rows = [
                {"part": p.part, "file": p.file, "start": p.start, "end": p.end, "first_line": p.first_line}
                for p in pending
            ]
            ds = ray.data.from_items(rows, override_num_blocks=len(rows)).map(
                _build_part_row,
                fn_kwargs={"corpus": settings.corpus, "chunking": settings.chunking, "root": str(layout.root)},
                num_cpus=1,
            )
            for record in ds.iter_rows():
                done[record["part"]] = PartRecord(**record)
                bar.update(1)
                bar.set_postfix(chunks=sum(r.num_chunks for r in done.values()), rejected=sum(r.num_rejected for r in done.values()))
    return [done[p.part] for p in plan]


def _run_phase2(
    settings: IndexSettings, layout: IndexLayout, records: list[PartRecord], embed: EmbedRuntime, progress: bool
) -> int:
    import ray.data

    todo = [r for r in records if r.num_sentences and not layout.vectors(r.part).exists()]
    total = sum(r.num_sentences for r in records)
    with _bar(total, "sent", "embedding", progress) as bar:
        bar.update(total - sum(r.num_sentences for r in todo))
        if not todo:
            return _dimension_from_shards(layout, records)
        assembler = _ShardAssembler(layout, {r.part: r.num_sentences for r in todo}, settings.faiss_factory)
        # One block per part: shards complete (and progress moves) part by part.
        ds = ray.data.read_parquet(
            [str(layout.sentences(r.part)) for r in todo], override_num_blocks=len(todo)
        ).select_columns(["sentence_id", "text"])
        ds = ds.map_batches(
            _Embedder,
            fn_constructor_kwargs={"spec": settings.embedder},
            batch_size=embed.rows_per_batch,
            batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=embed.actors),
            num_gpus=embed.num_gpus or None,
            num_cpus=embed.num_cpus,
        )
        for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
            assembler.add(batch["sentence_id"], batch["vector"])
            bar.update(len(batch["sentence_id"]))
        assembler.check_complete()
        return int(assembler.dimension)


def _dimension_from_shards(layout: IndexLayout, records: list[PartRecord]) -> int:
    for r in records:
        if r.num_sentences:
            return int(read_shard(layout.vectors(r.part), mmap=True).d)
    return 0


__all__ = ["EmbedRuntime", "BuildResult", "build_index", "part_of_sentence"]
