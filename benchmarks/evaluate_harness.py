"""Harness overhead of `pipelines.evaluate`: what Ray costs when the model answers instantly.

    python -m benchmarks.evaluate_harness [--index indexes/2wiki] [--n 300] [--workers 1,2] [--concurrency 8] [--semantic]

The scripted backend replays the same actions for every question (keyword_search, semantic_search
with --semantic, chunk_read of a real chunk, then an answer) with no model latency, and a scripted
judge gives verdicts, so what is measured is the tools, the orchestration, scoring and result writing
alone. In one run, over the first `--n` questions of 2Wiki, for each worker count W in `--workers`:

  * baseline: `EpisodeRunner` in-process on one event loop, W x `--concurrency` episodes in flight,
    scoring and judging every episode and writing its rows to a fresh results folder in Parquet
    batches of `--batch-size`, as the driver does (no Ray);
  * evaluate: `run_episodes` on a local Ray instance with W EpisodeWorker actors of `--concurrency`
    episodes each (the same W x `--concurrency` in flight), the same batches written by the driver.

Both sides run the same questions, script, judge and batch size, each from a freshly opened index
(the baseline opens its own runner before its clock starts, as a worker does before its first
episode; tool caches fill during the run on both sides), so the ratio
(evaluate / baseline episodes per minute) is what the Ray actors, the driver loop and moving rows
between processes cost, or gain from W processes instead of one. The Ray side is printed with its
start-up (actor launch, index opening) against the baseline's whole run, whose tools are open
before its clock starts, and in steady state (first to last finished episode) against the baseline's
own steady state.
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


from arag.evaluation.questions import load_questions
from arag.evaluation.results import RunStore
from arag.evaluation.runner import EpisodeRunner
from arag.evaluation.run_settings import RunSettings
from arag.tools import ToolContext
from benchmarks.pipeline_config import compose_pipeline

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


def settings_for(index: str, script: list[dict], question_set) -> RunSettings:
    """What `pipelines.evaluate` would run for A-RAG Full over this index with the scripted backend
    replaying `script` and a scripted judge: the same config composition and settings code."""
    from arag.config.typed import typed_config
    from arag.evaluation.run_config import run_settings

    cfg = compose_pipeline("evaluate", ["model=scripted", "method=arag_full", "model.replay=true", f"index.path={Path(index).resolve()}"])
    cfg.model.script = script
    cfg.judge.model = {"backend": "scripted", "protocol": "json", "model": "judge", "script": [{"verdict": "incorrect"}], "replay": True}
    return run_settings(typed_config(cfg), question_set)


def line(name: str, n: int, seconds: float, baseline: float | None, extra: str = "") -> None:
    rate = 60 * n / seconds if seconds > 0 else float("inf")
    ratio = f"{rate / baseline:5.2f}x" if baseline else "  1.00x"
    print(f"{name:<50} {n:>5} ep {seconds:8.2f} s {rate:9.0f} ep/min  {ratio}  {extra}", flush=True)


def steady_seconds(stamps: list[float], whole_s: float) -> float:
    """Seconds from the first finished episode to the last (the whole run when only one finished)."""
    return stamps[-1] - stamps[0] if len(stamps) > 1 else whole_s


def run_in_process(settings: RunSettings, questions: list, in_flight: int, batch_size: int) -> tuple[float, float]:
    """A freshly opened in-process runner runs, scores and stores every question, `in_flight` at
    once: (seconds in all, seconds in steady state)."""
    out = Path(tempfile.mkdtemp(prefix="arag-bench-inproc-"))
    runner = EpisodeRunner(settings)
    try:
        with RunStore(out, settings.run_id) as store:
            buffer: list[dict] = []
            stamps: list[float] = []

            async def run_all() -> None:
                gate = asyncio.Semaphore(in_flight)

                async def one(q) -> None:
                    async with gate:
                        row = (await runner.run(q)).to_record()
                    assert row["status"] == "ok", row.get("failure")
                    stamps.append(time.monotonic())
                    buffer.append(row)
                    if len(buffer) >= batch_size:
                        store.write(buffer)
                        buffer.clear()

                await asyncio.gather(*(one(q) for q in questions))

            started = time.perf_counter()
            asyncio.run(run_all())
            if buffer:
                store.write(buffer)
            seconds = time.perf_counter() - started
            assert len(store.done_ids()) == len(questions)
        return seconds, steady_seconds(stamps, seconds)
    finally:
        runner.close()
        shutil.rmtree(out, ignore_errors=True)


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
    with ToolContext(args.index) as ctx:
        script = script_for(ctx, args.semantic)
    print(f"index {args.index}; {len(questions)} questions; script: {' → '.join(a.get('tool', 'answer') for a in script)}; {os.cpu_count()} CPUs")

    settings = settings_for(args.index, script, question_set)

    from arag.runtime.cluster import init_ray
    from arag.runtime.evaluate_job import EvalRuntime, run_episodes

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a private local instance
    init_ray(num_cpus=os.cpu_count())
    for workers in [int(w) for w in args.workers.split(",") if w]:
        in_flight = workers * args.concurrency
        base_s, base_steady_s = run_in_process(settings, questions, in_flight, args.batch_size)
        line(f"baseline: in-process runner, {in_flight} in flight", len(questions), base_s, None)
        line(f"baseline: in-process runner, {in_flight} in flight, steady", len(questions) - 1, base_steady_s, None)
        out = Path(tempfile.mkdtemp(prefix="arag-bench-eval-"))
        stamps: list[float] = []
        try:
            with RunStore(out, settings.run_id) as store:
                runtime = EvalRuntime(workers=workers, concurrency=args.concurrency, worker_cpus=min(1.0, (os.cpu_count() or 1) / workers), batch_size=args.batch_size, spread=False)
                counts = run_episodes(settings, questions, store, runtime, progress=False, on_row=lambda r: stamps.append(time.monotonic()))
                stored = len(store.done_ids())
            assert counts.ok == stored == len(questions), (counts, stored)
            steady = steady_seconds(stamps, counts.wall_s)
            line(f"evaluate: {workers} worker(s) x {args.concurrency}, with start-up", len(questions), counts.wall_s, 60 * len(questions) / base_s, f"{counts.batches} parts written")
            line(f"evaluate: {workers} worker(s) x {args.concurrency}, steady state", len(questions) - 1, steady, 60 * (len(questions) - 1) / base_steady_s)
        finally:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
