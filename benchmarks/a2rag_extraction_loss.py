"""Extraction-loss stress test of A2RAG's graph retrieval, and the relation-seed ablation, without an LLM.

    python benchmarks/a2rag_extraction_loss.py --index /tmp/arag-a2rag/2wiki [--questions 200] [--drop 0,0.1,0.2,0.3,0.4]

For each of the first `--questions` 2Wiki questions: the graph's evidence in escalation order
(the source chunks of Stage 1's and Stage 2's triples, then Stage 3's PPR chunks, each new chunk once; the
sufficiency checks and the LLM are left out, so this is every stage's retrieval) against Naive
RAG's top chunks by embedding similarity (naive_embedding_search), both scored as Recall@2 and
Recall@5 of the supporting titles. The graph is then damaged: a fraction of its nodes (names made
unmatchable, their vectors zeroed, their edges removed) and the same fraction of the remaining
edges are deleted at random (seed 0), and the graph's recall measured again. Naive RAG does not use
the graph, so its recall is the baseline of every row; the ratio column is graph / naive Recall@5.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import numpy as np


from arag.evaluation.evidence import recall_at_k
from arag.graph.store import GraphStore
from arag.methods import load_method
from arag.methods.a2rag import STAGES
from arag.tools import ToolContext


def graph_ranking(method, graph, ctx, question: str, qvec) -> list[str]:
    top_docs = graph.gate_scores(qvec[0], top=3)
    seeds, relations = method._seeds(question, top_docs, graph, ctx)
    ids = [s.node_id for s in seeds]
    ranked: dict[str, None] = {}
    for stage in STAGES:
        if stage == "ppr":
            have = len(ranked)
            for c in graph.rank_chunks(graph.ppr(ids, method.ppr_alpha, method.ppr_top_nodes), method.chunks_per_stage + have):
                if len(ranked) >= have + method.chunks_per_stage:
                    break
                ranked.setdefault(c, None)
        else:
            triples = method._graph_stage(stage, graph, ids, relations)[0]
            for c in (c for t in triples for c in t.chunk_ids):
                ranked.setdefault(c, None)
    return list(ranked)


def damage(graph: GraphStore, fraction: float, rng: random.Random) -> GraphStore:
    """The graph with `fraction` of its nodes and then of its edges deleted (in place: reopen to undo)."""
    if fraction <= 0:
        return graph
    n = len(graph.names)
    dropped = rng.sample(range(n), int(fraction * n))
    vectors = np.array(graph.node_vectors)
    for v in dropped:
        graph.names[v] = ""
        vectors[v] = 0
    graph.__dict__["node_vectors"] = vectors
    g = graph.graph
    g.delete_edges(sorted({e for v in dropped for e in g.incident(v)}))
    g.delete_edges(rng.sample(range(g.ecount()), int(fraction * g.ecount())))
    graph.degree = np.asarray(g.degree(), dtype=np.float64)
    return graph


def recall(order: list[str], titles: dict[str, str], wanted: set[str], k: int) -> float:
    """Recall@k over passages (a packed window counts as the passages it covers), as evaluations report it."""
    return recall_at_k([titles.get(c) for c in order], wanted, k) or 0.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--index", required=True)
    ap.add_argument("--questions-file", default=str(Path(__file__).resolve().parents[2] / "shared/data/2wikimultihopqa/questions.jsonl"))
    ap.add_argument("--questions", type=int, default=200)
    ap.add_argument("--drop", default="0,0.1,0.2,0.3,0.4")
    args = ap.parse_args()
    questions = [json.loads(line) for line in open(args.questions_file)][: args.questions]
    questions = [q for q in questions if q.get("supporting_titles")]
    ctx = ToolContext(args.index)
    titles = dict(ctx.sql("SELECT chunk_id, title FROM chunks"))
    qvecs = [ctx.encode_query(q["question"]) for q in questions]
    naive = [[h.chunk_id for h in ctx.call("naive_embedding_search", {"query": q["question"], "top_k": 5}).results] for q in questions]
    wanted = [set(q["supporting_titles"]) for q in questions]
    n2 = np.mean([recall(o, titles, w, 2) for o, w in zip(naive, wanted)])
    n5 = np.mean([recall(o, titles, w, 5) for o, w in zip(naive, wanted)])
    print(f"{len(questions)} questions; Naive RAG Recall@2 {n2:.3f}  Recall@5 {n5:.3f}")
    print("| graph damage | relation seeds | graph Recall@2 | graph Recall@5 | Naive Recall@5 | ratio @5 |")
    print("|---|---|---|---|---|---|")
    for fraction in (float(x) for x in args.drop.split(",")):
        for relation_seeds in ((False, True) if fraction == 0 else (False,)):
            method = load_method("a2rag" if relation_seeds else "a2rag_node_only")
            graph = damage(GraphStore(args.index), fraction, random.Random(0))
            orders = [graph_ranking(method, graph, ctx, q["question"], v) for q, v in zip(questions, qvecs)]
            g2 = np.mean([recall(o, titles, w, 2) for o, w in zip(orders, wanted)])
            g5 = np.mean([recall(o, titles, w, 5) for o, w in zip(orders, wanted)])
            print(f"| {fraction:.0%} nodes and edges | {'on' if relation_seeds else 'off'} | {g2:.3f} | {g5:.3f} | {n5:.3f} | {g5 / n5:.2f} |", flush=True)
    ctx.close()


if __name__ == "__main__":
    main()
