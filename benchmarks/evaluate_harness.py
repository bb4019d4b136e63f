"""Harness overhead of `pipelines.evaluate`: episodes/min when the model answers instantly.

    python benchmarks/evaluate_harness.py [--index indexes/2wiki] [--n 300] [--workers 1,2] [--concurrency 8] [--semantic]

The scripted backend replays the same actions for every question (keyword_search, semantic_search
with --semantic, chunk_read of a real chunk, then an answer) with no model latency, and a scripted
judge gives verdicts, so what is measured is the tools, the orchestration (Ray actors, the driver
loop), scoring and result writing alone. In one run, over the first `--n` questions of 2Wiki:

  * baseline: a plain sequential loop calling `Agent.run` in-process (no Ray, no scoring, no writing);
  * runner: `EpisodeRunner` in-process, `--concurrency` episodes at once on one event loop, with
    scoring and the judge (no Ray, no writing);
  * evaluate: `run_episodes` on a local Ray instance with `--workers` EpisodeWorker actors, each
    running `--concurrency` episodes at once, writing Parquet batches (a fresh results folder).

Each prints episodes/min and the ratio to the baseline; for the Ray runs both with start-up (actor
launch, index opening) and steady state (first to last finished episode).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml  # noqa: E402

from arag.agent import Agent, AgentConfig  # noqa: E402
from arag.evaluation.questions import load_questions  # noqa: E402
from arag.evaluation.results import RunStore  # noqa: E402
from arag.evaluation.runner import EpisodeRunner  # noqa: E402
from arag.evaluation.settings import RunSettings  # noqa: E402
from arag.index.fingerprint import index_build_fingerprint  # noqa: E402
from arag.llm.scripted import ScriptedBackend  # noqa: E402
from arag.conf_files import conf_path  # noqa: E402
from arag.methods import METHOD_CONF_DIR, method_from_config  # noqa: E402
from arag.tools import ToolContext  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def default_index() -> str:
    """$ARAG_2WIKI_INDEX, else where the README's first command writes the 2Wiki index."""
    return os.environ.get("ARAG_2WIKI_INDEX") or str(REPO / "indexes" / "2wiki")


def script_for(ctx: ToolContext, semantic: bool) -> list[dict]:
    chunk_id = ctx.store.chunk_rows([0], ["chunk_id"])["chunk_id"][0]
    script = [{"tool": "keyword_search", "arguments": {"keywords": ["film", "director"], "top_k": 5}}]
    if semantic:
        script.append({"tool": "semantic_search", "arguments": {"query": "Who directed the film?", "top_k": 5}})
    return script + [{"tool": "chunk_read", "arguments": {"chunk_ids": [chunk_id]}}, {"answer": "Phoolwari"}]


def settings_for(args, script: list[dict], question_set) -> RunSettings:
    conf = yaml.safe_load(conf_path("evaluate.yaml").read_text())
    judge = {k: v for k, v in conf["judge"].items() if k != "model"}
    agent = {k: v for k, v in conf["agent"].items()}
    return RunSettings(
        dataset=question_set.name,
        method=yaml.safe_load((METHOD_CONF_DIR / "arag_full.yaml").read_text()),
        model={"backend": "scripted", "protocol": "json", "model": "scripted", "script": script, "replay": True},
        agent=agent,
        judge=judge,
        judge_model={"backend": "scripted", "protocol": "json", "model": "judge", "script": [{"verdict": "incorrect"}], "replay": True},
        questions_path=str(question_set.path.resolve()),
        questions_sha256=question_set.sha256,
        index_path=str(Path(args.index).resolve()),
        index_build_fingerprint=index_build_fingerprint(args.index),
    )


def line(name: str, n: int, seconds: float, baseline: float | None, extra: str = "") -> None:
    rate = 60 * n / seconds if seconds > 0 else float("inf")
    ratio = f"{rate / baseline:5.2f}x" if baseline else "  1.00x"
    print(f"{name:<44} {n:>5} ep {seconds:8.2f} s {rate:9.0f} ep/min  {ratio}  {extra}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--index", default=default_index())
    p.add_argument("--questions", default=os.path.join(os.environ.get("ARAG_DATA_DIR", str(REPO.parent / "shared" / "data")), "2wikimultihopqa", "questions.jsonl"))
    p.add_argument("--n", type=int, default=300)
    p.add_argument("--workers", default="1,2", help="comma-separated worker counts to measure")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=50)
    p.add_argument("--semantic", action="store_true", help="also call semantic_search (loads the index's embedder in every worker)")
    args = p.parse_args()
    if not (Path(args.index) / "manifest.json").exists():
        sys.exit(f"no index at {args.index}: build one with python -m pipelines.index +corpus=2wikimultihopqa index.path={args.index}")

    question_set = load_questions(args.questions)
    questions = question_set.questions[: args.n]
    ctx = ToolContext(args.index)
    script = script_for(ctx, args.semantic)
    if args.semantic:
        ctx.encode_query("warm up")  # the encoder loads once, outside the timings
    print(f"index {args.index}; {len(questions)} questions; script: {' → '.join(a.get('tool', 'answer') for a in script)}; {os.cpu_count()} CPUs")

    # Baseline: sequential Agent.run in-process, no Ray, no scoring, no writing.
    method = method_from_config(yaml.safe_load((METHOD_CONF_DIR / "arag_full.yaml").read_text()))
    agent = Agent(ScriptedBackend(script, replay=True), method, ctx, protocol="json", config=AgentConfig(max_steps=10, token_budget=None))
    agent.run(questions[0].question, questions[0].id)  # warm caches
    started = time.perf_counter()
    for q in questions:
        ep = agent.run(q.question, q.id)
        assert ep.status == "answered", ep.failure
    base_s = time.perf_counter() - started
    baseline = 60 * len(questions) / base_s
    line("baseline: sequential Agent.run", len(questions), base_s, None)

    settings = settings_for(args, script, question_set)

    # In-process runner: concurrent episodes on one event loop, scoring and judge, no Ray, no writing.
    runner = EpisodeRunner(settings, ctx=ctx)

    async def run_all() -> list:
        gate = asyncio.Semaphore(args.concurrency)

        async def one(q):
            async with gate:
                return await runner.run(q)

        return await asyncio.gather(*(one(q) for q in questions))

    started = time.perf_counter()
    rows = asyncio.run(run_all())
    assert all(r.status == "ok" for r in rows), [r.failure for r in rows if r.status != "ok"][:3]
    line(f"runner: in-process, concurrency {args.concurrency}", len(questions), time.perf_counter() - started, baseline)

    # Full harness: Ray actors + driver + Parquet writing.
    from arag.runtime.cluster import init_ray
    from arag.runtime.evaluate_job import EvalRuntime, run_episodes

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a private local instance
    init_ray(num_cpus=os.cpu_count())
    for workers in [int(w) for w in args.workers.split(",") if w]:
        out = Path(tempfile.mkdtemp(prefix="arag-bench-eval-"))
        stamps: list[float] = []
        try:
            with RunStore(out, settings.run_id) as store:
                runtime = EvalRuntime(workers=workers, concurrency=args.concurrency, worker_cpus=min(1.0, (os.cpu_count() or 1) / workers), batch_size=args.batch_size, spread=False)
                counts = run_episodes(settings, questions, store, runtime, progress=False, on_row=lambda r: stamps.append(time.monotonic()))
                stored = len(store.done_ids())
            assert counts.ok == stored == len(questions), (counts, stored)
            steady = stamps[-1] - stamps[0] if len(stamps) > 1 else counts.wall_s
            line(f"evaluate: {workers} worker(s) x {args.concurrency}, with start-up", len(questions), counts.wall_s, baseline, f"{counts.batches} parts written")
            line(f"evaluate: {workers} worker(s) x {args.concurrency}, steady state", len(questions) - 1, steady, baseline)
        finally:
            shutil.rmtree(out, ignore_errors=True)
    ctx.close()


if __name__ == "__main__":
    main()
