"""The cost model's constants (arag.index.ann_recall): scanning cost per code byte of 8-bit PQ and of
fast-scan 4-bit PQ, and the cost of one exact re-ranked row; measured on one thread.

    python -m benchmarks.fastscan_cost [--vectors 200000] [--lists 256] [--nprobe 64] [--k 256]
        [--queries 200] [--rounds 3] [--cold-queries 50] [--real 20000] [--embedder static] [--workdir /tmp/arag-ann]

Data: `--vectors` vectors of tests/support/ann_data.py (`--real` real wiki sentences embedded by
`--embedder`, extended by generated ones), one exact shard written as the pipeline writes it.
Two IVF indexes over them share one coarse quantizer (`IVF<lists>`, k-means once): 8-bit `PQ<d/4>`
and fast-scan `PQ<d/4>x4fs` (the same number of sub-quantizers, so half the code bytes). Queries:
2WikiMultihopQA questions embedded by the same model.

Per round, on one FAISS thread, each query searched on each index in turn (8-bit, fast-scan;
the next query fast-scan first), `--k` results at `--nprobe`: the scan's ns per code byte is
a query's time over the code bytes of the lists it probed (counted per query from the coarse
assignment). The coarse search of `--lists` centroids and the top-k heap are in the time, as
they are in a build's measurement, which the constants price. Re-rank: `ann.rerank` (positioned
reads of the stored rows and their inner products, what `AnnSearcher` does after the scan) of
`--k` candidates drawn at random per query, page cache warm; and again for --cold-queries queries, each
after the shard's pages are dropped from the OS page cache (`posix_fadvise`), as when the shards do
not fit the memory left to it. Printed per round and as medians over
rounds, beside the constants the code uses; "8-bit / fast-scan" is the ratio of the two scans'
ns per byte within each round.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import faiss
import numpy as np

from arag.index import ann, ann_recall
from arag.index.layout import PART_SHIFT
from arag.index.vectors import build_shard, write_shard
from tests.support import ann_data


def two_indexes(vectors: np.ndarray, lists: int, train_size: int, seed: int = 0) -> tuple[faiss.Index, faiss.Index]:
    """8-bit and fast-scan IVF-PQ over `vectors` with the same coarse centroids."""
    d = vectors.shape[1]
    m = d // 4
    sample = vectors[np.random.default_rng(seed).choice(len(vectors), min(train_size, len(vectors)), replace=False)]
    eight = faiss.index_factory(d, f"IVF{lists},PQ{m}", faiss.METRIC_INNER_PRODUCT)
    eight.cp.seed = seed
    eight.do_polysemous_training = False
    eight.train(sample)
    fast = faiss.index_factory(d, f"IVF{lists},PQ{m}x4fs", faiss.METRIC_INNER_PRODUCT)
    faiss.extract_index_ivf(fast).quantizer.add(eight.quantizer.reconstruct_n(0, lists))
    fast.train(sample)  # FAISS skips the k-means of a quantizer that already holds its centroids
    for index in (eight, fast):
        index.add(vectors)
    return eight, fast


def codes_probed(index: faiss.Index, queries: np.ndarray, nprobe: int) -> np.ndarray:
    ivf = faiss.extract_index_ivf(index)
    sizes = np.asarray([ivf.invlists.list_size(i) for i in range(ivf.nlist)], np.int64)
    _, lists = ivf.quantizer.search(queries, nprobe)
    return sizes[lists].sum(axis=1)


def ns_per_code_byte(index: faiss.Index, queries: np.ndarray, order: list[int], nprobe: int, k: int, codes: np.ndarray) -> list[float]:
    """Per query (in `order`): its search time over the code bytes it scanned."""
    code_size = faiss.extract_index_ivf(index).code_size
    params = faiss.SearchParametersIVF(nprobe=nprobe)
    out = []
    for q in order:
        t = time.perf_counter_ns()
        index.search(queries[q : q + 1], k, params=params)
        out.append((time.perf_counter_ns() - t) / (codes[q] * code_size))
    return out


def evict(path: Path) -> None:
    """Drop the file's pages from the OS page cache (written back first): as after a restart, or when
    the shards outgrow the memory left to the page cache."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def warm(path: Path) -> None:
    """Read the whole file once, so its pages are in the page cache (undoing `evict`)."""
    with open(path, "rb", buffering=0) as f:
        while f.read(1 << 24):
            pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vectors", type=int, default=200_000)
    ap.add_argument("--lists", type=int, default=256)
    ap.add_argument("--nprobe", type=int, default=64)
    ap.add_argument("--k", type=int, default=256, help="results per query asked of the scan (candidates for the re-rank)")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--real", type=int, default=20_000, help="real wiki sentences embedded (cached under --workdir)")
    ap.add_argument("--embedder", choices=ann_data.EMBEDDERS, default="static")
    ap.add_argument("--train-size", type=int, default=65_536)
    ap.add_argument("--cold-queries", type=int, default=50, help="re-ranks timed with the shard's pages dropped from the page cache first")
    ap.add_argument("--workdir", default="/tmp/arag-ann")
    args = ap.parse_args()

    work = Path(args.workdir)
    real, knn = ann_data.real_vectors(work, args.real, kind=args.embedder)
    queries = ann_data.query_vectors(work, args.queries, kind=args.embedder)
    vectors = ann_data.generated_part(real, knn, 0, args.vectors)
    shard = work / f"fastscan-cost-{args.embedder}-{args.vectors}.faiss"
    if not shard.exists():
        write_shard(build_shard(vectors, np.arange(args.vectors, dtype=np.int64)), shard)
    faiss.omp_set_num_threads(2)
    t = time.perf_counter()
    eight, fast = two_indexes(vectors, args.lists, args.train_size)
    print(
        f"{args.vectors:,} {vectors.shape[1]}-d vectors ({args.embedder}), IVF{args.lists}: PQ{vectors.shape[1] // 4} "
        f"({eight.code_size} B) and PQ{vectors.shape[1] // 4}x4fs ({faiss.extract_index_ivf(fast).code_size} B) "
        f"built in {time.perf_counter() - t:.0f} s; {len(queries)} questions, nprobe {args.nprobe}, k {args.k}, faiss {faiss.__version__}, 1 thread",
        flush=True,
    )
    faiss.omp_set_num_threads(1)
    codes = codes_probed(eight, queries, args.nprobe)
    stored = ann.StoredVectors({0: shard})
    rng = np.random.default_rng(0)
    sides = {"8-bit": eight, "fast-scan": fast}
    for index in sides.values():  # warm-up: code pages and FAISS's first-call set-up
        ns_per_code_byte(index, queries, list(range(min(10, len(queries)))), args.nprobe, args.k, codes)
    print(f"codes scanned per query: median {np.median(codes):,.0f} ({np.median(codes) / args.vectors:.0%} of the vectors)")
    rounds: dict[str, list[float]] = {"8-bit": [], "fast-scan": [], "re-rank": [], "re-rank, cold": []}
    for r in range(args.rounds):
        warm(shard)  # the warm re-rank below, whatever the last round's cold one left
        per_query: dict[str, list[float]] = {"8-bit": [], "fast-scan": []}
        for q in range(len(queries)):
            names = list(sides) if q % 2 == 0 else list(reversed(sides))
            for name in names:
                per_query[name] += ns_per_code_byte(sides[name], queries, [q], args.nprobe, args.k, codes)
        rerank = []
        for q in range(len(queries)):
            ids = (np.int64(0) << PART_SHIFT) | rng.choice(args.vectors, args.k, replace=False).astype(np.int64)
            t = time.perf_counter_ns()
            ann.rerank(stored, ids, queries[q], ann_recall.RECALL_K)
            rerank.append((time.perf_counter_ns() - t) / args.k)
        cold = []
        for q in range(min(args.cold_queries, len(queries))):
            ids = (np.int64(0) << PART_SHIFT) | rng.choice(args.vectors, args.k, replace=False).astype(np.int64)
            evict(shard)
            t = time.perf_counter_ns()
            ann.rerank(stored, ids, queries[q], ann_recall.RECALL_K)
            cold.append((time.perf_counter_ns() - t) / args.k)
        for name in per_query:
            rounds[name].append(statistics.median(per_query[name]))
        rounds["re-rank"].append(statistics.median(rerank))
        rounds["re-rank, cold"].append(statistics.median(cold))
        print(
            f"round {r + 1}: 8-bit {rounds['8-bit'][-1]:.3f} ns per code byte, fast-scan {rounds['fast-scan'][-1]:.3f} "
            f"(8-bit / fast-scan {rounds['8-bit'][-1] / rounds['fast-scan'][-1]:.2f}x), re-rank {rounds['re-rank'][-1]:,.0f} ns per row, "
            f"{rounds['re-rank, cold'][-1]:,.0f} from a cold page cache (medians over queries)",
            flush=True,
        )
    median = {name: statistics.median(v) for name, v in rounds.items()}
    print(f"\nmedians over {args.rounds} rounds (load average {os.getloadavg()[0]:.1f} at the end):")
    print(f"  SCAN_NS_PER_CODE_BYTE      measured {median['8-bit']:.3f}   the code uses {ann_recall.SCAN_NS_PER_CODE_BYTE}")
    print(f"  FASTSCAN_NS_PER_CODE_BYTE  measured {median['fast-scan']:.3f}   the code uses {ann_recall.FASTSCAN_NS_PER_CODE_BYTE}")
    print(f"  RERANK_NS_PER_ROW          measured {median['re-rank']:,.0f}   the code uses {ann_recall.RERANK_NS_PER_ROW:,.0f}")
    print(f"  a re-ranked row read from a cold page cache: {median['re-rank, cold']:,.0f} ns ({median['re-rank, cold'] / median['re-rank']:.0f}x warm; "
          "the cost model prices a warm cache)")
    ratios = [a / b for a, b in zip(rounds["8-bit"], rounds["fast-scan"])]
    print(f"  8-bit / fast-scan per code byte: {statistics.median(ratios):.2f}x (rounds {min(ratios):.2f}-{max(ratios):.2f}x)")


if __name__ == "__main__":
    main()
