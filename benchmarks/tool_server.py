"""Benchmark the tool server: tool calls per second through `pipelines.serve` (HTTP, the JSON API)
against the same calls made in-process through `ToolContext`, and against a server of another
checkout (e.g. the previous commit), at several numbers of concurrent callers.

    python -m benchmarks.tool_server [--index indexes/2wiki] [--questions ../shared/data/2wikimultihopqa/questions.jsonl]
                                     [--questions-n 60] [--concurrency 1,4,16,64] [--repeats 5]
                                     [--baseline-repo /tmp/arag-previous]   # git worktree add --detach /tmp/arag-previous HEAD~1

In one run, over the same calls (built from real 2Wiki questions: for each question a keyword_search
on its capitalised words, a semantic_search on the question, a chunk_read of the top keyword hit):
  * in-process: the calls through one `ToolContext`, from N threads;
  * served: a server process (`python -m pipelines.serve`, HTTP, 16 tool threads, a token) called
    through one pooled httpx client in this process, from N threads (one session per caller, as
    episodes have);
  * baseline (with --baseline-repo): the same server command run from that checkout, side by side
    with the first, called the same way, so the two servers' figures share the machine's state;
  * everything warm (every call made once first); the three are measured in turn (each one first
    in turn), --repeats times at each level, and the median is reported;
  * checks that every served answer's text equals the in-process one;
  * prints calls/s and p50/p95 latency of each, and the ratios served / in-process and served / baseline.
What differs: the served paths add HTTP, JSON and a second process, which shares this machine's
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

from arag.tools import ReadTracker, ToolContext

TOKEN = "benchmark-token"


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


def start_server(repo: Path, index: str) -> tuple[subprocess.Popen, str]:
    """`python -m pipelines.serve` run from `repo`'s code (its own arag package first on the path)."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(repo), "ARAG_SERVE_TOKEN": TOKEN}
    server = subprocess.Popen(
        [sys.executable, "-m", "pipelines.serve", f"index.path={Path(index).resolve()}", f"serve.port={port}", "serve.log_level=warning"],
        cwd=repo, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while True:
        try:
            if httpx.get(f"{url}/index", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=2).status_code == 200:
                return server, url
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline or server.poll() is not None:
            server.terminate()
            raise SystemExit(f"the tool server of {repo} did not start")
        time.sleep(0.3)


def served_caller(url: str, connections: int):
    client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections), timeout=120)

    def call(tool: str, args: dict, tracker: ReadTracker) -> tuple[str, str | None]:
        response = client.post(f"/tools/{tool}", json=args, headers={"X-Session-Id": tracker.session_id})
        body = response.json()
        return body["text"], body["error"]

    return call, client


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", default=os.environ.get("ARAG_2WIKI_INDEX", "indexes/2wiki"))
    parser.add_argument("--questions", default=os.environ.get("ARAG_DATA_DIR", "../shared/data") + "/2wikimultihopqa/questions.jsonl")
    parser.add_argument("--questions-n", type=int, default=60)
    parser.add_argument("--concurrency", default="1,4,16,64")
    parser.add_argument("--repeats", type=int, default=5, help="measurements of each path at each level (the median is shown)")
    parser.add_argument("--baseline-repo", type=Path, default=None, help="another checkout whose server is measured side by side (e.g. a worktree of the previous commit)")
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]

    ctx = ToolContext(args.index)
    calls = build_calls(ctx, Path(args.questions), args.questions_n)
    print(f"index {args.index}: {len(calls)} calls from {args.questions_n} questions; concurrency {levels}; median of {args.repeats}")
    servers = [start_server(REPO, args.index)]
    if args.baseline_repo is not None:
        servers.append(start_server(args.baseline_repo.resolve(), args.index))
    clients = []
    try:
        paths = {"in-process": lambda tool, a, tracker: (lambda r: (r.text, r.error))(ctx.call(tool, a, tracker=tracker))}
        for name, (_, url) in zip(("served", "baseline"), servers):
            call, client = served_caller(url, max(levels))
            paths[name] = call
            clients.append(client)
        for call in paths.values():  # warm: encoder loaded, pages cached
            run(call, calls, 1)
        header = " | ".join(f"{name + ' calls/s':>20} {'p50 ms':>7} {'p95 ms':>7}" for name in paths)
        ratios = "served/in-process" + (" served/baseline" if "baseline" in paths else "")
        print(f"{'callers':>7} | {header} | {ratios}")
        baseline_differ = 0
        for callers in levels:
            seconds: dict[str, list[float]] = {name: [] for name in paths}
            latency: dict[str, list[float]] = {name: [] for name in paths}
            names = list(paths)
            for repeat in range(args.repeats):
                answers = {}
                for name in names[repeat % len(names) :] + names[: repeat % len(names)]:  # each path first in turn
                    elapsed, lat, answers[name] = run(paths[name], calls, callers)
                    seconds[name].append(elapsed)
                    latency[name] += lat
                if answers["served"] != answers["in-process"]:
                    raise SystemExit(f"served answers differ from in-process ones at {callers} callers")
                if "baseline" in answers:
                    differ = sum(a != b for a, b in zip(answers["baseline"], answers["in-process"]))
                    baseline_differ = max(baseline_differ, differ)
            rate = {name: len(calls) / float(np.median(seconds[name])) for name in paths}
            cells = " | ".join(f"{rate[name]:>20.1f} {np.percentile(latency[name], 50) * 1000:>7.1f} {np.percentile(latency[name], 95) * 1000:>7.1f}" for name in paths)
            shown = f"{rate['served'] / rate['in-process']:.2f}x" + (f" {rate['served'] / rate['baseline']:>16.2f}x" if "baseline" in paths else "")
            print(f"{callers:>7} | {cells} | {shown}")
        print("answers: every served answer equals the in-process one")
        if "baseline" in paths:
            print(f"baseline answers: {len(calls) - baseline_differ} of {len(calls)} equal the in-process ones (its checkout's tools may answer otherwise)")
    finally:
        for client in clients:
            client.close()
        for server, _ in servers:
            server.terminate()
            server.wait(timeout=30)
        ctx.close()


if __name__ == "__main__":
    main()
