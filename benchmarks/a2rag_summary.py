"""Summarise an evaluation results tree per method, with A2RAG's own columns:

    python benchmarks/a2rag_summary.py --results /tmp/arag-a2rag/results --index indexes/2wiki

Per method: questions, EM, F1, evidence Recall@2 / Recall@5 (supporting titles among the first 2 / 5
distinct chunks the method read, in the order it read them), LLM calls and tokens per question,
latency P50/P95, and for a2rag the outcome and stage breakdown (local / bridge / PPR shares of the
answered episodes; abstain and fail shares of all) from each episode's trace. Rows are the
Parquet files `pipelines.evaluate` writes; nothing is recomputed but the recall at k.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

import duckdb
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from arag.evaluation.evidence import FULL_TEXT_TOOLS  # noqa: E402
from arag.index.store import open_index  # noqa: E402


def read_order(trajectory: dict) -> list[str]:
    """Chunks whose full text the episode read, first read first, each once."""
    seen: dict[str, None] = {}
    for call in trajectory.get("tool_calls", []):
        if call["name"] in FULL_TEXT_TOOLS:
            seen.update(dict.fromkeys(call.get("chunk_ids") or []))
    return list(seen)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--index", required=True)
    args = ap.parse_args()
    con = duckdb.connect()
    rows = con.execute(
        f"SELECT method, exact_match, f1, model_calls, prompt_tokens + completion_tokens, wall_s, supporting_titles, trajectory "
        f"FROM read_parquet('{args.results}/**/episodes/*.parquet') ORDER BY method"
    ).fetchall()
    titles = dict(con.execute("SELECT chunk_id, title FROM read_parquet(?)", [[str(f) for f in open_index(args.index).chunk_files]]).fetchall())
    by_method: dict[str, list] = defaultdict(list)
    for r in rows:
        by_method[r[0]].append(r)
    print("| method | n | EM | F1 | Recall@2 | Recall@5 | LLM calls/q | tokens/q | latency P50 s | P95 s | outcomes / stage reached |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for method, rs in by_method.items():
        rec = {2: [], 5: []}
        outcomes: Counter = Counter()
        for r in rs:
            traj = json.loads(r[7])
            order = [titles.get(c) for c in read_order(traj)]
            wanted = set(r[6] or [])
            for k in rec:
                if wanted:
                    rec[k].append(len(wanted & set(order[:k])) / len(wanted))
            trace = traj.get("trace") or {}
            if trace:
                outcome = trace.get("outcome")
                outcomes[f"{outcome}:{trace.get('stage_reached')}" if outcome == "answered" else outcome] += 1
        wall = np.array([r[5] for r in rs])
        shares = ", ".join(f"{k} {v / len(rs):.0%}" for k, v in sorted(outcomes.items())) or "-"
        print(
            f"| {method} | {len(rs)} | {np.mean([r[1] for r in rs]):.2f} | {np.mean([r[2] for r in rs]):.2f} | "
            f"{np.mean(rec[2]) if rec[2] else float('nan'):.2f} | {np.mean(rec[5]) if rec[5] else float('nan'):.2f} | "
            f"{np.mean([r[3] for r in rs]):.1f} | {np.mean([r[4] for r in rs]):.0f} | {np.percentile(wall, 50):.1f} | {np.percentile(wall, 95):.1f} | {shares} |"
        )


if __name__ == "__main__":
    main()
