"""Two ANN indexes over the same vectors, searched side by side in one process: each held-out
question on each index in turn, with each index's own chosen settings (its manifest's `ann.search`).

    python -m benchmarks.ann_side_by_side <index A> <index B> [--embedder static] [--tune-questions 500]
        [--queries 300] [--passes 2] [--threads 1] [--workdir /tmp/arag-ann]

The indexes are folders that `python -m benchmarks.semantic_search ... --keep` wrote
(`<workdir>/<embedder>/index-<size>-<factory>`, e.g. one built with `--factory IVF512,PQ64` and one
with `--factory IVF2048,PQ128x4fs` at the same `--sizes`): they must hold the same exact shards.
The questions are that benchmark's held-out ones (the `--queries` 2WikiMultihopQA questions after the
first `--tune-questions`, embedded by `--embedder`, cached under `--workdir`), so pass the same
three options.

Each index is loaded once (`VectorSearch`, as semantic_search searches). Then `--passes` passes over
the questions: in pass p, question q is searched on A then B when p + q is even, B then A
otherwise, so both see the same load and neither is always second. Recall@10 against exact search
(over the shards), with a 95% interval that resamples the questions (seeded bootstrap: a question's
ten neighbours are not independent of each other); p50 / p95 over every search; "B / A" is the ratio
of the p50s within each pass.
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
from arag.index.store import open_index
from arag.report.intervals import bootstrap_interval
from arag.tools.vector_search import VectorSearch
from benchmarks.semantic_search import exact_top
from tests.support import ann_data

K = ann_recall.RECALL_K


def shards_of(root: Path) -> dict[int, Path]:
    return {p.part: p.vectors.resolve() for p in open_index(root).parts if p.num_sentences}


def per_query_recall(got: list[np.ndarray], exact: np.ndarray) -> list[float]:
    return [len(set(g.tolist()) & set(e.tolist())) / K for g, e in zip(got, exact)]


def recall_text(recalls: list[float]) -> str:
    low, high = bootstrap_interval(recalls)
    return f"{np.mean(recalls):.3f} [{low:.3f}, {high:.3f}] n={len(recalls)}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("indexes", nargs=2, help="two index folders over the same shards (semantic_search --keep)")
    ap.add_argument("--embedder", choices=ann_data.EMBEDDERS, default="static")
    ap.add_argument("--tune-questions", type=int, default=ann_recall.QUERY_SAMPLE, help="as semantic_search's: the questions before the held-out ones")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="FAISS threads while searching")
    ap.add_argument("--workdir", default="/tmp/arag-ann")
    args = ap.parse_args()

    roots = [Path(p) for p in args.indexes]
    shards = [shards_of(r) for r in roots]
    if shards[0] != shards[1]:
        raise SystemExit(f"{roots[0]} and {roots[1]} do not hold the same exact shards: no side by side on different data")
    queries = ann_data.query_vectors(Path(args.workdir), args.tune_questions + args.queries, kind=args.embedder)[args.tune_questions :]
    t = time.perf_counter()
    exact = exact_top(sorted(shards[0].items()), queries)
    print(f"{len(queries)} held-out questions; exact top-{K} over {len(shards[0])} shards in {time.perf_counter() - t:.1f} s", flush=True)

    sides = []
    for root in roots:
        search = VectorSearch(open_index(root), mmap_bytes=1 << 62)
        t = time.perf_counter()
        search.load()
        entry = search.ann_entry
        if entry is None:
            raise SystemExit(f"{root}: no ANN in its manifest")
        nprobe, rerank = ann.search_settings(entry)
        codes = (entry.get("search") or {}).get("codes_scanned")
        print(f"{root.name}: {entry['factory']}, chosen nprobe {nprobe}, rerank {rerank} ({ann_recall.candidates(rerank)} candidates), codes scanned {codes:,} (the build's count); loaded in {time.perf_counter() - t:.1f} s", flush=True)
        sides.append(search)
    faiss.omp_set_num_threads(args.threads)
    for search in sides:  # warm-up
        search.search(queries[:1], K)

    times: list[list[float]] = [[], []]
    found: list[list[np.ndarray]] = [[None] * len(queries), [None] * len(queries)]
    ratios = []
    for p in range(args.passes):
        this_pass: list[list[float]] = [[], []]
        for q in range(len(queries)):
            for s in ((0, 1) if (p + q) % 2 == 0 else (1, 0)):
                t = time.perf_counter()
                _, ids = sides[s].search(queries[q : q + 1], K)
                this_pass[s].append(time.perf_counter() - t)
                found[s][q] = ids
        for s in (0, 1):
            times[s] += this_pass[s]
        ratios.append(statistics.median(this_pass[1]) / statistics.median(this_pass[0]))
        print(f"pass {p + 1}: p50 A {1000 * statistics.median(this_pass[0]):.2f} ms, B {1000 * statistics.median(this_pass[1]):.2f} ms, B / A {ratios[-1]:.2f}x", flush=True)

    print(f"\n{'index':<40}{'recall@10 [95% over questions]':>34}{'p50 ms':>9}{'p95 ms':>9}")
    for s, root in enumerate(roots):
        ms = np.asarray(times[s]) * 1000
        print(f"{'AB'[s] + ' ' + root.name:<40}{recall_text(per_query_recall(found[s], exact)):>34}{np.percentile(ms, 50):>9.2f}{np.percentile(ms, 95):>9.2f}")
    print(f"B / A p50: {statistics.median(ratios):.2f}x (passes {', '.join(f'{r:.2f}' for r in ratios)}); {args.threads} FAISS thread(s); load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
