"""Seconds per episode and tokens/s of the embedded CPU default on 2WikiMultiHopQA questions.

    python -m benchmarks.agent_cpu_default --index indexes/2wiki [--n 3] [--method arag_full] \
        [--model qwen2.5-coder-1.5b-instruct] [--max-steps 6] [--threads N]

Runs `--n` questions (the first ones of questions.jsonl) through the agent with the llamacpp backend
and prints, per episode and in total: wall seconds, steps, prompt and completion tokens, decode
speed (completion tokens per second of model time) and prompt throughput, and whether a gold answer
appears in the answer. The baseline in the same run is one bare completion of a fixed prompt
(model time without the agent), so the agent's overhead reads as a ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path


from arag.agent import Agent, AgentConfig, GuardRails
from arag.llm.llamacpp import LlamaCppBackend
from arag.llm.types import Message
from arag.methods import load_method
from arag.tools import ToolContext


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--index", required=True)
    p.add_argument("--questions", default=os.path.join(os.environ.get("ARAG_DATA_DIR", "../shared/data"), "2wikimultihopqa", "questions.jsonl"))
    p.add_argument("--n", type=int, default=3)
    p.add_argument("--method", default="arag_full")
    p.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    p.add_argument("--max-steps", type=int, default=6)
    p.add_argument("--n-ctx", type=int, default=8192)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--require-read", action="store_true", help="guard rail: refuse answers before anything was read")
    p.add_argument("--tool-steps", type=int, default=0, help="guard rail: the first N steps may only call tools")
    p.add_argument("--out", default=None, help="write the episode records (JSON lines) here")
    args = p.parse_args()

    questions = [json.loads(line) for line in open(args.questions)][: args.n]
    t0 = time.perf_counter()
    backend = LlamaCppBackend(args.model, n_ctx=args.n_ctx, n_threads=args.threads)
    load_s = time.perf_counter() - t0
    ctx = ToolContext(args.index)
    print(f"model {args.model} loaded in {load_s:.1f}s ({backend.n_threads} threads); method {args.method}; {len(questions)} questions; require_read={args.require_read}, tool_steps={args.tool_steps}")

    # Baseline: one bare completion (no agent, no tools).
    t = time.perf_counter()
    base = backend.complete([Message("user", "Name three rivers in Europe, one line each.")], max_tokens=48)
    base_s = time.perf_counter() - t
    base_tps = (base.completion_tokens or 0) / base_s
    print(f"baseline bare completion: {base.prompt_tokens}+{base.completion_tokens} tokens in {base_s:.1f}s ({base_tps:.1f} completion tokens/s)")

    ctx.encode_query("warm up the query encoder")  # loaded once; not part of any episode
    agent = Agent(backend, load_method(args.method), ctx, protocol="json", config=AgentConfig(max_steps=args.max_steps, guard_rails=GuardRails(require_read_before_answer=args.require_read, tool_steps=args.tool_steps)))
    rows, out = [], open(args.out, "w") if args.out else None
    for q in questions:
        ep = agent.run(q["question"], question_id=q["id"])
        model_s = sum(m.latency_s for m in ep.model_calls)
        tot = ep.token_totals()
        hit = ep.answer is not None and any(a.lower() in ep.answer.lower() for a in q["answers"])
        rows.append((ep.wall_s, model_s, tot["prompt_tokens"], tot["completion_tokens"], ep.steps, hit))
        print(
            f"- {q['question'][:70]!r}: {ep.status}{' (forced)' if ep.forced else ''} answer={ep.answer!r} gold={q['answers']} hit={hit} | "
            f"{ep.wall_s:.1f}s wall, {model_s:.1f}s model, {ep.steps} steps, {tot['prompt_tokens']}+{tot['completion_tokens']} tokens, "
            f"{tot['completion_tokens'] / model_s if model_s else 0:.1f} completion tok/s"
        )
        if out:
            out.write(json.dumps(ep.to_json(), ensure_ascii=False, default=str) + "\n")
    n = len(rows)
    wall, model_s = sum(r[0] for r in rows), sum(r[1] for r in rows)
    prompt, completion = sum(r[2] for r in rows), sum(r[3] for r in rows)
    print(
        f"\nsummary: {wall / n:.1f} s/episode (model {model_s / n:.1f}s), {sum(r[4] for r in rows) / n:.1f} steps/episode, "
        f"{prompt / n:.0f} prompt + {completion / n:.0f} completion tokens/episode; "
        f"{(prompt + completion) / model_s:.1f} tokens/s processed, {completion / model_s:.1f} completion tokens/s of model time "
        f"({completion / model_s / base_tps if base_tps else 0:.2f}x the bare baseline); {sum(r[5] for r in rows)}/{n} answers contain a gold answer"
    )
    backend.close()
    ctx.close()


if __name__ == "__main__":
    main()
