"""Benchmark semantic_search on synthetic sentence vectors: Flat vs IVF shards, against brute force.

    python benchmarks/semantic_search.py [--vectors 1000000] [--dim 384] [--parts 4] [--nlist 512] [--nprobe 8,32,128]

In one run (data generated under --workdir, deleted afterwards unless --keep):
  * `--vectors` clustered unit vectors (a mixture of Gaussians: real sentence embeddings cluster
    by topic, uniform random vectors would make IVF look worse than it is), split into `--parts`
    shards, grouped `--sentences-per-chunk` per chunk;
  * the same data as two indexes: exact `IndexIDMap2(IndexFlatIP)` shards and IVF shards
    ("IVF<nlist>,Flat" per shard, ids added with add_with_ids);
  * the baseline: exact brute force with numpy (one matrix-vector product over every vector);
  * per layout: semantic_search p50/p95 through `ToolContext` (queries encoded by a lookup, so the
    figure is retrieval only), the raw FAISS search time, sentence recall@10 against brute force,
    and whether the tool's chunks equal the brute-force reference (`arag.tools.reference`);
  * memory (RSS growth) after loading each layout's shards.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import sys
import time
from pathlib import Path

import faiss
import numpy as np
import psutil
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from arag.index.layout import FORMAT_VERSION, PART_SHIFT  # noqa: E402
from arag.index.parts import CHUNK_SCHEMA, SENTENCE_SCHEMA  # noqa: E402
from arag.tools import ToolContext  # noqa: E402
from benchmarks import tools_reference as reference  # noqa: E402


def write_manifest(root: Path, entries: list[dict], dimension: int, factory: str) -> None:
    """The two indexes share one set of Parquet files (entries point at ../data), which the
    pipeline's manifest writer does not do; only the fields the tools read are written."""
    manifest = {
        "format_version": FORMAT_VERSION,
        "embedding": {"model": "synthetic", "dimension": dimension, "normalized": True, "spec": {"name": "synthetic"}},
        "faiss": {"factory": factory, "metric": "inner_product", "ids": "sentence_id"},
        "num_chunks": sum(e["num_chunks"] for e in entries),
        "num_sentences": sum(e["num_sentences"] for e in entries),
        "num_parts": len(entries),
        "parts": entries,
    }
    (root / "manifest.json").write_text(json.dumps(manifest, indent=2))


def rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs) * 1000, q))


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def generate(work: Path, n: int, dim: int, parts: int, per_chunk: int, nlist: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Write shared Parquet files and both shard layouts; return all vectors, their ids and chunk ordinals."""
    rng = np.random.default_rng(seed)
    centers = unit(rng.standard_normal((max(64, n // 1000), dim)))
    data = work / "data"
    for sub in ("chunks", "sentences"):
        (data / sub).mkdir(parents=True, exist_ok=True)
    for layout in ("flat", "ivf"):
        (work / layout / "vectors").mkdir(parents=True, exist_ok=True)
    per_part = -(-n // parts)
    all_vecs, all_ids, all_chunks, entries = [], [], [], []
    chunk_base = 0
    for p in range(parts):
        m = min(per_part, n - p * per_part)
        if m <= 0:
            break
        vecs = unit(centers[rng.integers(0, len(centers), m)] + 0.09 * rng.standard_normal((m, dim)).astype(np.float32))
        ids = (np.int64(p) << PART_SHIFT) | np.arange(m, dtype=np.int64)
        n_chunks = -(-m // per_chunk)
        chunk_ids = [f"d{(chunk_base + c) // 4}#{(chunk_base + c) % 4}" for c in range(n_chunks)]
        pq.write_table(
            pa.table(
                {
                    "chunk_id": chunk_ids,
                    "doc_id": [c.split("#")[0] for c in chunk_ids],
                    "title": [f"Document {c.split('#')[0]}" for c in chunk_ids],
                    "position": pa.array([int(c.split("#")[1]) for c in chunk_ids], pa.int32()),
                    "text": [f"Chunk {c} text." for c in chunk_ids],
                    "n_tokens": pa.array([4] * n_chunks, pa.int32()),
                },
                schema=CHUNK_SCHEMA,
            ),
            data / "chunks" / f"part-{p:05d}.parquet",
            row_group_size=8192,
        )
        owner = np.arange(m) // per_chunk
        pq.write_table(
            pa.table({"sentence_id": ids, "chunk_id": [chunk_ids[o] for o in owner], "text": [f"Sentence {p}-{r}." for r in range(m)]}, schema=SENTENCE_SCHEMA),
            data / "sentences" / f"part-{p:05d}.parquet",
            row_group_size=8192,
        )
        flat = faiss.IndexIDMap2(faiss.IndexFlatIP(dim))
        flat.add_with_ids(vecs, ids)
        faiss.write_index(flat, str(work / "flat" / "vectors" / f"part-{p:05d}.faiss"))
        del flat
        ivf = faiss.index_factory(dim, f"IVF{nlist},Flat", faiss.METRIC_INNER_PRODUCT)
        ivf.cp.max_points_per_centroid = 80  # train on a sample: k-means on all vectors is slow on 2 cores
        ivf.train(vecs)
        ivf.add_with_ids(vecs, ids)
        faiss.write_index(ivf, str(work / "ivf" / "vectors" / f"part-{p:05d}.faiss"))
        del ivf
        entries.append(
            {
                "part": p,
                "chunks": f"../data/chunks/part-{p:05d}.parquet",
                "sentences": f"../data/sentences/part-{p:05d}.parquet",
                "rejects": f"../data/rejects/part-{p:05d}.parquet",
                "vectors": f"vectors/part-{p:05d}.faiss",
                "num_documents": 0,
                "num_chunks": n_chunks,
                "num_sentences": m,
                "num_rejected": 0,
            }
        )
        all_vecs.append(vecs)
        all_ids.append(ids)
        all_chunks.append(chunk_base + owner)
        chunk_base += n_chunks
        print(f"  part {p}: {m:,} vectors, {n_chunks:,} chunks", flush=True)
    write_manifest(work / "flat", entries, dim, "Flat")
    write_manifest(work / "ivf", entries, dim, f"IVF{nlist},Flat")
    return np.concatenate(all_vecs), np.concatenate(all_ids), np.concatenate(all_chunks)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vectors", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--parts", type=int, default=4)
    ap.add_argument("--sentences-per-chunk", type=int, default=8)
    ap.add_argument("--nlist", type=int, default=512, help="IVF lists per shard")
    ap.add_argument("--nprobe", default="8,32,128", help="IVF lists probed per shard (comma-separated)")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--top-k", type=int, default=10)
    ap.add_argument("--workdir", default="/tmp/arag-bench-semantic")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(f"machine: {os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB RAM, faiss {faiss.__version__}")
    work = Path(args.workdir) / f"v{args.vectors}-d{args.dim}-p{args.parts}-n{args.nlist}"
    shutil.rmtree(work, ignore_errors=True)
    t = time.perf_counter()
    print(f"generating {args.vectors:,} vectors (dim {args.dim}) in {args.parts} shards, Flat and IVF{args.nlist},Flat ...")
    vecs, ids, chunk_ords = generate(work, args.vectors, args.dim, args.parts, args.sentences_per_chunk, args.nlist, args.seed)
    print(f"generated in {time.perf_counter() - t:.0f} s")
    try:
        rng = np.random.default_rng(args.seed + 1)
        picks = rng.integers(0, len(vecs), args.queries)
        queries = unit(vecs[picks] + 0.05 * rng.standard_normal((args.queries, args.dim)).astype(np.float32))
        lookup = {f"q{i}": queries[i] for i in range(args.queries)}

        def encoder(texts: list[str]) -> np.ndarray:
            return np.stack([lookup[t] for t in texts])

        k = args.top_k
        # Baseline: exact brute force over all vectors (what the tool must equal on Flat shards).
        exact_ids, brute_t = [], []
        for q in queries:
            t = time.perf_counter()
            scores = vecs @ q
            top = np.argpartition(-scores, 3 * k)[: 3 * k]
            top = top[np.lexsort((ids[top], -scores[top]))]
            brute_t.append(time.perf_counter() - t)
            exact_ids.append(ids[top])
        bp50 = pct(brute_t, 50)
        chunk_of = dict(zip(ids.tolist(), chunk_ords.tolist()))
        chunk_names = None
        print(f"\nqueries: {args.queries}, top_k={k} chunks (= top {3 * k} sentences)")
        print(f"{'layout':<26}{'tool p50':>10}{'tool p95':>10}{'faiss p50':>10}{'vs brute':>10}{'recall@10':>11}{'chunks=ref':>12}{'RSS MiB':>9}")
        print(f"{'brute force (numpy, exact)':<26}{bp50:>10.1f}{pct(brute_t, 95):>10.1f}{'':>10}{'1.0x':>10}{1.0:>11.3f}{'':>12}{vecs.nbytes / 2**20:>9,.0f}")
        layouts = [("Flat", work / "flat", None)] + [(f"IVF{args.nlist} nprobe={p}", work / "ivf", int(p)) for p in args.nprobe.split(",")]
        for name, root, nprobe in layouts:
            gc.collect()
            before = rss_mb()
            ctx = ToolContext(root, encoder=encoder, accelerate=False, nprobe=nprobe)
            ctx.shards  # load now, to measure memory separately from search
            mem = rss_mb() - before
            if chunk_names is None:
                chunk_names = ctx.store.chunks.column("chunk_id")
            tool_t, faiss_t, recalls, same = [], [], [], 0
            ctx.call("semantic_search", {"query": "q0", "top_k": k})  # warm-up
            for i in range(args.queries):
                t = time.perf_counter()
                res = ctx.call("semantic_search", {"query": f"q{i}", "top_k": k})
                tool_t.append(time.perf_counter() - t)
                if res.error:
                    raise SystemExit(res.error)
                t = time.perf_counter()
                _, got = ctx.search_sentences(queries[i : i + 1], k)
                faiss_t.append(time.perf_counter() - t)
                recalls.append(len(set(got.tolist()) & set(exact_ids[i][:k].tolist())) / k)
                expected = reference.semantic_chunks(vecs, ids, chunk_of, queries[i], k) if nprobe is None or i < 20 else None
                if expected is not None:
                    same += [h.chunk_id for h in res.results] == [chunk_names[c].as_py() for c, _, _ in expected]
            checked = args.queries if nprobe is None else min(20, args.queries)
            p50 = pct(tool_t, 50)
            print(
                f"{name:<26}{p50:>10.1f}{pct(tool_t, 95):>10.1f}{pct(faiss_t, 50):>10.1f}{bp50 / p50:>9.1f}x"
                f"{np.mean(recalls):>11.3f}{f'{same}/{checked}':>12}{mem:>9,.0f}"
            )
            ctx.close()
            del ctx
        print("tool = semantic_search end to end (FAISS over all shards, merge, group by chunk, snippets, text);")
        print("vs brute = brute-force p50 / tool p50; recall@10 = top-10 sentences vs exact; chunks=ref = identical top-k chunk ids to brute force")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
