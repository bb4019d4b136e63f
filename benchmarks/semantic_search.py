"""Benchmark sentence vector search at 1M–10M vectors: the index's ANN against exact search.

    python -m benchmarks.semantic_search [--sizes 250000,1000000,4000000,10000000] [--part-vectors 250000]
        [--embedder minilm|static] [--factory ivfpq] [--target 0.99] [--tune-questions 1000]
        [--queries 300] [--anchor-queries 20] [--nprobe 16,32,64,128] [--rerank 8,16,32,64]
        [--slices 1,2] [--callers 1,4] [--workdir /tmp/arag-ann] [--keep] [--reuse]
    python -m benchmarks.semantic_search --index <an index pipelines.index built with an ANN> [--queries 300] ...

`--index` measures what the pipeline built instead (the 10M MiniLM index: benchmarks/RESULTS.md): the
same searches and anchors, on 2WikiMultihopQA questions its build's recall measurement did not use
(`index.ann_questions`, as its manifest records them), encoded with the index's own embedder.

Data (tests/support/ann_data.py says exactly how): real vectors of 100k wiki-sample sentences
(`--embedder minilm`: all-MiniLM-L6-v2, 384-d; `static`: the static model distilled from it,
256-d, conf/embedder/minilm-static.yaml), extended by generated ones (a point between a real vector
and one of its 16 nearest real neighbours, plus small Gaussian noise, re-normalised), written as the
index pipeline writes them: exact `IndexIDMap2(IndexFlatIP)` shards of `--part-vectors` vectors each,
part by part, so RAM stays low (10M x 384 float32 = 15 GB on disk). The sizes share their first
parts. Questions (2WikiMultihopQA, embedded as queries with the same model): the first
`--tune-questions` join the build's recall measurement (as `index.ann_questions` does); the
`--queries` after them are the held-out queries every figure below is measured on.

The recall target (`--target`, as `index.ann_recall`): after the ANN is built, the build's own
measurement (arag.index.ann_recall, the functions arag.runtime.ann_job's tasks run) chooses nprobe
and rerank, once on held-out sentences plus the tuning questions (what the manifest records and
semantic_search uses) and once on the sentences alone (an index built without a questions file).

Per size, in one run:
  * the ANN as the pipeline builds it (arag.index.ann: `index.ann=ivfpq`, lists and PQ size
    derived from the size; the same functions the Ray tasks run, here one after the other in
    this process): training time (sample read + k-means + PQ, 2 cores) and encoding time;
  * exact top-10 of every query (batched numpy over the memory-mapped shards): the reference;
  * search through `arag.tools.vector_search.VectorSearch`, the code behind semantic_search
    (`ctx.vectors.search`), one caller, one query at a time, each layout in a fresh
    process so its RSS is its own (RSS = resident memory incl. the pages of memory-mapped shards
    it touched; "anon" = the part that is not file pages):
      - ANN with the settings the recall measurement chose (the manifest's, as semantic_search
        searches), with the sentences-only choice, and for every `--nprobe` x `--rerank` (exact
        re-rank of rerank*10 candidates, >= 256), over all `--queries` queries, each with every
        `--slices` (tools.probe_slices: the probed lists scanned in that many slices at once) and
        every `--callers` (threads searching at once, each taking the next query; a query's latency
        is its own, and q/s is all queries over the wall time); answers at the default slices must
        not change with the callers;
      - anchors, over the first `--anchor-queries` queries only (they are slow): numpy brute
        force (matrix-vector products over aligned copies of 64k-row blocks of the memory-mapped
        shards, then the top 10), and today's
        exact Flat shard scan (`VectorSearch` without an ANN: BLAS over each FAISS shard, shards
        in parallel threads; memory-mapped, since 250k-vector shards would otherwise be read
        whole into RAM: 15 GB at 10M).
    Re-rank rows: the ANN is searched twice, its rows held in memory (`tools.resident_vectors=true`)
    and read with pread (`false`), alternated with the anchors; both must rank alike.
    Recall@10 = |top-10 ∩ exact top-10| / 10, averaged over the queries, with a 95% interval
    that resamples the queries (seeded bootstrap; a query's ten neighbours are not independent,
    so they are not ten samples). The ratios compare p50s over the SAME anchor
    queries. Cache state: every search runs after the reference pass has read all shards; the
    script prints the share of the shards' bytes in the page cache before each ANN run (fincore),
    since a kernel may reclaim page cache that no process maps while it sits idle.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import multiprocessing as mp
import os
import shutil
import subprocess
import time
from pathlib import Path

import faiss
import numpy as np
import psutil


from tests.support import ann_data

from arag.index import ann, ann_recall
from arag.index.layout import FORMAT_VERSION, PART_SHIFT
from arag.index.vectors import build_shard, write_shard
from arag.report.intervals import bootstrap_interval

K = ann_recall.RECALL_K  # recall@10, as the build measures it
MODEL = {"minilm": "all-MiniLM-L6-v2", "static": "all-MiniLM-L6-v2-static"}


def memory() -> dict[str, float]:
    """RSS and its anonymous part, MiB, from /proc (file pages of mapped shards count in RSS)."""
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile"):
            fields[key] = int(value.split()[0]) / 1024
    return {"rss": fields["VmRSS"], "anon": fields["RssAnon"]}


def page_cache_share(paths: list[Path]) -> float | None:
    """The share of the files' bytes in the OS page cache (util-linux `fincore`; None without it)."""
    try:
        rows = subprocess.run(["fincore", "--bytes", "--noheadings", "--raw", "--output", "RES,SIZE", *map(str, paths)], capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return None
    return sum(map(int, rows[0::2])) / max(1, sum(map(int, rows[1::2])))


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs) * 1000, q))


# ---- data -------------------------------------------------------------------------------------


def ensure_shards(work: Path, parts: int, per_part: int, real: np.ndarray, knn: np.ndarray) -> list[Path]:
    folder = work / f"shards-{per_part}"
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for p in range(parts):
        path = folder / f"part-{p:05d}.faiss"
        if not path.exists():
            vecs = ann_data.generated_part(real, knn, p, per_part)
            write_shard(build_shard(vecs, (np.int64(p) << PART_SHIFT) | np.arange(per_part, dtype=np.int64)), path)
            del vecs
            print(f"  wrote {path.name}", flush=True)
        paths.append(path)
    return paths


def write_index(root: Path, shards: list[Path], per_part: int, ann_entry: dict | None, dim: int, model: str) -> None:
    """A manifest over the shards (vectors only: enough for VectorSearch)."""
    write_vectors_manifest(root, [(p, s, per_part) for p, s in enumerate(shards)], ann_entry, dim, model)


def write_vectors_manifest(root: Path, shards: list[tuple[int, Path, int]], ann_entry: dict | None, dim: int, model: str) -> None:
    """A manifest over (part, shard, rows) (vectors only: enough for VectorSearch)."""
    root.mkdir(parents=True, exist_ok=True)
    parts = [
        {"part": p, "chunks": "-", "sentences": "-", "rejects": "-", "vectors": os.path.relpath(s, root), "num_chunks": 0, "num_sentences": rows}
        for p, s, rows in shards
    ]
    manifest = {
        "format_version": FORMAT_VERSION,
        "embedding": {"model": model, "dimension": dim, "normalized": True, "spec": {"name": model}},
        "parts": parts,
        "num_sentences": sum(rows for _, _, rows in shards),
    }
    if ann_entry is not None:
        manifest["ann"] = ann_entry
    (root / "manifest.json").write_text(json.dumps(manifest))


def exact_top(shards: list[tuple[int, Path]], queries: np.ndarray) -> np.ndarray:
    """Exact top-10 sentence ids of every query over the (part, shard)s (ties: smaller id), by the
    build's own recall functions, so the benchmark's recall is the manifest's."""
    sample = ann_recall.QuerySample(np.ascontiguousarray(queries, np.float32), np.full(len(queries), -1, np.int64), 0, len(queries))
    return ann_recall.merge_neighbours([ann_recall.exact_neighbours(path, part, sample) for part, path in shards])


# ---- measurements (each in a fresh process) -------------------------------------------------------


def _copy_with_slices(searcher: ann.AnnSearcher, slices: int) -> ann.AnnSearcher:
    """The same loaded index, rows and threads, searched with `slices` probe slices (tools.probe_slices)."""
    twin = copy.copy(searcher)
    twin.probe_slices = slices
    return twin


def timed_queries(search, queries: np.ndarray, nprobe: int | None, rerank: int | None, callers: int) -> tuple[list[float], list[list[int]], float]:
    """Every query once, `callers` threads taking the next query as they finish one: (latency of each
    query in query order, its top-10 ids, wall seconds for all)."""
    from concurrent.futures import ThreadPoolExecutor

    def one(q: np.ndarray) -> tuple[float, list[int]]:
        t = time.perf_counter()
        _, got = search.search(q[None, :], K, nprobe=nprobe, rerank=rerank)
        return time.perf_counter() - t, got.tolist()

    t = time.perf_counter()
    if callers == 1:
        done = [one(q) for q in queries]
    else:
        with ThreadPoolExecutor(callers) as pool:
            done = list(pool.map(one, queries))
    wall = time.perf_counter() - t
    return [d[0] for d in done], [d[1] for d in done], wall


def measure_search(root: str, queries: np.ndarray, knobs: list[tuple[int | None, int | None]], mmap_bytes: int, resident: bool | None, slices: list[int], callers: list[int], out) -> None:
    from arag.index.store import open_index
    from arag.tools.vector_search import VectorSearch

    base = memory()
    search = VectorSearch(open_index(root), mmap_bytes=mmap_bytes, resident_vectors=resident)
    t = time.perf_counter()
    search.load()
    load_s = time.perf_counter() - t
    loaded = memory()
    results = []
    # An ANN is searched with each number of probe slices (tools.probe_slices) and each number of
    # concurrent callers, on the same loaded index: its default first, then the others.
    loaded_ann = search._ann_searcher() if search.ann_entry else None
    settings = [(ann.DEFAULT_PROBE_SLICES, 1)] + [(s, c) for s in slices for c in callers if (s, c) != (ann.DEFAULT_PROBE_SLICES, 1)] if loaded_ann else [(None, 1)]
    for (n_slices, n_callers), (nprobe, rerank) in itertools.product(settings, knobs):
        if loaded_ann:
            search._ann = _copy_with_slices(loaded_ann, n_slices)
        search.search(queries[:1], K, nprobe=nprobe, rerank=rerank)  # warm-up
        times, ids, wall = timed_queries(search, queries, nprobe, rerank, n_callers)
        results.append({"nprobe": nprobe, "rerank": rerank, "slices": n_slices, "callers": n_callers, "times": times, "ids": ids, "qps": len(queries) / wall})
    split = None
    if loaded_ann is not None:  # the manifest's setting again, at the default slices, its two halves timed apart
        searcher, split = loaded_ann, {"candidates": [], "rerank": []}  # as VectorSearch loaded it: the default slices
        for q in queries:
            t = time.perf_counter()
            candidates = searcher.candidates(q[None, :], K)
            split["candidates"].append(time.perf_counter() - t)
            t = time.perf_counter()
            ann.rerank(searcher.vectors, candidates, q, K)
            split["rerank"].append(time.perf_counter() - t)
    out.put({"base": base, "loaded": loaded, "after": memory(), "load_s": load_s, "results": results, "split": split})


def measure_numpy(shards: list[tuple[int, str]], queries: np.ndarray, out) -> None:
    """Brute force with numpy, one query at a time: per (part, shard), blocks of the memory-mapped
    vectors are copied into one aligned buffer and multiplied there (BLAS needs aligned floats;
    the vectors start at byte 82 of a FAISS file), then the top 10 of all shards."""
    base = memory()
    maps = [(p, ann.map_flat_shard(Path(s))) for p, s in shards]
    block = np.empty((65536, maps[0][1].shape[1]), np.float32)
    times, ids = [], []
    for q in queries:
        t = time.perf_counter()
        scores, cand = [], []
        for p, mm in maps:
            for start in range(0, len(mm), len(block)):
                rows = min(len(block), len(mm) - start)
                np.copyto(block[:rows], mm[start : start + rows])
                s = block[:rows] @ q
                top = np.argpartition(-s, K)[:K]
                scores.append(s[top])
                cand.append((np.int64(p) << PART_SHIFT) | (start + top).astype(np.int64))
        _, got = ann.top_exact(np.concatenate(scores), np.concatenate(cand), K)
        times.append(time.perf_counter() - t)
        ids.append(got.tolist())
    out.put({"base": base, "loaded": base, "after": memory(), "load_s": 0.0, "results": [{"nprobe": None, "rerank": None, "slices": None, "callers": 1, "times": times, "ids": ids}]})


def in_child(fn, *args) -> dict:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=fn, args=(*args, out))
    proc.start()
    result = out.get()
    proc.join()
    return result


def per_query_recall(got: list[list[int]], exact: np.ndarray) -> list[float]:
    return [len(set(g) & set(e.tolist())) / K for g, e in zip(got, exact)]


def recall(got: list[list[int]], exact: np.ndarray) -> float:
    return float(np.mean(per_query_recall(got, exact)))


def recall_interval(got: list[list[int]], exact: np.ndarray) -> tuple[float, float]:
    """95% interval of recall@10 resampling the queries (seeded bootstrap): a query's ten
    neighbours are found or missed together, so the query, not the neighbour, is the unit."""
    return bootstrap_interval(per_query_recall(got, exact))


# ---- one size ---------------------------------------------------------------------------------------


def train_with_coarse_from(plan: ann.AnnPlan, sample: np.ndarray, coarse_from: Path) -> faiss.Index:
    """`plan`'s index with the coarse centroids of the ANN built at `coarse_from` (same lists and
    dimension), so that only the PQ codebooks are trained (arag.index.ann.train, as a pipeline build
    does when it tries a larger code): the k-means it skips is the one a build of `plan` runs on the
    same sample with the same seed."""
    centroids = ann.coarse_centroids(ann.read_trained(ann.trained_path(coarse_from)))
    if centroids.shape != (plan.nlist, plan.dimension):
        raise SystemExit(f"--coarse-from {coarse_from}: {centroids.shape[0]} lists of {centroids.shape[1]}-d, the plan needs {plan.nlist} of {plan.dimension}-d")
    return ann.train(plan, sample, centroids=centroids)


def build_ann(root: Path, shards: list[Path], plan: ann.AnnPlan, per_part: int, coarse_from: Path | None = None) -> dict:
    """The ANN phase's steps (arag.runtime.ann_job runs them as Ray tasks) one after the other."""
    shutil.rmtree(root, ignore_errors=True)
    t = time.perf_counter()
    sample = ann.read_sample(dict(enumerate(shards)), dict.fromkeys(range(len(shards)), per_part), plan.train_size, plan.seed)
    sample_s = time.perf_counter() - t
    t = time.perf_counter()
    trained = train_with_coarse_from(plan, sample, coarse_from) if coarse_from else ann.train(plan, sample)
    train_s = time.perf_counter() - t
    ann.write_trained(trained, ann.trained_path(root))
    del sample
    t = time.perf_counter()
    records = [
        {"part": p, "file": str(ann.part_lists_path(root, p).relative_to(root)), "rows": ann.encode_part(trained, s, p, ann.part_lists_path(root, p))}
        for p, s in enumerate(shards)
    ]
    encode_s = time.perf_counter() - t
    ann_bytes = sum((root / r["file"]).stat().st_size for r in records)
    return {"sample_s": sample_s, "train_s": train_s, "encode_s": encode_s, "ann_bytes": ann_bytes, "records": records, "seconds": round(sample_s + train_s, 3)}


def choose_settings(root: Path, shards: list[Path], per_part: int, records: list[dict], questions: np.ndarray, target: float) -> dict:
    """The build's recall measurement (arag.index.ann_recall; arag.runtime.ann_job runs it as tasks):
    on held-out sentences plus `questions`, and on the sentences alone."""
    t = time.perf_counter()
    flat = dict(enumerate(shards))
    sample = ann_recall.sample_queries(flat, dict.fromkeys(range(len(shards)), per_part), questions=questions)
    truth = ann_recall.merge_neighbours([ann_recall.exact_neighbours(path, p, sample) for p, path in flat.items()])
    truth_s = time.perf_counter() - t
    index = ann.merge_parts(ann.read_trained(ann.trained_path(root)), [root / r["file"] for r in records])
    t = time.perf_counter()
    with_questions = ann_recall.measure(index, sample, truth, target, threads=faiss.omp_get_max_threads())
    n = sample.sentences
    sentences = ann_recall.QuerySample(sample.vectors[:n], sample.self_ids[:n], n, 0)
    sentences_only = ann_recall.measure(index, sentences, truth[:n], target, threads=faiss.omp_get_max_threads())
    return {
        "with_questions": with_questions,
        "sentences_only": sentences_only,
        "sample": ann_recall.sample_record(n, sample.questions, questions_file="2WikiMultihopQA questions"),
        "truth_s": truth_s,
        "grid_s": time.perf_counter() - t,
    }


def run_size(args, n: int, real: np.ndarray, knn: np.ndarray, tune_q: np.ndarray, queries: np.ndarray) -> dict:
    per_part = args.part_vectors
    parts = -(-n // per_part)
    if parts * per_part != n:
        raise SystemExit(f"--sizes: {n} is not a multiple of --part-vectors {per_part}")
    dim, model = real.shape[1], MODEL[args.embedder]
    work = Path(args.workdir) / args.embedder
    print(f"\n=== {n:,} vectors ({args.embedder}, {dim}-d): {parts} parts of {per_part:,} ===", flush=True)
    shards = ensure_shards(work, parts, per_part, real, knn)
    plan = ann.plan_ann(args.factory, n, dim)
    root = work / f"index-{n}-{plan.factory.replace(',', '-')}"
    record = root / "bench-build.json"
    if args.reuse and record.exists():
        build = json.loads(record.read_text())
        print("reusing the ANN built by an earlier run of this script (--reuse); its build figures:", flush=True)
    else:
        build = build_ann(root, shards, plan, per_part, Path(args.coarse_from) if args.coarse_from else None)
        build["coarse_from"] = args.coarse_from
        record.write_text(json.dumps(build))
    sample_s, train_s, encode_s, ann_bytes = build["sample_s"], build["train_s"], build["encode_s"], build["ann_bytes"]
    write_index(work / f"flat-{n}", shards, per_part, None, dim, model)
    auto = ann.plan_ann("auto", n, dim)
    print(
        f"{plan.factory} (index.ann=auto would choose: {auto.factory or 'flat'}): sample of {plan.train_size:,} read in {sample_s:.1f} s, "
        f"trained in {train_s:.1f} s{' (PQ only: coarse centroids from ' + build['coarse_from'] + ')' if build.get('coarse_from') else ''}; {n:,} vectors encoded in {encode_s:.1f} s ({n / encode_s:,.0f}/s); "
        f"part lists {ann_bytes / n:.1f} B/vector on disk; {faiss.omp_get_max_threads()} threads",
        flush=True,
    )
    measured_record = root / f"bench-recall-{args.target}-{len(tune_q)}q.json"
    if args.reuse and measured_record.exists():
        chosen = json.loads(measured_record.read_text())
        print("reusing the recall measurement of an earlier run (--reuse, same target and questions); its figures:", flush=True)
    else:
        chosen = choose_settings(root, shards, per_part, build["records"], tune_q, args.target)
        measured_record.write_text(json.dumps(chosen))
    best, alone = chosen["with_questions"]["best"], chosen["sentences_only"]["best"]
    print(
        f"recall measurement (index.ann_recall={args.target}): exact neighbours of {chosen['sample']['size']:,} queries in {chosen['truth_s']:.1f} s, "
        f"grid in {chosen['grid_s']:.1f} s; chosen with {len(tune_q)} questions: {best}; on sentences alone: {alone}",
        flush=True,
    )
    if best is None:
        top = max(chosen["with_questions"]["grid"], key=lambda r: r["recall"])
        raise SystemExit(
            f"{plan.factory}: index.ann_recall={args.target} not reached; the grid's best: {top} "
            "(a build with index.ann=auto/ivfpq doubles the code next: run again with --factory and that code)"
        )
    recorded = ann_recall.recall_record(args.target, chosen["with_questions"], chosen["sample"])
    entry = ann.ann_entry(plan, root, {"seconds": build["seconds"], "device": "cpu"}, build["records"], recall=recorded, search=ann_recall.search_record(best))
    write_index(root, shards, per_part, entry, dim, model)
    measured = measure_index(args, root, work / f"flat-{n}", list(enumerate(shards)), best, alone, len(tune_q), queries)
    return {
        "vectors": n,
        "embedder": args.embedder,
        "dimension": dim,
        "factory": plan.factory,
        "train_size": plan.train_size,
        "sample_s": sample_s,
        "train_s": train_s,
        "encode_s": encode_s,
        "ann_bytes_per_vector": ann_bytes / n,
        "recall_grid": chosen["with_questions"]["grid"],
        **measured,
    }


def measure_index(args, root: Path, flat_root: Path, shards: list[tuple[int, Path]], best: dict, alone: dict | None, tuned: int, queries: np.ndarray) -> dict:
    """Search the ANN index at `root` (the manifest's settings `best`; `alone`: those chosen on sentences
    alone, if measured) and the anchors (numpy, and the exact (part, shard)s through `flat_root`'s
    vectors-only manifest) on the held-out `queries`; `tuned`: the questions the build measured on."""
    a = args.anchor_queries
    t = time.perf_counter()
    exact = exact_top(shards, queries)
    print(f"exact top-{K} of {len(queries)} held-out queries (batched numpy) in {time.perf_counter() - t:.1f} s", flush=True)

    knobs: list[tuple[int | None, int | None]] = [(None, None)]  # the manifest's settings, as semantic_search searches
    if alone is not None and (alone["nprobe"], alone["rerank"]) != (best["nprobe"], best["rerank"]):
        knobs.append((alone["nprobe"], alone["rerank"]))
    knobs += [(int(a), int(b)) for a in filter(None, args.nprobe.split(",")) for b in filter(None, args.rerank.split(","))]
    # Anchors and ANN alternate (A B A B) so that both sides of each ratio see the same machine; the
    # ANN's re-rank rows are held in memory (tools.resident_vectors=true) or read with pread (false).
    paths = [path for _, path in shards]
    shard_bytes = sum(path.stat().st_size for path in paths)
    default_resident = ann.fits_in_memory(paths)
    cached = {"ann": page_cache_share(paths)}
    slices, callers = [int(v) for v in args.slices.split(",")], [int(v) for v in args.callers.split(",")]
    annm = in_child(measure_search, str(root), queries, knobs, 1 << 62, True, slices, callers)
    cached["pread"] = page_cache_share(paths)
    preadm = in_child(measure_search, str(root), queries, [(None, None)], 1 << 62, False, [], [])
    anchors = {
        "numpy brute force": in_child(measure_numpy, [(p, str(path)) for p, path in shards], queries[:a]),
        "Flat shards (exact)": in_child(measure_search, str(flat_root), queries[:a], [(None, None)], 0, None, [], []),
    }
    cached["again"] = page_cache_share(paths)
    again = in_child(measure_search, str(root), queries[:a], [(None, None)], 1 << 62, True, [], [])
    cached["pread again"] = page_cache_share(paths)
    pread_again = in_child(measure_search, str(root), queries[:a], [(None, None)], 1 << 62, False, [], [])
    rows = []
    header = f"{'layout':<56}{'queries':>8}{'recall@10':>10}{'p50 ms':>9}{'p95 ms':>9}{f'p50/{a}q':>9}{'RSS MiB':>9}{'anon':>7}{'vs numpy':>10}{'vs Flat':>9}   recall 95%"
    print(header)
    anchor_p50 = {}
    for name, m in anchors.items():
        r = m["results"][0]
        anchor_p50[name] = pct(r["times"], 50)
        print(f"{name:<56}{a:>8}{recall(r['ids'], exact[:a]):>10.3f}{pct(r['times'], 50):>9.1f}{pct(r['times'], 95):>9.1f}{pct(r['times'], 50):>9.1f}{m['after']['rss']:>9,.0f}{m['after']['anon']:>7,.0f}")
    one_slice_ids = {(r["nprobe"], r["rerank"]): r["ids"] for r in annm["results"] if (r["slices"], r["callers"]) == (1, 1)}
    product_default = (ann.DEFAULT_PROBE_SLICES, 1)
    for side, r in [("memory", r) for r in annm["results"]] + [("pread", preadm["results"][0])]:
        second = (again if side == "memory" else pread_again)["results"][0]["times"]
        p50_a = (pct(r["times"][:a], 50) + pct(second, 50)) / 2 if r["nprobe"] is None and (r["slices"], r["callers"]) == product_default else pct(r["times"][:a], 50)
        nprobe, rerank = (best["nprobe"], best["rerank"]) if r["nprobe"] is None else (r["nprobe"], r["rerank"])
        row = {
            "rows": side,
            "slices": r["slices"],
            "callers": r["callers"],
            "queries_per_s": r["qps"],
            "same_top10_as_one_slice": (r["nprobe"], r["rerank"]) not in one_slice_ids or r["ids"] == one_slice_ids[(r["nprobe"], r["rerank"])],
            "nprobe": nprobe,
            "rerank": rerank,
            "chosen": r["nprobe"] is None,
            "recall": recall(r["ids"], exact),
            "recall_95": recall_interval(r["ids"], exact),
            "p50": pct(r["times"], 50),
            "p95": pct(r["times"], 95),
            "p50_anchor_queries": p50_a,
            "vs_numpy": anchor_p50["numpy brute force"] / p50_a,
            "vs_flat": anchor_p50["Flat shards (exact)"] / p50_a,
        }
        rows.append(row)
        name = f"ANN nprobe={nprobe} rerank={rerank}" + (" pread" if side == "pread" else "") + f" slices={r['slices']}" + (f" callers={r['callers']} ({r['qps']:.0f} q/s)" if r["callers"] > 1 else "") + (" *" if row["chosen"] else " s" if alone and (nprobe, rerank) == (alone["nprobe"], alone["rerank"]) else "")
        print(
            f"{name:<56}{len(queries):>8}{row['recall']:>10.3f}{row['p50']:>9.2f}{row['p95']:>9.2f}{p50_a:>9.2f}"
            f"{'':>16}{row['vs_numpy']:>9.0f}x{row['vs_flat']:>8.0f}x   [{row['recall_95'][0]:.3f}, {row['recall_95'][1]:.3f}]"
            + ("" if row["same_top10_as_one_slice"] else "   top-10 differs from 1 slice")
        )
    print(
        f"ANN process, rows in memory: RSS {annm['after']['rss']:,.0f} MiB after all queries (anon {annm['after']['anon']:,.0f}), "
        f"{annm['loaded']['rss'] - annm['base']['rss']:,.0f} MiB for loading (merge of {len(shards)} part lists and the shards read in {annm['load_s']:.1f} s); "
        f"rows read with pread: RSS {preadm['after']['rss']:,.0f} MiB (anon {preadm['after']['anon']:,.0f}), loaded in {preadm['load_s']:.1f} s; "
        f"* = the manifest's settings (chosen on sentences + {tuned} questions; its p50/{a}q is the mean of two runs, before and after the anchors), "
        f"s = chosen on sentences alone; re-rank rows held in memory, or read with pread where the row says pread; slices = tools.probe_slices (the probed lists scanned in that many slices at once; {ann.DEFAULT_PROBE_SLICES} by default), callers = threads searching at once, each query's latency timed alone; vs = anchor p50 / ANN p50 over the same {a} queries; "
        f"[low, high] = 95% interval of recall@10 over the {len(queries)} queries (bootstrap resampling queries, seeded)",
        flush=True,
    )
    split = {side: {half: pct(times, 50) for half, times in m["split"].items()} for side, m in (("memory", annm), ("pread", preadm))}
    share = {run: "unknown (no fincore)" if v is None else f"{100 * v:.0f}%" for run, v in cached.items()}
    print(
        f"the manifest's setting again ({ann.DEFAULT_PROBE_SLICES} slices), its halves timed apart over the {len(queries)} queries (p50): rows in memory: IVF candidates "
        f"{split['memory']['candidates']:.2f} ms, exact re-rank {split['memory']['rerank']:.2f} ms; rows read with pread: "
        f"{split['pread']['candidates']:.2f} ms, {split['pread']['rerank']:.2f} ms. Shards ({shard_bytes / 2**30:.1f} GiB; held in memory by "
        f"tools.resident_vectors' default here: {'yes' if default_resident else 'no'}) in the page cache before each ANN run: "
        + ", ".join(f"{run} {v}" for run, v in share.items()),
        flush=True,
    )
    assert preadm["results"][0]["ids"] == annm["results"][0]["ids"], "rows in memory and rows read with pread ranked differently"
    assert all(r["ids"] == annm["results"][0]["ids"] for r in annm["results"] if (r["nprobe"], r["slices"]) == (None, ann.DEFAULT_PROBE_SLICES)), "concurrent callers changed an answer"
    return {
        "split_p50": split,
        "page_cache_share": cached,
        "default_resident": default_resident,
        "ann_rss_mib": annm["after"]["rss"],
        "pread_rss_mib": preadm["after"]["rss"],
        "ann_anon_mib": annm["after"]["anon"],
        "load_s": annm["load_s"],
        "anchors": {k: {"p50": v, "rss": anchors[k]["after"]["rss"]} for k, v in anchor_p50.items()},
        "chosen": best,
        "chosen_on_sentences_alone": alone,
        "rows": rows,
    }


def held_out_questions(sample: dict, count: int) -> tuple[list[str], int]:
    """The first `count` 2WikiMultihopQA questions that the build's recall measurement (its manifest's
    `ann.recall.queries`) did not use, and how many questions it used."""
    used = int(sample.get("questions") or 0)
    seen: set[str] = set()
    if used:
        with open(sample["questions_file"]) as f:
            seen = {json.loads(line)["question"] for _, line in zip(range(used), f)}
    with ann_data.QUESTIONS.open() as f:
        fresh = [q for q in (json.loads(line)["question"] for line in f) if q not in seen]
    if len(fresh) < count:
        raise SystemExit(f"--queries {count}: only {len(fresh)} questions of {ann_data.QUESTIONS} are not among the {used} the build measured on")
    return fresh[:count], used


def run_built(args) -> dict:
    """`--index`: an index the pipeline built (with its ANN), searched on questions its build never saw."""
    from arag.index.embedding import SentenceEmbedder, on_this_machine
    from arag.index.store import open_index

    root = Path(args.index).resolve()
    index = open_index(root)
    entry = index.manifest.get("ann") or {}
    if entry.get("factory") is None:
        raise SystemExit(f"--index {root}: its manifest has no ANN (index.ann=auto builds none up to {ann.AUTO_FLAT_MAX_SENTENCES:,} sentences)")
    recall = entry.get("recall") or {}
    texts, used = held_out_questions(recall.get("queries") or {}, args.queries)
    spec = on_this_machine(index.embedder_spec)
    t = time.perf_counter()
    queries = np.ascontiguousarray(SentenceEmbedder(spec).encode_queries(texts), dtype=np.float32)
    parts = [p for p in index.parts if p.num_sentences and p.vectors is not None]
    n = sum(p.num_sentences for p in parts)
    nprobe, rerank = ann.search_settings(entry)
    print(
        f"\n=== {root}: {n:,} sentences in {len(parts)} parts ({spec.name}, {spec.dtype}, {index.dimension}-d), {entry['factory']} ===\n"
        f"the build's recall record: {json.dumps({k: v for k, v in recall.items() if k != 'grid'})}\n"
        f"{len(texts)} held-out questions (not among the {used} it measured on) encoded with the index's own embedder in {time.perf_counter() - t:.1f} s",
        flush=True,
    )
    flat_root = Path(args.workdir) / "built" / "flat-index"
    write_vectors_manifest(flat_root, [(p.part, p.vectors.resolve(), p.num_sentences) for p in parts], None, index.dimension, spec.name)
    measured = measure_index(args, root, flat_root, [(p.part, p.vectors.resolve()) for p in parts], {"nprobe": nprobe, "rerank": rerank}, None, used, queries)
    return {"index": str(root), "vectors": n, "embedder": spec.name, "dtype": spec.dtype, "dimension": index.dimension, "factory": entry["factory"], "build_recall": recall, **measured}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="250000,1000000,4000000,10000000")
    ap.add_argument("--part-vectors", type=int, default=250_000)
    ap.add_argument("--real", type=int, default=100_000, help="real wiki sentences embedded (cached)")
    ap.add_argument("--embedder", choices=ann_data.EMBEDDERS, default="minilm")
    ap.add_argument("--factory", default="ivfpq", help="index.ann: ivfpq (derived from the size) or a FAISS IVF factory string")
    ap.add_argument("--target", type=float, default=ann_recall.DEFAULT_TARGET, help="index.ann_recall")
    ap.add_argument("--tune-questions", type=int, default=ann_recall.QUERY_SAMPLE, help="questions in the recall measurement (index.ann_questions)")
    ap.add_argument("--queries", type=int, default=300, help="held-out questions (after the tuning ones) every figure is measured on")
    ap.add_argument("--anchor-queries", type=int, default=20)
    ap.add_argument("--nprobe", default="", help="more settings to measure: nprobe values x --rerank values")
    ap.add_argument("--rerank", default="")
    ap.add_argument("--slices", default=f"1,{ann.DEFAULT_PROBE_SLICES}", help="tools.probe_slices values every ANN setting is searched with")
    ap.add_argument("--callers", default="1,4", help="concurrent callers every ANN setting is searched with")
    ap.add_argument("--workdir", default="/tmp/arag-ann")
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("--keep", action="store_true", help="keep the generated shards and indexes")
    ap.add_argument("--reuse", action="store_true", help="search an ANN that an earlier --keep run built (its build figures, and its recall measurement when the target and questions are the same, are reprinted)")
    ap.add_argument("--index", help="measure this pipeline-built index (its ANN as its manifest records it) instead of building generated ones: --sizes, --embedder, --factory, --target, --tune-questions and --coarse-from do not apply")
    ap.add_argument("--coarse-from", help="an ANN index folder an earlier --keep run built with the same lists: reuse its coarse centroids, train only the PQ")
    args = ap.parse_args()

    print(f"machine: {os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB RAM, faiss {faiss.__version__}", flush=True)
    work = Path(args.workdir)
    if args.index:
        try:
            figures = run_built(args)
        finally:
            if not args.keep:
                shutil.rmtree(work / "built", ignore_errors=True)
        if args.json:
            Path(args.json).write_text(json.dumps(figures, indent=2))
        return
    real, knn = ann_data.real_vectors(work, args.real, kind=args.embedder)
    questions = ann_data.query_vectors(work, args.tune_questions + args.queries, kind=args.embedder)
    tune_q, queries = questions[: args.tune_questions], questions[args.tune_questions :]
    print(f"{len(real):,} real vectors, {len(tune_q)} tuning questions, {len(queries)} held-out queries", flush=True)
    figures = []
    try:
        for n in (int(s) for s in args.sizes.split(",")):
            figures.append(run_size(args, n, real, knn, tune_q, queries))
            if args.json:
                Path(args.json).write_text(json.dumps(figures, indent=2))
    finally:
        if not args.keep:
            for path in work.glob("*/index-*"):
                shutil.rmtree(path, ignore_errors=True)
            for path in list(work.glob("*/flat-*")) + list(work.glob("*/shards-*")):
                shutil.rmtree(path, ignore_errors=True)


if __name__ == "__main__":
    main()
