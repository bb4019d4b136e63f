"""Tool calls per second on ONE ToolContext as the number of concurrent callers grows.

    python -m benchmarks.tools_concurrency [--index ../main/indexes/2wiki] [--big /tmp/.../synthetic-1000000-7-wiki]
        [--callers 1 2 4 16 64 256] [--calls 600] [--rounds 1] [--per-tool] [--small-sorted] [--workers N] [--cache-dir /tmp/arag-keyword/tools-cache] [--read-gap N]

The calls are a fixed mix drawn from real 2Wiki questions (../shared/data/2wikimultihopqa):
keyword_search on the entities of a question's evidence, semantic_search on the question text,
chunk_read of chunk ids the keyword search returned; the same list for every caller count. Each
caller takes the next call from the shared list until all are done; callers are threads, or
asyncio tasks awaiting `ToolContext.acall` (the context's own bounded thread pool).
Printed per caller count: calls/s and the ratio to one caller (the baseline, same run, same calls;
with --rounds, the median of each round's ratio to that round's own baseline, and its range),
p50/p95 latency of a call, and how many query encodings were batched together. Every answer is
checked against the same call made alone (one caller).

`--big` adds an index without vectors (benchmarks/keyword_search.py --keep leaves a 1M-chunk one):
there the mix is keyword_search and chunk_read only (what differs: no semantic calls).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import psutil

REPO = Path(__file__).resolve().parents[1]

from arag.index.keyword import part_cache
from arag.tools import ReadTracker, ToolContext
from arag.tools.hosting.worker_pool import ToolWorkerPool

QUESTIONS = REPO.parent / "shared" / "data" / "2wikimultihopqa" / "questions.jsonl"


def make_calls(ctx: ToolContext, n: int, semantic: bool, seed: int = 0) -> list[tuple[str, dict]]:
    rows = [json.loads(line) for line in QUESTIONS.read_text().splitlines()]
    random.Random(seed).shuffle(rows)
    calls: list[tuple[str, dict]] = []
    for q in rows:
        if len(calls) >= n:
            break
        ents = list(dict.fromkeys(e for t in q.get("evidence", []) for e in (t[0], t[2]) if isinstance(e, str) and 3 <= len(e) <= 60))
        if not ents:
            continue
        kw = ("keyword_search", {"keywords": ents[:2], "top_k": 5})
        calls.append(kw)
        if semantic:
            calls.append(("semantic_search", {"query": q["question"], "top_k": 5}))
        ids = [h.chunk_id for h in ctx.call(*kw).results[:2]]
        if ids:
            calls.append(("chunk_read", {"chunk_ids": ids}))
    return calls[:n]


def one(ctx: ToolContext, call: tuple[str, dict]) -> tuple[str, float]:
    t = time.perf_counter()
    r = ctx.call(call[0], call[1], tracker=ReadTracker())
    return r.text, time.perf_counter() - t


def run_threads(ctx: ToolContext, calls: list, callers: int) -> tuple[float, list[float], list[str]]:
    texts: list[str] = [""] * len(calls)
    lat: list[float] = [0.0] * len(calls)
    counter = itertools.count()

    def worker() -> None:
        while (i := next(counter)) < len(calls):
            texts[i], lat[i] = one(ctx, calls[i])

    t = time.perf_counter()
    with ThreadPoolExecutor(max_workers=callers) as pool:
        for f in [pool.submit(worker) for _ in range(callers)]:
            f.result()
    return time.perf_counter() - t, lat, texts


def run_asyncio(ctx: ToolContext, calls: list, callers: int) -> tuple[float, list[float], list[str]]:
    texts: list[str] = [""] * len(calls)
    lat: list[float] = [0.0] * len(calls)
    counter = itertools.count()

    async def worker() -> None:
        while (i := next(counter)) < len(calls):
            t = time.perf_counter()
            r = await ctx.acall(calls[i][0], calls[i][1], tracker=ReadTracker())
            texts[i], lat[i] = r.text, time.perf_counter() - t

    async def main() -> float:
        t = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(callers)))
        return time.perf_counter() - t

    wall = asyncio.run(main())
    return wall, lat, texts


def machine_ceiling(seconds: float = 1.0) -> float:
    """Speed-up of 2 threads over 1 on GIL-free work (hashing) right now: what 2 callers could
    reach at best on this machine at this moment (other processes take cores too)."""
    import hashlib

    data = os.urandom(1 << 22)

    def work(n: int) -> None:
        for _ in range(n):
            hashlib.sha256(data).digest()  # releases the GIL

    t = time.perf_counter()
    n = 0
    while time.perf_counter() - t < seconds / 2:
        work(4)
        n += 4
    one = time.perf_counter() - t
    t = time.perf_counter()
    threads = [threading.Thread(target=work, args=(n,)) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return 2 * one / (time.perf_counter() - t)


def bench(name: str, ctx, calls: list, callers_list: list[int], rounds: int = 1, in_process: ToolContext | None = None) -> None:
    """ctx: a ToolContext, or a ToolWorkerPool (then `in_process` is the same index's ToolContext:
    the answers are checked against its calls made alone, and each round also times one caller of
    it, the "vs 1 in-process" column)."""
    kinds = {k: sum(1 for c in calls if c[0] == k) for k in dict.fromkeys(c[0] for c in calls)}
    print(f"\n== {name}: {len(calls)} calls ({', '.join(f'{v} {k}' for k, v in kinds.items())})")
    for c in calls[:20]:  # warm-up: model loaded, shards and cache pages in
        one(ctx, c)
    if in_process is not None:  # every worker of the pool warmed over the whole list, as in_process was
        for _ in range(2):
            run_threads(ctx, calls, ctx.workers)
    expected = [one(in_process or ctx, c)[0] for c in calls]  # answers made one at a time, in-process
    print(f"machine ceiling now: 2 threads of GIL-free work run {machine_ceiling():.2f}x one thread (other processes share the cores)")
    if rounds > 1:
        print(
            f"{rounds} rounds, each over every caller count in turn; calls/s: the median over rounds; vs 1: the median over rounds "
            "of the ratio to the same round's first caller count (rounds: its lowest and highest); latencies pooled"
        )
    batcher = getattr(ctx, "_batcher", None)  # a worker pool's encodings happen in its workers
    head = f"{'mode':<8}{'callers':>8}{'calls/s':>10}{'vs 1':>8}{'rounds':>12}{'p50 ms':>9}{'p95 ms':>9}{'encodings':>12}{'same':>12}"
    print(head + (f"{'vs 1 in-process':>17}" if in_process is not None else ""))
    for mode, fn in (("threads", run_threads), ("asyncio", run_asyncio)):
        rates: dict[int, list[float]] = {c: [] for c in callers_list}
        lats: dict[int, list[float]] = {c: [] for c in callers_list}
        encoded: dict[int, list[int]] = {c: [0, 0] for c in callers_list}
        same: dict[int, int] = {c: 0 for c in callers_list}
        own_one: list[float] = []  # in_process's one caller, each round
        for _ in range(rounds):
            if in_process is not None:
                own_one.append(len(calls) / fn(in_process, calls, 1)[0])
            for callers in callers_list:
                b0, q0 = (batcher.batches, batcher.queries) if batcher else (0, 0)
                wall, lat, texts = fn(ctx, calls, callers)
                rates[callers].append(len(calls) / wall)
                lats[callers] += lat
                same[callers] += sum(a == b for a, b in zip(texts, expected))
                if batcher:
                    encoded[callers][0] += batcher.queries - q0
                    encoded[callers][1] += batcher.batches - b0
        for callers in callers_list:
            rate = float(np.median(rates[callers]))
            # Each round's ratio to the same round's first caller count, measured moments before:
            # the machine's slow drift (other tenants) cancels, which a ratio of medians keeps.
            paired = np.asarray(rates[callers]) / np.asarray(rates[callers_list[0]])
            queries, batches = encoded[callers]
            p50, p95 = np.percentile(np.asarray(lats[callers]) * 1000, [50, 95])
            enc = f"{queries}/{batches}" if batches else "-"
            spread = f"{paired.min():.2f}-{paired.max():.2f}" if rounds > 1 else "-"
            against_own = f"{float(np.median(np.asarray(rates[callers]) / np.asarray(own_one))):>16.2f}x" if own_one else ""
            print(
                f"{mode:<8}{callers:>8}{rate:>10.1f}{float(np.median(paired)):>7.2f}x{spread:>12}{p50:>9.1f}{p95:>9.1f}{enc:>12}{f'{same[callers]}/{rounds * len(calls)}':>12}{against_own}",
                flush=True,
            )
    print(f"machine ceiling after: {machine_ceiling():.2f}x")
    print("encodings: queries encoded / encoder calls (micro-batching); same: answers identical to the calls made alone")
    if in_process is not None:
        print("vs 1 in-process: calls/s against one caller of an in-process ToolContext over the same calls, timed in the same round")
        mib = lambda b: f"{b / 2**20:,.0f} MiB"  # noqa: E731
        for pid in ctx.pids():  # USS: pages only this worker holds (the index maps are shared through the page cache)
            info = psutil.Process(pid).memory_full_info()
            print(f"worker {pid}: RSS {mib(info.rss)}, USS {mib(info.uss)}")
        info = psutil.Process().memory_full_info()
        print(f"this process (the in-process ToolContext and the callers): RSS {mib(info.rss)}, USS {mib(info.uss)}")


def bench_per_tool(ctx: ToolContext, calls: list, rounds: int) -> None:
    """Each tool's own calls (twice over, for longer runs) on 1 thread and on 2: which tool keeps
    two callers from doubling. Best of `rounds` for each, alternating 1 and 2 threads."""
    print("\nper tool, threads: best calls/s of each tool's own calls over the rounds")
    print(f"{'tool':<18}{'1 thread':>10}{'2 threads':>11}{'vs 1':>8}")
    for tool in dict.fromkeys(c[0] for c in calls):
        own = [c for c in calls if c[0] == tool] * 2
        rates: dict[int, list[float]] = {1: [], 2: []}
        for _ in range(max(1, rounds)):
            for callers in (1, 2):
                rates[callers].append(len(own) / run_threads(ctx, own, callers)[0])
        one_rate, two_rate = max(rates[1]), max(rates[2])
        print(f"{tool:<18}{one_rate:>10.1f}{two_rate:>11.1f}{two_rate / one_rate:>7.2f}x", flush=True)


def bench_small_sorted(ctx: ToolContext, calls: list, rounds: int) -> None:
    """The same calls with arag.small_sorted's GIL-holding look-ups and with numpy's for every
    size (SMALL = 0), alternated round by round in this process: 1 and 2 threads, medians."""
    import arag.small_sorted as small_sorted

    kept = small_sorted.SMALL
    print("\nsmall look-ups: arag.small_sorted (SMALL = %d) against numpy's for every size (SMALL = 0), threads, medians over rounds" % kept)
    print(f"{'calls':<16}{'look-ups':<14}{'1 thread':>10}{'2 threads':>11}{'2 vs 1':>8}")
    try:
        for tool in ["mix", *dict.fromkeys(c[0] for c in calls)]:
            own = calls if tool == "mix" else [c for c in calls if c[0] == tool] * 2
            rates: dict[int, list[tuple[float, float]]] = {kept: [], 0: []}
            for _ in range(max(1, rounds)):
                for small in (kept, 0):
                    small_sorted.SMALL = small
                    rates[small].append((len(own) / run_threads(ctx, own, 1)[0], len(own) / run_threads(ctx, own, 2)[0]))
            for small, pairs in rates.items():
                a = np.asarray(pairs)
                print(f"{tool:<16}{'small_sorted' if small else 'numpy':<14}{np.median(a[:, 0]):>10.1f}{np.median(a[:, 1]):>11.1f}{np.median(a[:, 1] / a[:, 0]):>7.2f}x", flush=True)
    finally:
        small_sorted.SMALL = kept


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", default=str(REPO / "indexes" / "2wiki"))
    ap.add_argument("--big", default=None, help="a large index without vectors (keyword and chunk_read only)")
    ap.add_argument("--callers", type=int, nargs="+", default=[1, 2, 4, 16, 64, 256])
    ap.add_argument("--calls", type=int, default=600)
    ap.add_argument("--rounds", type=int, default=1, help="repeat the sweep; calls/s is the median over rounds (steadier on a shared machine)")
    ap.add_argument("--per-tool", action="store_true", help="also each tool's own calls on 1 and 2 threads")
    ap.add_argument("--small-sorted", action="store_true", help="also the calls with arag.small_sorted against numpy's look-ups, alternated in this run")
    ap.add_argument("--cache-dir", default=None, help="where the 2Wiki index's tools caches are (default: inside the index)")
    ap.add_argument("--big-cache-dir", default=None, help="where the large index's tools caches are (built there if missing; default: inside the index)")
    ap.add_argument("--workers", type=int, default=0, help="also the sweep through a ToolWorkerPool of this many worker processes")
    ap.add_argument("--read-gap", type=int, default=None, help="bytes between candidates' texts read in one pread (default: arag.index.keyword.part_cache.READ_GAP)")
    args = ap.parse_args()
    if args.workers < 0:
        ap.error(f"--workers must be 0 (none) or more, got {args.workers}")
    if args.read_gap is not None:
        if args.workers:
            ap.error("--read-gap sets this process's READ_GAP, not the worker processes': leave one out")
        if args.read_gap < 0:
            ap.error(f"--read-gap must be 0 or more bytes, got {args.read_gap}")
        part_cache.READ_GAP = args.read_gap
    print(f"keyword candidate reads: READ_GAP {part_cache.READ_GAP} bytes")
    print(f"machine: {os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB RAM")
    for name, path, semantic in (("2Wiki", args.index, True), ("large index", args.big, False)):
        if not path:
            continue
        if not (Path(path) / "manifest.json").exists():
            print(f"\n(no index at {path}: skipped)")
            continue
        cache_dir = args.cache_dir if semantic else args.big_cache_dir
        cache = Path(cache_dir) if cache_dir else None
        with ToolContext(path, cache_dir=cache) as ctx:
            calls = make_calls(ctx, args.calls, semantic)
            bench(f"{name} {path} ({ctx.store.num_chunks:,} chunks)", ctx, calls, args.callers, args.rounds)
            if args.per_tool:
                bench_per_tool(ctx, calls, args.rounds)
            if args.small_sorted:
                bench_small_sorted(ctx, calls, args.rounds)
            if args.workers:
                with ToolWorkerPool(path, workers=args.workers, **({"cache_dir": cache} if cache else {})) as pool:
                    bench(f"{name} {path}: ToolWorkerPool, {args.workers} worker processes", pool, calls, args.callers, args.rounds, in_process=ctx)


if __name__ == "__main__":
    main()
