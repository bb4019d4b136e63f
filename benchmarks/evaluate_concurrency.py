"""Does the evaluation keep `runtime.concurrency` episodes in flight? Episodes/min against the ideal for
an endpoint with a fixed reply latency.

    python -m benchmarks.evaluate_concurrency [--latency-s 2] [--points 16x1,64x1,256x1,128x2] [--rounds 3] [--old-caps]

The endpoint (tests/support/model_server.py --latency-s, its own process) answers every request after
`--latency-s` seconds; every episode makes three model calls (keyword_search, chunk_read, answer) on
a keyword-only synthetic index (tests/support/synthetic_index.py, 4,000 chunks), with `model=openai`,
`method=arag_no_semantic` and a scripted judge, through the evaluation's own code (`run_episodes`:
Ray EpisodeWorker actors, the driver loop, Parquet batches). The ideal with N episodes in flight is
N x 60 / (3 x latency) episodes/min. Each point C x W (episodes per worker x workers) runs
`--rounds` x C x W episodes, timed from the endpoint's first request (workers started) to the last
row received. Printed per point: the peak of requests in flight at the endpoint, episodes/min,
the ideal, measured / ideal, the mean `llm_s` per model call (time at the model; the endpoint's
latency when no call waits), and the driver's CPU time per episode (its loop, waits and writes).

`--old-caps` sets `model.max_concurrency=8`, the default before the backend's limit followed
`runtime.concurrency` (8 requests per worker reached the endpoint whatever was asked).

`--in-process` runs each point's C x W episodes on one `EpisodeRunner` in this process instead (what
one worker does, without Ray) and adds the CPU time per episode of this process, which on a shared
machine says more than the rate; `--one-pool` (with it) puts every request on one httpx client, as
before the backend spread its connections over clients of `CONNECTIONS_PER_CLIENT`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from arag.evaluation.questions import load_questions
from arag.evaluation.results import RunStore
from benchmarks.pipeline_config import compose_pipeline
from tests.support.model_server import free_port
from tests.support.synthetic_index import write_register_questions, write_synthetic_index

CALLS_PER_EPISODE = 3
JUDGE = {"backend": "scripted", "protocol": "json", "model": "judge", "script": [{"verdict": "correct"}], "replay": True}


def settings_for(index: Path, questions: Path, base_url: str, old_caps: bool):
    from arag.config.typed import typed_config
    from arag.evaluation.run_config import run_settings

    overrides = ["model=openai", "method=arag_no_semantic", f"model.base_url={base_url}", "model.model=fixed", f"index.path={index}"]
    if old_caps:
        overrides.append("model.max_concurrency=8")
    cfg = compose_pipeline("evaluate", overrides)
    cfg.judge.model = JUDGE
    return run_settings(typed_config(cfg), load_questions(str(questions)))


def stats(base: str, reset: bool = False) -> dict:
    request = urllib.request.Request(base.rsplit("/v1", 1)[0] + ("/stats/reset" if reset else "/stats"), method="POST" if reset else "GET")
    with urllib.request.urlopen(request, timeout=10) as reply:
        return json.loads(reply.read())


def start_endpoint(latency_s: float) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tests.support.model_server", "--port", str(port), "--latency-s", str(latency_s)],
                            cwd=Path(__file__).resolve().parents[1])
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 60
    while True:
        try:
            stats(base)
            return proc, base
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise SystemExit("the stand-in model server did not start")
            time.sleep(0.2)


def measure(settings, questions: list, concurrency: int, workers: int, base: str, latency_s: float) -> dict:
    from arag.runtime.evaluate_job import EvalRuntime, run_episodes

    stats(base, reset=True)
    out = Path(tempfile.mkdtemp(prefix="arag-bench-concurrency-"))
    stamps: list[float] = []
    llm: list[float] = []
    calls = [0]

    def on_row(row: dict) -> None:
        stamps.append(time.time())
        llm.append(row["llm_s"] or 0.0)
        calls[0] += row["model_calls"] or 0

    try:
        with RunStore(out, settings.run_id) as store:
            runtime = EvalRuntime(workers=workers, concurrency=concurrency, worker_cpus=min(1.0, (os.cpu_count() or 1) / workers), batch_size=100, spread=False)
            cpu = time.process_time()
            counts = run_episodes(settings, questions, store, runtime, progress=False, on_row=on_row)
            cpu = time.process_time() - cpu
        seen = stats(base)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    ideal = concurrency * workers * 60 / (CALLS_PER_EPISODE * latency_s)
    rate = 60 * counts.ran / max(1e-9, stamps[-1] - seen["first_at"]) if stamps else 0.0
    return {"ok": counts.ok, "ran": counts.ran, "peak": seen["peak_in_flight"], "per_min": rate, "ideal": ideal, "ratio": rate / ideal, "llm_s_per_call": sum(llm) / max(1, calls[0]), "cpu_ms": 1000 * cpu / max(1, counts.ran)}


def measure_in_process(settings, questions: list, in_flight: int, base: str, latency_s: float) -> dict:
    import asyncio
    import dataclasses

    from arag.evaluation.runner import EpisodeRunner

    settings = dataclasses.replace(settings, model={**settings.model, "max_concurrency": settings.model.get("max_concurrency") or in_flight})
    runner = EpisodeRunner(settings)
    stats(base, reset=True)

    async def run_all() -> list:
        gate = asyncio.Semaphore(in_flight)

        async def one(q):
            async with gate:
                return (await runner.run(q)).to_record()

        return await asyncio.gather(*(one(q) for q in questions))

    cpu = time.process_time()
    try:
        rows = asyncio.run(run_all())
    finally:
        runner.close()
    cpu = time.process_time() - cpu
    seen = stats(base)
    ideal = in_flight * 60 / (CALLS_PER_EPISODE * latency_s)
    rate = 60 * len(rows) / max(1e-9, time.time() - seen["first_at"])
    calls = sum(r["model_calls"] or 0 for r in rows)
    return {
        "ok": sum(r["status"] == "ok" for r in rows), "peak": seen["peak_in_flight"], "per_min": rate, "ideal": ideal, "ratio": rate / ideal,
        "llm_s_per_call": sum(r["llm_s"] or 0.0 for r in rows) / max(1, calls), "cpu_ms": 1000 * cpu / max(1, len(rows)),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--latency-s", type=float, default=2.0)
    p.add_argument("--points", default="16x1,64x1,256x1,128x2", help="C x W pairs: episodes in flight per worker x workers")
    p.add_argument("--rounds", type=int, default=3, help="episodes per slot (rounds of C x W episodes)")
    p.add_argument("--old-caps", action="store_true", help="model.max_concurrency=8, the default before it followed runtime.concurrency")
    p.add_argument("--in-process", action="store_true", help="one EpisodeRunner in this process (C x W in flight), with CPU ms per episode")
    p.add_argument("--one-pool", action="store_true", help="with --in-process: every request on one httpx client (as before)")
    args = p.parse_args()
    if args.one_pool:
        import arag.llm.openai

        arag.llm.openai.CONNECTIONS_PER_CLIENT = 1 << 30
    points = [tuple(int(x) for x in point.split("x")) for point in args.points.split(",") if point]

    work = Path(tempfile.mkdtemp(prefix="arag-bench-concurrency-data-"))
    proc, base = start_endpoint(args.latency_s)
    try:
        index = work / "index"
        write_synthetic_index(index, num_chunks=4000, parts=2, log=lambda *_: None)
        most = max(c * w for c, w in points) * args.rounds
        write_register_questions(work / "questions.jsonl", index, most)
        settings = settings_for(index, work / "questions.jsonl", base, args.old_caps)
        questions = load_questions(str(work / "questions.jsonl")).questions

        if not args.in_process:
            from arag.runtime.cluster import init_ray

            os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a private local instance
            init_ray(num_cpus=os.cpu_count())
        caps = "old caps (model.max_concurrency=8)" if args.old_caps else "current caps"
        where = ("in process, " + ("one httpx client" if args.one_pool else "clients of CONNECTIONS_PER_CLIENT connections")) if args.in_process else "Ray workers"
        print(f"fixed latency {args.latency_s:g} s, {CALLS_PER_EPISODE} model calls per episode, {caps}, {where}, {os.cpu_count()} CPUs", flush=True)
        print(f"{'C x W':>8} {'episodes':>8} {'peak':>5} {'ep/min':>8} {'ideal':>8} {'ratio':>6} {'llm_s/call':>10} " + ("cpu_ms/episode" if args.in_process else "driver_cpu_ms/episode"), flush=True)
        for concurrency, workers in points:
            n = concurrency * workers * args.rounds
            if args.in_process:
                r = measure_in_process(settings, questions[:n], concurrency * workers, base, args.latency_s)
            else:
                r = measure(settings, questions[:n], concurrency, workers, base, args.latency_s)
            assert r["ok"] == n, f"{n - r['ok']} episodes failed"
            line = f"{concurrency:>4} x {workers:<1} {n:>8} {r['peak']:>5} {r['per_min']:>8.0f} {r['ideal']:>8.0f} {r['ratio']:>6.2f} {r['llm_s_per_call']:>10.2f}"
            print(f"{line} {r['cpu_ms']:>14.1f}", flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
