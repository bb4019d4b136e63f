"""A2RAG's first-attempt retrieval without an LLM: with structural sufficiency (the default) the
gate, seeds and the local → bridge → PPR escalation call no model, so Recall@2/@5 (supporting passages
among the first k passages retrieved: Stages 1–2's triples' source chunks, then Stage 3's) and the stage each question stops at are measured here for the
Full method and the Node-only ablation on the per-passage index.

    python -m pipelines.index +corpus=2wikimultihopqa-passages && python -m pipelines.graph index.path=indexes/2wikimultihopqa-passages
    python benchmarks/a2rag_first_attempt.py --index indexes/2wikimultihopqa-passages [--questions 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections import Counter
from pathlib import Path
from types import SimpleNamespace


from arag.evaluation.evidence import recall_at_k
from arag.graph.summaries import EXTRACTIVE_LABEL
from arag.methods import load_method
from arag.methods.a2rag import STAGES, Evidence
from arag.tools import ToolContext
from tests.support.paths import TWOWIKI_QUESTIONS


def first_attempt(method, graph, ctx, question: str) -> tuple[list[str], str]:
    """The chunks the escalation retrieves, in order, and the stage it stopped at."""
    top_docs = graph.gate_scores(ctx.encode_query(question)[0], top=3, summaries=method.gate_summaries)
    episode = SimpleNamespace(trace={"stages": [], "sufficiency": []}, tool_calls=[], steps=0)
    asyncio.run(method._escalate(question, question, top_docs, graph, ctx, episode, None, [], Evidence(), 0))
    return list(dict.fromkeys(c for call in episode.tool_calls for c in call.chunk_ids)), episode.trace["stage_reached"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--index", required=True)
    ap.add_argument("--questions-file", default=str(TWOWIKI_QUESTIONS))
    ap.add_argument("--questions", type=int, default=200)
    args = ap.parse_args()
    questions = [q for q in map(json.loads, open(args.questions_file)) if q.get("supporting_titles")][: args.questions]
    print("| method | questions | Recall@2 | Recall@5 | " + " | ".join(f"stops at {s} %" for s in STAGES) + " |")
    print("|---|---:|---:|---:|" + "---:|" * len(STAGES))
    with ToolContext(args.index) as ctx:
        titles = dict(ctx.sql("SELECT chunk_id, title FROM chunks"))
        for name in ("a2rag", "a2rag_node_only"):
            method = load_method(name)
            assert method.sufficiency == "structural"
            graph = method.graph_for(ctx)
            if graph.summaries_written_by == EXTRACTIVE_LABEL:  # a graph built without a model: its gate summaries are extractive
                method = load_method(name, {"gate_summaries": "extractive"})
            recall = {2: 0.0, 5: 0.0}
            stops: Counter = Counter()
            for q in questions:
                ranked, stage = first_attempt(method, graph, ctx, q["question"])
                for k in recall:
                    recall[k] += recall_at_k([titles[c] for c in ranked], q["supporting_titles"], k)
                stops[stage] += 1
            n = len(questions)
            print(f"| {name} | {n} | {100 * recall[2] / n:.1f} | {100 * recall[5] / n:.1f} | " + " | ".join(f"{100 * stops[s] / n:.0f}" for s in STAGES) + " |", flush=True)


if __name__ == "__main__":
    main()
