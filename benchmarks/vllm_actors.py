"""The vLLM-in-Ray path at thousands of episodes in flight: `pipelines.evaluate model=vllm` (the library
call, arag.runtime.evaluate) against the real `EngineServer` actors with a stand-in for vLLM's engine
(tests/support/vllm_standin.py: the simulator's latency model; the packaged Qwen2.5 model's real chat
template and tokenizer, vLLM's sampling parameters and its hermes tool-call parser, all in the actor).

    python -m benchmarks.vllm_actors             # 4 workers x 500 episodes in flight, over 1 and over 4 engine actors
    python -m benchmarks.vllm_actors --small     # 2 workers x 250 in flight, one engine actor (a few minutes; CI)
    python -m benchmarks.vllm_actors --workers 4 --concurrency 500 --engines 1,2,4 --rounds 3 --time-scale 8
    python -m benchmarks.vllm_actors --engines 1 --rounds 2   # 2,000 in flight at one actor, 4,000 episodes (the whole run's rate)

Needs vLLM (the environment `cluster/install_vllm.sh cpu` makes) and the packaged model's HF folder
(converted from its GGUF once, as tests/llm/test_vllm.py does; only its tokenizer is read).

Each configuration (`--engines` actors; worker i talks to actor i mod engines, as `runtime.engines`
places them) runs `--rounds` x workers x concurrency episodes of `method=arag_no_semantic` (keyword_search,
chunk_read, answer: three model calls) over a 4,000-chunk synthetic index read by the workers
themselves, the judge off. The engine actors are started first by this driver, named as the workers'
backends name them (`model.actor_name`, `-e<i>`), and the backends, told `model.detached=true`, find
them by name as they find a detached engine a sweep left running (and none of them stops one).

Printed per configuration: episodes/min over the steady window (from the moment the first wave is
answered, as many answers as episodes in flight, to the first request of the last episode), the ideal
(the sum over engines of EngineModel.ideal_episodes_per_min for its episodes in flight with the run's
own mean call: calls per episode, uncached prompt tokens, completion tokens; in wall-clock minutes,
divided by the time scale) and their ratio; the peak of requests in flight at each engine actor; the
lag of each actor's event loop (p50/p99/max of a 50 ms tick); the actor's thread CPU per request for
rendering the chat template, tokenizing the prompt and parsing tool calls (one call in 8 timed), the
stand-in's own work, and the actor process's whole CPU per request (Ray's threads included); rows
lost and duplicated. With `--rounds` below 3 the rate is the whole run's (ramp-up and tail included).

The engine's time scale: this machine's cores cannot do the actor and worker work of an H100
engine's request rate, so the engine runs `--time-scale` times slower than one H100 (4 by default,
1 for `--small`, whose 1,500 episodes would otherwise take ~13 min; with several engines each runs
`engines` times slower still, so the same total load is spread over more actor processes). The
ideal of these episodes is bound by the engine's serial prefill (each call brings hundreds of new
tokens of tool results, and at 256 running sequences of ~1,500 tokens the 400k-token KV cache keeps
little of earlier prompts). The CPU per request, measured, says what a real-speed engine needs.

The last line reads `vllm-actors: in_flight=<peak requests at one engine> ratio=<measured / ideal>
lost=<n> duplicated=<n>` (of the last configuration).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MODEL = "qwen2.5-coder-0.5b-instruct-q4"
FULL = dict(workers=4, concurrency=500, rounds=3, engines="1,4", time_scale=4.0)
SMALL = dict(workers=2, concurrency=250, rounds=3, engines="1", time_scale=1.0)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--small", action="store_true", help="2 workers x 250 in flight, one engine actor")
    p.add_argument("--workers", type=int)
    p.add_argument("--concurrency", type=int, help="episodes in flight per worker")
    p.add_argument("--rounds", type=int, help="episodes per slot (>= 3 for a steady window)")
    p.add_argument("--engines", help="comma-separated engine actor counts, one configuration each")
    p.add_argument("--time-scale", type=float, help="the engine runs this many times slower than one H100 (x engines)")
    p.add_argument("--max-num-seqs", type=int, default=256)
    p.add_argument("--out", type=Path, help="write the figures (JSON) here")
    args = p.parse_args(argv)
    for key, value in (SMALL if args.small else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    for key in ("workers", "concurrency", "rounds", "max_num_seqs"):
        if getattr(args, key) < 1:
            p.error(f"--{key.replace('_', '-')} must be at least 1")
    if not args.time_scale > 0:
        p.error("--time-scale must be positive")
    try:
        args.engine_counts = [int(e) for e in str(args.engines).split(",") if e]
    except ValueError:
        p.error(f"--engines: comma-separated counts, got {args.engines!r}")
    if not args.engine_counts or min(args.engine_counts) < 1:
        p.error("--engines: at least one count, each at least 1")
    return args


def run_configuration(args: argparse.Namespace, engines: int, work: Path, tokenizer_path: str) -> dict[str, Any]:
    import ray

    from arag.config.typed import typed_config
    from arag.runtime.evaluate import evaluate
    from arag.runtime.vllm_engine import NAMESPACE
    from benchmarks.pipeline_config import compose_pipeline
    from benchmarks.rehearsal import stored_rows
    from tests.support.vllm_standin import StandInServer, ideal_per_min, steady_rate

    in_flight = args.workers * args.concurrency
    per_engine = -(-args.workers // engines) * args.concurrency
    episodes = in_flight * args.rounds
    time_scale = args.time_scale * engines
    base = f"arag-bench-vllm-actors-{uuid.uuid4().hex[:8]}"
    max_model_len = 8192
    payload = {"model": MODEL, "max_model_len": max_model_len, "tool_parser": "hermes", "engine_args": {}}
    actor = ray.remote(StandInServer)
    # owned by this driver (they end with it); the workers' backends are told `detached` so that none stops them
    options = dict(namespace=NAMESPACE, num_cpus=0, max_concurrency=per_engine + 64, max_restarts=0)
    handles = [actor.options(name=f"{base}-e{i}", **options).remote(payload, tokenizer_path, {"max_num_seqs": args.max_num_seqs}, time_scale) for i in range(engines)]
    results = work / f"results-{engines}"
    overrides = [
        "model=vllm", f"model.model={MODEL}", f"model.model_path={tokenizer_path}", f"model.actor_name={base}", "model.detached=true",
        "model.num_gpus=0", f"model.max_num_seqs={args.max_num_seqs}", f"model.max_model_len={max_model_len}", "model.max_tokens=512",
        "model.timeout_s=3600", "method=arag_no_semantic", f"index.path={work / 'index'}", f"questions.path={work / 'questions.jsonl'}",
        "judge.enabled=false", f"results.path={results}", "progress=false", f"limit={episodes}", f"runtime.workers={args.workers}",
        f"runtime.concurrency={args.concurrency}", f"runtime.engines={engines}",
    ]
    try:
        ray.get([h.ready.remote() for h in handles], timeout=600)
        ray.get([h.standin_stats.remote(reset=True) for h in handles], timeout=120)  # the start-up's CPU is not a request's
        cfg = compose_pipeline("evaluate", overrides)
        t = time.time()
        summary = evaluate(typed_config(cfg), overrides=overrides)
        wall = time.time() - t
        stats = ray.get([h.standin_stats.remote() for h in handles], timeout=120)
    finally:
        for h in handles:
            ray.kill(h)
    rate = steady_rate([x for s in stats for x in s["started_at"]], [x for s in stats for x in s["answered_at"]], in_flight)
    ideal = ideal_per_min(stats, per_engine)
    requests = sum(s["server"]["requests"] for s in stats) or 1
    cpu_ms = {k: round(1e3 * sum(s["cpu_s"].get(k, 0.0) for s in stats) / requests, 3) for k in ("render", "encode", "parse", "standin", "process")}
    # what the actor process spends per request beyond the stand-in's own work (Ray's calls, EngineServer, the loop)
    cpu_ms["actor_less_standin"] = round(cpu_ms["process"] - cpu_ms["standin"], 3)
    rows = stored_rows(results, episodes)
    out = {
        "engines": engines, "workers": args.workers, "concurrency": args.concurrency, "episodes": episodes, "time_scale": time_scale,
        "wall_s": round(wall, 1), "ok": summary.get("ok", summary.get("answered")), "rate": rate,
        "ideal_episodes_per_min": round(ideal["episodes_per_min"], 1), "ideal": ideal["engines"],
        "ratio": round(rate["episodes_per_min"] / ideal["episodes_per_min"], 3) if ideal["episodes_per_min"] else None,
        "peak_in_flight": [s["server"]["peak_inflight"] for s in stats], "peak_running": [s["engine"]["peak_running"] for s in stats],
        "requests": requests, "loop_lag": [s["loop_lag"] for s in stats], "cpu_ms_per_request": cpu_ms, "rows": rows,
    }
    return out


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a private local instance
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # Ray's worker processes import this checkout (the stand-in, arag), not another installed copy.
    os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    from arag.llm.convert import ensure_hf_model
    from arag.runtime.cluster import init_ray
    from tests.support.synthetic_index import write_register_questions, write_synthetic_index

    tokenizer_path = str(ensure_hf_model(MODEL, dtype="float32"))
    work = Path(tempfile.mkdtemp(prefix="arag-bench-vllm-actors-"))
    figures: list[dict[str, Any]] = []
    try:
        write_synthetic_index(work / "index", num_chunks=4000, parts=2, log=lambda *_: None)
        write_register_questions(work / "questions.jsonl", work / "index", args.workers * args.concurrency * args.rounds)
        init_ray(num_cpus=args.workers + 2)
        print(f"{args.workers} workers x {args.concurrency} episodes in flight, {args.rounds} rounds, engine time scale {args.time_scale:g} x engines, "
              f"max_num_seqs {args.max_num_seqs}, {os.cpu_count()} CPUs", flush=True)
        for engines in args.engine_counts:
            r = run_configuration(args, engines, work, tokenizer_path)
            figures.append(r)
            lag = "; ".join(f"p50 {x.get('p50_ms', 0):.0f} p99 {x.get('p99_ms', 0):.0f} max {x.get('max_ms', 0):.0f} ms" for x in r["loop_lag"])
            print(f"{engines} engine actor(s): {r['rate']['episodes_per_min']:.1f} episodes/min ({r['rate']['basis']} window {r['rate'].get('window_s')} s) "
                  f"/ ideal {r['ideal_episodes_per_min']:.1f} = {r['ratio']}; peak in flight per actor {r['peak_in_flight']}, running {r['peak_running']}; "
                  f"loop lag {lag}; CPU ms per request {r['cpu_ms_per_request']}; rows {r['rows']}; wall {r['wall_s']} s", flush=True)
        if args.out:
            args.out.write_text(json.dumps(figures, indent=1))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    last = figures[-1]
    print(f"vllm-actors: in_flight={max(last['peak_in_flight'])} ratio={last['ratio']} lost={last['rows']['lost']} duplicated={last['rows']['duplicated']}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
