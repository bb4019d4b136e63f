"""The ANN phase of an index build on Ray: one task trains the quantizer on a sample of the exact
shards, one task per part encodes its shard, then recall is measured and search settings chosen
(docs/indexing.md, "Recall target"). The driver never holds a vector; a rerun skips what exists."""

from __future__ import annotations

import functools
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any

import faiss
import ray

from arag.index import ann, ann_recall
from arag.index.build import IndexSettings
from arag.index.embedding import SentenceEmbedder
from arag.index.layout import IndexLayout, read_json, write_json_atomic
from arag.index.parts import PartRecord
from arag.runtime.progress import progress_bar

log = logging.getLogger("arag.index")

TRAINED_RECORD = "trained.json"
# A larger code on the same coarse centroids puts every row in the list the earlier code put it in: the
# earlier code's part lists wait here until their part is encoded again, to give each row its list.
EARLIER_LISTS = "earlier-lists"
TRAIN_MAX_CPUS = 16


def run_ann_phase(settings: IndexSettings, layout: IndexLayout, records: list[PartRecord], progress: bool, use_gpu: bool) -> dict[str, Any]:
    """Build, measure and tune the ANN `settings.ann` asks for; the manifest's `ann` entry."""
    num_vectors = sum(r.num_sentences for r in records)
    with_vectors = [r for r in records if r.num_sentences]
    dimension = int(ann.map_flat_shard(layout.vectors(with_vectors[0].part)).shape[1]) if with_vectors else 0
    plan = ann.plan_ann(settings.ann, num_vectors, dimension)
    root = layout.root
    if plan.factory is None:
        return ann.ann_entry(plan, root, {}, [], recall=ann_recall.exact_record(settings.ann_recall))
    questions = _questions(settings.ann_questions)
    tried: list[str] = []
    while True:
        training, parts = _train_and_encode(plan, layout, with_vectors, progress, use_gpu)
        measured, sample = _measure_recall(settings, layout, with_vectors, questions)
        tried.append(plan.factory)
        if measured["best"] is not None:
            break
        larger = ann.with_larger_code(plan)
        if larger is None:
            raise ann_recall.unmet_error(settings.ann_recall, plan.factory, measured, tried)
        best = max(r["recall"] for r in measured["grid"])
        log.info("ANN %s reaches recall@10 %.4f at most, below index.ann_recall=%s: trying %s", plan.factory, best, settings.ann_recall, larger.factory)
        plan = larger
    best = measured["best"]
    log.info("ANN %s: recall@10 %.4f (target %s) with nprobe %d, rerank %d", plan.factory, best["recall"], settings.ann_recall, best["nprobe"], best["rerank"])
    recall = ann_recall.recall_record(settings.ann_recall, measured, sample)
    if len(tried) > 1:
        recall["codes_tried"] = tried
    return ann.ann_entry(plan, root, training, parts, recall=recall, search=ann_recall.search_record(best))


def _train_and_encode(plan: ann.AnnPlan, layout: IndexLayout, with_vectors: list[PartRecord], progress: bool, use_gpu: bool) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Train `plan`'s quantizer (unless done) and encode the parts not yet encoded: (training, parts)."""
    root = layout.root
    num_vectors = sum(r.num_sentences for r in with_vectors)
    folder = ann.ann_dir(root)
    folder.mkdir(parents=True, exist_ok=True)
    for tmp in folder.glob(".tmp-*"):
        tmp.unlink(missing_ok=True)
    record_path = folder / TRAINED_RECORD
    trained = ann.trained_path(root)
    previous = read_json(record_path) if trained.exists() and record_path.exists() else {}
    earlier = folder / EARLIER_LISTS
    if previous.get("factory") == plan.factory:
        training = previous
    else:
        # A larger code of the same lists (ann.with_larger_code) keeps the coarse centroids its k-means found.
        same_lists = previous.get("factory", "").split(",")[0] == f"IVF{plan.nlist}" and previous.get("sample") == plan.train_size
        earlier.mkdir(exist_ok=True) if same_lists else shutil.rmtree(earlier, ignore_errors=True)
        for stale in folder.glob("part-*.ivf"):  # encoded with another trained index
            os.replace(stale, earlier / stale.name) if same_lists else stale.unlink()
        log.info("ANN %s: training on %d of %d vectors (%s)", plan.factory, plan.train_size, num_vectors, "GPU" if use_gpu else "CPU")
        shards = {r.part: str(layout.vectors(r.part)) for r in with_vectors}
        rows = {r.part: r.num_sentences for r in with_vectors}
        # k-means is one multi-threaded task: give it the cores of the largest node (up to 16).
        threads = _largest_node_cpus(use_gpu)
        task = ray.remote(_train).options(num_cpus=threads, num_gpus=1 if use_gpu else 0, max_retries=2)
        training = ray.get(task.remote(plan, shards, rows, str(trained), use_gpu, threads, previous if same_lists else None))
        write_json_atomic(record_path, training)  # after trained.faiss: its presence means training is done
    todo = [r for r in with_vectors if not ann.part_lists_path(root, r.part).exists()]
    parts = {r.part: _part_record(root, r.part, r.num_sentences, None) for r in with_vectors if r not in todo}
    with progress_bar(len(with_vectors), "ann encode", progress, unit="part") as bar:
        bar.update(len(parts))
        encode = ray.remote(_encode).options(num_cpus=1, max_retries=2)
        lists_from = {r.part: earlier / ann.part_lists_path(root, r.part).name for r in todo}
        pending = [
            encode.remote(str(trained), str(layout.vectors(r.part)), r.part, r.num_sentences, str(ann.part_lists_path(root, r.part)), str(lists_from[r.part]) if lists_from[r.part].exists() else None)
            for r in todo
        ]
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            result = ray.get(done[0])
            parts[result["part"]] = _part_record(root, result["part"], result["rows"], result["seconds"], result["lists_reused"])
            bar.update(1)
    shutil.rmtree(earlier, ignore_errors=True)  # every part is encoded with this code now
    return training, list(parts.values())


def _questions(path: str | None) -> tuple[list[str], str | None, str | None]:
    """(the first QUERY_SAMPLE questions of `index.ann_questions`, its path, its digest); none without it."""
    if not path:
        return [], None, None
    from arag.evaluation.questions import load_questions

    loaded = load_questions(path)
    return [q.question for q in loaded.questions[: ann_recall.QUERY_SAMPLE]], str(path), loaded.sha256


def _measure_recall(settings: IndexSettings, layout: IndexLayout, with_vectors: list[PartRecord], questions: tuple[list[str], str | None, str | None]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Recall of the ANN on held-out queries, computed where the vectors are: one task draws the
    queries, one per part finds their exact neighbours, one merges those and searches the ANN."""
    root = layout.root
    shards = {r.part: str(layout.vectors(r.part)) for r in with_vectors}
    rows = {r.part: r.num_sentences for r in with_vectors}
    texts, questions_file, digest = questions
    sample = ray.remote(_sample_queries).options(num_cpus=1, max_retries=2).remote(shards, rows, texts, settings.embedder)
    exact = ray.remote(ann_recall.exact_neighbours).options(num_cpus=1, max_retries=2)
    truth = [exact.remote(layout.vectors(r.part), r.part, sample) for r in with_vectors]
    threads = _largest_node_cpus(False)
    lists = [str(ann.part_lists_path(root, r.part)) for r in with_vectors]
    measure = ray.remote(_measure).options(num_cpus=threads, max_retries=2)
    measured = ray.get(measure.remote(str(ann.trained_path(root)), lists, settings.ann_recall, threads, sample, *truth))
    return measured, ann_recall.sample_record(*measured.pop("sample"), ann_recall.QUERY_SEED, questions_file, digest)


def _part_record(root: Path, part: int, rows: int, seconds: float | None, lists_reused: bool = False) -> dict[str, Any]:
    record: dict[str, Any] = {"part": part, "file": str(ann.part_lists_path(root, part).relative_to(root)), "rows": rows}
    if seconds is not None:
        record["encode_seconds"] = round(seconds, 3)
    if lists_reused:  # its rows' lists came from the earlier code's lists: no coarse search in those seconds
        record["lists_from_earlier_code"] = True
    return record


def _largest_node_cpus(with_gpu: bool) -> int:
    """CPUs of the largest alive node (with a GPU, when the task needs one), at most TRAIN_MAX_CPUS."""
    nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive") and (n["Resources"].get("GPU", 0) >= 1 or not with_gpu)]
    return max(1, min(TRAIN_MAX_CPUS, int(max((n.get("CPU", 0) for n in nodes), default=1))))


def _train(plan: ann.AnnPlan, shards: dict[int, str], rows: dict[int, int], target: str, use_gpu: bool, threads: int, coarse_from: dict[str, Any] | None = None) -> dict[str, Any]:
    """coarse_from: the record of the index trained at `target` on the same lists and sample, whose
    coarse centroids are taken rather than computed again by the same k-means."""
    faiss.omp_set_num_threads(threads)
    started = time.perf_counter()
    centroids = ann.coarse_centroids(ann.read_trained(Path(target))) if coarse_from else None
    sample = ann.read_sample({p: Path(s) for p, s in shards.items()}, rows, plan.train_size, plan.seed)
    read_s = time.perf_counter() - started
    index = ann.train(plan, sample, use_gpu=use_gpu, centroids=centroids)
    ann.write_trained(index, Path(target))
    return {
        **({"coarse_from": coarse_from["factory"]} if coarse_from else {}),
        "factory": plan.factory,
        "sample": len(sample),
        "seconds": round(time.perf_counter() - started, 3),
        "sample_read_seconds": round(read_s, 3),
        "device": "gpu" if use_gpu else "cpu",
        "threads": threads,
        "node": os.uname().nodename,
    }


@functools.lru_cache(maxsize=1)
def _read_trained(path: str, mtime: float) -> Any:
    """The trained quantizer, read once per Ray worker (a worker encodes many parts)."""
    return ann.read_trained(Path(path))


def _encode(trained: str, shard: str, part: int, expected_rows: int, target: str, lists_from: str | None = None) -> dict[str, Any]:
    """lists_from: the part's lists as an earlier code on the same coarse centroids wrote them."""
    faiss.omp_set_num_threads(1)  # one task per core
    started = time.perf_counter()
    index = _read_trained(trained, os.stat(trained).st_mtime)
    lists = ann.list_assignment(index, Path(lists_from), part, expected_rows) if lists_from else None
    rows = ann.encode_part(index, Path(shard), part, Path(target), lists=lists)
    if rows != expected_rows:
        Path(target).unlink(missing_ok=True)
        raise RuntimeError(f"{shard}: {rows} vectors, its part record says {expected_rows} sentences")
    return {"part": part, "rows": rows, "seconds": time.perf_counter() - started, "lists_reused": lists_from is not None}


def _sample_queries(shards: dict[int, str], rows: dict[int, int], questions: list[str], embedder: Any) -> ann_recall.QuerySample:
    encoded = SentenceEmbedder(embedder).encode_queries(questions) if questions else None
    return ann_recall.sample_queries({p: Path(s) for p, s in shards.items()}, rows, questions=encoded)


def _measure(trained: str, lists: list[str], target: float, threads: int, sample: ann_recall.QuerySample, *truth: tuple[Any, Any]) -> dict[str, Any]:
    faiss.omp_set_num_threads(threads)
    index = ann.merge_parts(ann.read_trained(Path(trained)), [Path(p) for p in lists])
    measured = ann_recall.measure(index, sample, ann_recall.merge_neighbours(list(truth)), target, threads)
    measured["sample"] = (sample.sentences, sample.questions)  # what the queries were, not their vectors
    return measured
