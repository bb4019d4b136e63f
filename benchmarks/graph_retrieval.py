"""Benchmark A2RAG's graph hot paths on a built graph (python -m pipelines.graph first).

    python -m benchmarks.graph_retrieval --index /tmp/arag-a2rag/2wiki [--queries 200] [--chunks 2000]

In one run, on the same graph, seeds and settings:
  * Stage 3: igraph's personalised PageRank (PRPACK, what the method runs) against networkx's
    pagerank with the same personalization (a power iteration in Python; tol 1e-10 so both are
    converged: what differs is only the solver) — latency p50/p95 and the ratio; and that the two
    agree (max abs difference of r);
  * Stages 1 and 2 (local 1-hop, bridges within 2 hops of two seeds), latency, as ratios to Stage 3;
  * the rule extractor over `--chunks` chunks against splitting the same chunks into sentences
    with the index's splitter (arag.index.sentences: the per-chunk work of the index build), as a
    ratio: what the graph job adds per chunk relative to the index's own text pass.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import numpy as np


from arag.graph.extract import Chunk, RuleExtractor
from arag.graph.store import GraphStore, degree_normalised_reset, personalized_pagerank
from arag.index.sentences import sentence_spans
from arag.index.store import open_index


def timed(fn, items) -> np.ndarray:
    out = []
    for item in items:
        started = time.perf_counter()
        fn(item)
        out.append(time.perf_counter() - started)
    return np.asarray(out) * 1000


def describe(name: str, ms: np.ndarray, base: np.ndarray | None = None) -> str:
    ratio = f"  {np.median(base) / np.median(ms):7.2f}x faster than networkx" if base is not None else ""
    return f"{name:34s} p50 {np.percentile(ms, 50):8.2f} ms  p95 {np.percentile(ms, 95):8.2f} ms{ratio}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--index", required=True)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--networkx-queries", type=int, default=10, help="networkx is slow: fewer queries for the baseline")
    ap.add_argument("--chunks", type=int, default=2000)
    ap.add_argument("--alpha", type=float, default=0.15)
    args = ap.parse_args()

    import networkx as nx
    import pyarrow.parquet as pq

    store = GraphStore(args.index)
    g = store.graph
    print(f"graph: {g.vcount()} nodes, {g.ecount()} edges (undirected, deduplicated)")
    rng = random.Random(0)
    connected = [v for v in range(g.vcount()) if store.degree[v] > 0]
    seed_sets = [rng.sample(connected, 2) for _ in range(args.queries)]

    nxg = nx.Graph()
    nxg.add_nodes_from(range(g.vcount()))
    nxg.add_edges_from(g.get_edgelist())
    degrees = np.asarray(g.degree(), dtype=np.float64)

    def nx_ppr(seeds):
        p0 = degree_normalised_reset(degrees, seeds)
        return nx.pagerank(nxg, alpha=1 - args.alpha, personalization={int(i): float(p0[i]) for i in np.flatnonzero(p0)}, tol=1e-10, max_iter=1000)

    ig_ms = timed(lambda s: personalized_pagerank(g, s, args.alpha), seed_sets)
    nx_sets = seed_sets[: args.networkx_queries]
    nx_ms = timed(nx_ppr, nx_sets)
    diff = 0.0
    for seeds in nx_sets[:3]:
        ref = nx_ppr(seeds)
        got = personalized_pagerank(g, seeds, args.alpha)
        diff = max(diff, float(np.max(np.abs(got - np.array([ref[i] for i in range(g.vcount())])))))
    print(describe("PPR networkx (baseline)", nx_ms))
    print(describe("PPR igraph (the method)", ig_ms, nx_ms))
    print(f"  max |r_igraph - r_networkx| over 3 queries: {diff:.2e}")
    local_ms = timed(lambda s: store.local(s), seed_sets)
    bridge_ms = timed(lambda s: store.bridges(s, 2, 8), seed_sets)
    ppr_top_ms = timed(lambda s: store.rank_chunks(store.ppr(s, args.alpha, 20), 5), seed_sets)
    for name, ms in (("stage 1 local 1-hop", local_ms), ("stage 2 bridges (K=2, 8 paths)", bridge_ms), ("stage 3 PPR + top-20 → chunks", ppr_top_ms)):
        print(f"{describe(name, ms)}  ({np.median(ms) / np.median(ppr_top_ms):.4f}x stage 3's time)")

    index = open_index(args.index)
    table = pq.read_table(index.chunk_files[0], columns=["chunk_id", "doc_id", "title", "text"]).slice(0, args.chunks)
    chunks = [Chunk(r["chunk_id"], r["doc_id"], r["title"] or "", r["text"]) for r in table.to_pylist()]
    extractor = RuleExtractor()
    started = time.perf_counter()
    for c in chunks:
        sentence_spans(c.text)
    split_s = time.perf_counter() - started
    started = time.perf_counter()
    for c in chunks:
        extractor.extract(c)
    rule_s = time.perf_counter() - started
    print(f"sentence split (index baseline)    {len(chunks) / split_s:9.0f} chunks/s")
    print(f"rule extractor                     {len(chunks) / rule_s:9.0f} chunks/s  ({rule_s / split_s:.2f}x the split's time)")


if __name__ == "__main__":
    main()
