"""Benchmark the tool server: tool calls per second through `pipelines.serve` (HTTP, `RemoteTools`)
against the same calls made in-process through `ToolContext`, at several numbers of concurrent callers.

    python benchmarks/tool_server.py [--index indexes/2wiki] [--questions ../shared/data/2wikimultihopqa/questions.jsonl]
                                     [--questions-n 60] [--concurrency 1,4,16,64] [--port 0]

In one run, over the same calls (built from real 2Wiki questions: for each question a keyword_search
on its capitalised words, a semantic_search on the question, a chunk_read of the top keyword hit):
  * the baseline: the calls through one in-process `ToolContext`, from N threads;
  * the served path: a server process (`python -m pipelines.serve`, HTTP, 16 tool threads) and one
    `RemoteTools` (pooled connections) in this process, from N threads;
  * both warm (every call made once before timing: encoder loaded, caches and pages warm); each
    caller uses its own read tracker (one server session per caller), as episodes do;
  * checks that every served answer equals the in-process one;
  * prints calls/s and p50/p95 latency of each, and the ratio served / in-process.
What differs: the served path adds HTTP, JSON and a second process, which shares this machine's
cores with the client (the in-process baseline has no client).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from arag.service.client import RemoteTools  # noqa: E402
from arag.tools import ReadTracker, ToolContext  # noqa: E402


def build_calls(ctx: ToolContext, questions_path: Path, n: int) -> list[tuple[str, dict]]:
    calls = []
    with open(questions_path) as f:
        for line in list(f)[:n]:
            question = json.loads(line)["question"]
            words = re.findall(r"\b[A-Z][\w'-]+", question)[1:4] or question.split()[:2]
            keyword = {"keywords": words, "top_k": 5}
            calls.append(("keyword_search", keyword))
            calls.append(("semantic_search", {"query": question, "top_k": 5}))
            hits = ctx.call("keyword_search", keyword).results
            if hits:
                calls.append(("chunk_read", {"chunk_ids": [hits[0].chunk_id]}))
    return calls


def run(call_fn, calls: list[tuple[str, dict]], callers: int) -> tuple[float, list[float], list]:
    """All calls spread over `callers` threads (caller i makes calls i, i+callers, ...)."""
    latencies: list[float] = [0.0] * len(calls)
    answers: list = [None] * len(calls)

    def caller(i: int) -> None:
        tracker = ReadTracker()
        for j in range(i, len(calls), callers):
            started = time.perf_counter()
            answers[j] = call_fn(calls[j][0], calls[j][1], tracker)
            latencies[j] = time.perf_counter() - started

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=callers) as pool:
        list(pool.map(caller, range(callers)))
    return time.perf_counter() - started, latencies, answers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", default=os.environ.get("ARAG_2WIKI_INDEX", "indexes/2wiki"))
    parser.add_argument("--questions", default=os.environ.get("ARAG_DATA_DIR", "../shared/data") + "/2wikimultihopqa/questions.jsonl")
    parser.add_argument("--questions-n", type=int, default=60)
    parser.add_argument("--concurrency", default="1,4,16,64")
    parser.add_argument("--port", type=int, default=0, help="0: a free port")
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]

    ctx = ToolContext(args.index)
    calls = build_calls(ctx, Path(args.questions), args.questions_n)
    print(f"index {args.index}: {len(calls)} calls from {args.questions_n} questions; concurrency {levels}")
    port = args.port or free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    server = subprocess.Popen(
        [sys.executable, "-m", "pipelines.serve", f"index.path={args.index}", f"serve.port={port}", "serve.log_level=warning"],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/index", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("the tool server did not start")
                time.sleep(0.3)
        remote = RemoteTools(f"http://127.0.0.1:{port}", max_connections=max(levels))
        local_call = lambda tool, a, tracker: ctx.call(tool, a, tracker=tracker)  # noqa: E731
        remote_call = lambda tool, a, tracker: remote.call(tool, a, tracker=tracker)  # noqa: E731
        run(local_call, calls, 1)  # warm both: encoder loaded, pages cached
        run(remote_call, calls, 1)
        print(f"{'callers':>7} | {'in-process calls/s':>18} {'p50 ms':>7} {'p95 ms':>7} | {'served calls/s':>14} {'p50 ms':>7} {'p95 ms':>7} | served/in-process")
        for callers in levels:
            local_s, local_lat, local_answers = run(local_call, calls, callers)
            served_s, served_lat, served_answers = run(remote_call, calls, callers)
            same = all(a.text == b.text and a.error == b.error for a, b in zip(local_answers, served_answers))
            if not same:
                raise SystemExit(f"served answers differ from in-process ones at {callers} callers")
            lp50, lp95 = np.percentile(local_lat, [50, 95]) * 1000
            sp50, sp95 = np.percentile(served_lat, [50, 95]) * 1000
            print(f"{callers:>7} | {len(calls) / local_s:>18.1f} {lp50:>7.1f} {lp95:>7.1f} | {len(calls) / served_s:>14.1f} {sp50:>7.1f} {sp95:>7.1f} | {local_s / served_s:.2f}x")
        print("answers: every served answer equals the in-process one")
        remote.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
        ctx.close()


if __name__ == "__main__":
    main()
