"""Probe the tool server as hostile or careless clients on the same machine would (issue 52), and
say what an authorised victim client got during each probe; then the server's memory (RSS) across
a mixed load. Run against the servers of several checkouts in turn (e.g. the commit before), the
same probes and load, alternating:

    python -m benchmarks.serve_probes --index indexes/2wiki --repos ../serve-base,. [--rounds 2] [--rss-s 120]
    # git worktree add --detach ../serve-base <commit>

Each server: `python -m pipelines.serve` from that checkout on 127.0.0.1, with a token,
serve.max_connections=8, serve.max_waiting_connections=32, serve.stream_idle_s=2, 4 tool threads.
The victim calls keyword_search from 127.0.0.3; attackers and the flood connect from 127.0.0.2
(the server counts clients by address). Probes:
  stalled bodies      8 connections with the token send headers and part of a body
  stalled, open       the same on a serve.token=none server, 16 connections
  idle keep-alive     40 connections with the token, each pinging /health every second
  idle MCP streams    8 MCP sessions holding GET /mcp, reopened 1 s after each ends (as the SDK does)
  flood               32 threads calling semantic_search back to back
  300 kB body         one call with a 300 kB body (under a 400 kB serve.max_request_bytes)
  clients leaving     20 calls whose client gives up after 20 ms: traceback lines in the log
  stop                a call running (held 3 s: tests.serve.slow_server) and 10 MCP and 9 JSON API
                      calls queued on one tool thread, SIGTERM, then 20 requests on new connections
  stream close        seconds until an idle GET /mcp stream ends (serve.stream_idle_s=2)
Figures: the victim's statuses and p50/p95 latency (ms) during each probe; for the stop, how many
MCP calls got a JSON-RPC answer, JSON calls an answer, and late requests a 503 (vs a refused or
reset connection); the RSS (MiB) of the server at the start, peak and end of --rss-s seconds of
mixed load (victim, flood, streams, stalls, leaving clients together).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Iterator

import httpx
import numpy as np
import psutil

from tests.support.processes import stop_process

TOKEN = "probe-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MCP_HEADERS = {**AUTH, "Accept": "application/json, text/event-stream"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "0"}}}
ATTACKER, VICTIM = "127.0.0.2", "127.0.0.3"
SETTINGS = ["serve.max_connections=8", "serve.max_waiting_connections=32", "serve.stream_idle_s=2", "serve.threads=4", "serve.max_request_bytes=400000", "serve.header_timeout_s=30", "serve.body_timeout_s=30"]
VICTIM_CALL = {"keywords": ["Lothair", "mother"], "top_k": 3}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, repo: Path, index: str, log: Path, *extra: str, module: str = "pipelines.serve", env_extra: dict[str, str] | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        open_server = "serve.token=none" in extra
        env = {**os.environ, "PYTHONPATH": str(repo), "HF_HUB_OFFLINE": "1", **(env_extra or {})}
        env.pop("ARAG_SERVE_TOKEN", None)
        if not open_server:
            env["ARAG_SERVE_TOKEN"] = TOKEN
        with open(log, "wb") as out:
            settings = {o.split("=")[0]: o for o in [*SETTINGS, *extra]}  # extra ones replace the defaults
            self.process = subprocess.Popen([sys.executable, "-m", module, f"index.path={Path(index).resolve()}", f"serve.port={self.port}", "serve.log_level=warning", *settings.values()], cwd=repo, env=env, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 300
        while True:
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.stop()
                raise SystemExit(f"the server of {repo} did not start:\n{log.read_text()[-2000:]}")
            time.sleep(0.3)

    def rss_mib(self) -> float:
        return psutil.Process(self.process.pid).memory_info().rss / 2**20

    def stop(self) -> None:
        stop_process(self.process)


def client(source: str, **kwargs) -> httpx.Client:
    return httpx.Client(transport=httpx.HTTPTransport(local_address=source), timeout=60, **kwargs)


REFUSALS: Counter = Counter()  # the error texts of the victim's refused calls


def victim_calls(server: Server, n: int, headers: dict | None = None) -> tuple[Counter, list[float]]:
    """n calls in turn, each on a new connection: their statuses and latencies (s)."""
    statuses: Counter = Counter()
    latencies = []
    for _ in range(n):
        started = time.perf_counter()
        try:
            with client(VICTIM) as c:
                response = c.post(f"{server.url}/tools/keyword_search", json=VICTIM_CALL, headers=AUTH if headers is None else headers)
                statuses[response.status_code] += 1
                if response.status_code != 200:
                    REFUSALS[response.text[:120]] += 1
        except httpx.HTTPError as exc:
            statuses[type(exc).__name__] += 1
        latencies.append(time.perf_counter() - started)
    return statuses, latencies


def summary(statuses: Counter, latencies: list[float]) -> str:
    shown = " ".join(f"{count}x{status}" for status, count in sorted(statuses.items(), key=str))
    return f"{shown}; p50 {np.percentile(latencies, 50) * 1000:.0f} ms, p95 {np.percentile(latencies, 95) * 1000:.0f} ms"


def stalled_bodies(server: Server, n: int, token: bool = True) -> list[socket.socket]:
    conns = []
    for _ in range(n):
        conn = socket.create_connection(("127.0.0.1", server.port), timeout=60, source_address=(ATTACKER, 0))
        auth = f"Authorization: Bearer {TOKEN}\r\n" if token else ""
        conn.sendall(f"POST /tools/keyword_search HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"keywo".encode())
        conns.append(conn)
    time.sleep(0.5)  # the server reads them
    return conns


class Background:
    """Threads running `work(stop_event)` until stopped."""

    def __init__(self, work, n: int):
        self.stopped = threading.Event()
        self.threads = [threading.Thread(target=work, args=(self.stopped,), daemon=True) for _ in range(n)]
        for thread in self.threads:
            thread.start()
        time.sleep(1.0)  # the load is on

    def stop(self) -> None:
        self.stopped.set()
        for thread in self.threads:
            thread.join(60)


def idle_keepalive(server: Server):
    def work(stopped: threading.Event) -> None:
        with client(ATTACKER) as c:
            try:
                c.get(f"{server.url}/tools", headers=AUTH)
                while not stopped.wait(1.0):
                    c.get(f"{server.url}/health")
            except httpx.HTTPError:
                pass

    return work


def mcp_streams(server: Server):
    def work(stopped: threading.Event) -> None:
        with client(ATTACKER) as c:
            try:
                session = None
                while session is None and not stopped.is_set():
                    session = c.post(f"{server.url}/mcp", json=INITIALIZE, headers=MCP_HEADERS).headers.get("mcp-session-id")
                    if session is None:
                        stopped.wait(1.0)
                if session is None:
                    return
                c.post(f"{server.url}/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers={**MCP_HEADERS, "mcp-session-id": session})
                while not stopped.is_set():
                    with c.stream("GET", f"{server.url}/mcp", headers={**MCP_HEADERS, "mcp-session-id": session}) as stream:
                        for _ in stream.iter_bytes():
                            if stopped.is_set():
                                break
                    stopped.wait(1.0)  # the SDK reopens its stream about a second after it ends
            except httpx.HTTPError:
                pass

    return work


def flood(server: Server, questions: list[str]):
    def work(stopped: threading.Event) -> None:
        with client(ATTACKER) as c:
            i = 0
            while not stopped.is_set():
                try:
                    c.post(f"{server.url}/tools/semantic_search", json={"query": questions[i % len(questions)], "top_k": 5}, headers=AUTH)
                except httpx.HTTPError:
                    pass
                i += 1

    return work


def leaving(server: Server):
    def work(stopped: threading.Event) -> None:
        with client(ATTACKER, ) as c:
            while not stopped.is_set():
                try:
                    c.post(f"{server.url}/tools/semantic_search", json={"query": "who directed the film", "top_k": 5}, headers=AUTH, timeout=0.02)
                except httpx.HTTPError:
                    pass

    return work


def traceback_lines(server: Server) -> int:
    return sum(1 for line in server.log.read_text(errors="replace").splitlines() if line.startswith("Traceback") or "Error:" in line)


def body_probe(server: Server) -> str:
    body = json.dumps(VICTIM_CALL).encode()
    body += b" " * (300_000 - len(body))
    with socket.create_connection(("127.0.0.1", server.port), timeout=60, source_address=(VICTIM, 0)) as conn:
        conn.sendall(f"POST /tools/keyword_search HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
        data = b""
        try:
            while chunk := conn.recv(65536):
                data += chunk
        except ConnectionResetError:
            return f"{status_line(data) or 'nothing'}, then the connection reset"
    return status_line(data)


def status_line(data: bytes) -> str:
    return data.split(b"\r\n", 1)[0].decode()


def stream_close_s(server: Server) -> float:
    with client(VICTIM) as c:
        session = c.post(f"{server.url}/mcp", json=INITIALIZE, headers=MCP_HEADERS).headers["mcp-session-id"]
        started = time.perf_counter()
        with c.stream("GET", f"{server.url}/mcp", headers={**MCP_HEADERS, "mcp-session-id": session}) as stream:
            for _ in stream.iter_bytes():
                pass
        return time.perf_counter() - started


def mcp_call(server: Server, session: str, call_id: int, arguments: dict) -> str:
    """'answer' (a JSON-RPC result or error came back), 'no answer' (the stream ended without one), or the failure."""
    try:
        with client(VICTIM) as c:
            response = c.post(f"{server.url}/mcp", json={"jsonrpc": "2.0", "id": call_id, "method": "tools/call", "params": {"name": "keyword_search", "arguments": arguments}}, headers={**MCP_HEADERS, "mcp-session-id": session})
    except httpx.HTTPError as exc:
        return type(exc).__name__
    if response.status_code != 200:
        return f"status {response.status_code}"
    messages = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:") and line[5:].strip()] if "event-stream" in response.headers.get("content-type", "") else [response.json()]
    return "answer" if any(m.get("id") == call_id for m in messages) else "no answer"


def stop_probe(repo: Path, index: str, logs: Path) -> str:
    """One tool thread running a call held 3 s (tests.serve.slow_server), 10 MCP and 10 JSON API
    calls queued behind it, SIGTERM, then 20 requests on new connections."""
    server = Server(repo, index, logs / "stop.log", "serve.threads=1", module="tests.serve.slow_server", env_extra={"ARAG_TEST_SLOW_S": "3"})
    with client(VICTIM) as c:
        session = c.post(f"{server.url}/mcp", json=INITIALIZE, headers=MCP_HEADERS).headers["mcp-session-id"]
        c.post(f"{server.url}/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers={**MCP_HEADERS, "mcp-session-id": session})
    mcp: list[str] = []
    api: list[str] = []

    def api_call(word: str) -> None:
        try:
            with client(VICTIM) as c:
                api.append(str(c.post(f"{server.url}/tools/keyword_search", json={"keywords": ["Lothair", word]}, headers=AUTH).status_code))
        except httpx.HTTPError as exc:
            api.append(type(exc).__name__)

    first = threading.Thread(target=api_call, args=("slow",))
    first.start()
    time.sleep(1.0)  # it runs
    threads = [threading.Thread(target=lambda i=i: mcp.append(mcp_call(server, session, 10 + i, {"keywords": ["Lothair"]}))) for i in range(10)]
    threads += [threading.Thread(target=api_call, args=("queued",)) for _ in range(9)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)  # they queue
    server.process.send_signal(signal.SIGTERM)
    late: Counter = Counter()
    for _ in range(20):
        try:
            with client(VICTIM) as c:
                late[str(c.get(f"{server.url}/tools", headers=AUTH).status_code)] += 1
        except httpx.HTTPError as exc:
            late[type(exc).__name__] += 1
    for thread in [first, *threads]:
        thread.join(60)
    server.stop()
    shown = lambda counts: " ".join(f"{n}x{what}" for what, n in sorted(Counter(counts).items()))
    return f"MCP calls: {shown(mcp)}; JSON calls: {shown(api)}; late requests: {shown(late.elements())}"


def probes(repo: Path, index: str, logs: Path, questions: list[str]) -> Iterator[tuple[str, str]]:
    server = Server(repo, index, logs / "server.log")
    try:
        yield ("no attack", summary(*victim_calls(server, 10)))
        conns = stalled_bodies(server, 8)
        yield ("stalled bodies (8, token)", summary(*victim_calls(server, 10)))
        for conn in conns:
            conn.close()
        load = Background(idle_keepalive(server), 40)
        yield ("idle keep-alive (40, /health pings)", summary(*victim_calls(server, 10)))
        load.stop()
        load = Background(mcp_streams(server), 8)
        yield ("idle MCP streams (8 sessions)", summary(*victim_calls(server, 54)))
        load.stop()
        load = Background(flood(server, questions), 32)
        yield ("flood (32 semantic_search callers)", summary(*victim_calls(server, 20)))
        load.stop()
        yield ("300 kB body", body_probe(server))
        before = traceback_lines(server)
        load = Background(leaving(server), 4)
        time.sleep(5)
        load.stop()
        yield ("clients leaving mid-call (5 s)", f"{traceback_lines(server) - before} traceback/error lines in the log")
        yield ("idle GET /mcp stream (stream_idle_s=2)", f"ended after {stream_close_s(server):.1f} s")
    finally:
        server.stop()
    server = Server(repo, index, logs / "open.log", "serve.token=none")
    try:
        conns = stalled_bodies(server, 16, token=False)
        yield ("stalled bodies (16, token=none)", summary(*victim_calls(server, 10, headers={})))
        for conn in conns:
            conn.close()
    finally:
        server.stop()
    yield ("SIGTERM with calls in flight", stop_probe(repo, index, logs))


def rss_under_load(repo: Path, index: str, logs: Path, questions: list[str], seconds: float) -> str:
    server = Server(repo, index, logs / "rss.log")
    try:
        start = server.rss_mib()
        loads = [Background(flood(server, questions), 8), Background(mcp_streams(server), 4), Background(idle_keepalive(server), 8), Background(leaving(server), 2)]
        samples = [start]
        victim: list[float] = []
        statuses: Counter = Counter()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            conns = stalled_bodies(server, 4)
            got, lat = victim_calls(server, 3)
            statuses.update(got)
            victim += lat
            for conn in conns:
                conn.close()
            samples.append(server.rss_mib())
        for load in loads:
            load.stop()
        samples.append(server.rss_mib())
        return f"RSS {start:.0f} MiB at start, {max(samples):.0f} peak, {samples[-1]:.0f} at the end; victim {summary(statuses, victim)}"
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", default=os.environ.get("ARAG_2WIKI_INDEX", "indexes/2wiki"))
    parser.add_argument("--questions", default=os.environ.get("ARAG_DATA_DIR", "../shared/data") + "/2wikimultihopqa/questions.jsonl")
    parser.add_argument("--repos", default=".", help="checkouts whose servers are probed, comma-separated, in turn")
    parser.add_argument("--rounds", type=int, default=1, help="times each checkout is probed (alternating)")
    parser.add_argument("--rss-s", type=float, default=120.0, help="seconds of mixed load for the RSS figure (0: none)")
    parser.add_argument("--logs", type=Path, default=Path("/tmp/serve-probes"))
    args = parser.parse_args()
    with open(args.questions) as f:
        questions = [json.loads(line)["question"] for line in list(f)[:200]]
    repos = [Path(r).resolve() for r in args.repos.split(",")]
    for round_ in range(args.rounds):
        for repo in repos:
            commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
            dirty = " (with uncommitted changes)" if subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo, capture_output=True, text=True).stdout.strip() else ""
            logs = args.logs / f"{re.sub(r'[^A-Za-z0-9]', '_', str(repo))}-{round_}"
            logs.mkdir(parents=True, exist_ok=True)
            print(f"\n== {repo} at {commit}{dirty}, round {round_ + 1}", flush=True)
            for name, outcome in probes(repo, args.index, logs, questions):
                print(f"{name:<40} {outcome}", flush=True)
            if args.rss_s > 0:
                print(f"{'mixed load, ' + format(args.rss_s, 'g') + ' s':<40} {rss_under_load(repo, args.index, logs, questions, args.rss_s)}", flush=True)
            for text, count in REFUSALS.most_common(5):
                print(f"  victim refused {count}x: {text}")
            REFUSALS.clear()


if __name__ == "__main__":
    main()
