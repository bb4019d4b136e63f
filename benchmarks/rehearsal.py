"""The whole mission as one job, rehearsed on this machine against a simulated GPU model server
(issue 34): generate a corpus -> `pipelines.index` -> `pipelines.serve` -> `pipelines.evaluate` with
thousands of episodes in flight -> a Hydra multirun over max steps x reasoning effort -> `pipelines.report`.
Everything is the real code run as a user runs it (each step is its command line, in its own
process), except the model's arithmetic (the simulated vLLM engine of the stand-in model server,
tests/support/model_server.py).

    python -m benchmarks.rehearsal                 # 10M sentences, 4 workers x 500 episodes in flight, 10,000 episodes (engine at 4x speed)
    python -m benchmarks.rehearsal --small         # the same composition at 200k sentences, 2 x 250 in flight, 1,000 episodes
    python -m benchmarks.rehearsal --small --sentences 50000 --episodes 300   # any size: every flag overrides

Steps and what each measures (all written to <out>/rehearsal.json; logs of every command in <out>/logs):

1. corpus: benchmarks/rehearsal_corpus.py writes `--sentences` sentences of real text, perturbed
   copies with distinct ids (its docstring says how and why), as JSON Lines shards.
2. index: `python -m pipelines.index +corpus=jsonl ... embedder=<--embedder> index.ann=<--ann>
   index.ann_questions=<out>/ann_questions.jsonl` (`--ann-questions` 2Wiki dev questions after the
   `--recall-queries` ones, so that step 3's questions stay out of the build's recall measurement)
   (Ray Data, per-part keyword caches, one IVF-PQ over all parts with ann=auto above 250k
   sentences). Build time per stage (from the files each stage commits: part records and keyword
   caches = chunking, vectors records = embedding, the trained ANN and its per-part lists = ANN
   training and adding, the manifest), peak RSS of the driver, of one Ray worker and of all
   workers (psutil over the process tree), disk per component of the index folder.
3. ANN recall@10 against exact search on `--recall-queries` real 2Wiki dev questions: the index's
   own search (arag.tools.vector_search.VectorSearch, the tools' default nprobe and re-ranking)
   against an exact top-10 over every stored vector (benchmarks/semantic_search.exact_top).
4. serve and evaluate: `python -m pipelines.serve serve.workers=<--serve-workers>` over the index,
   the simulator, and `python -m pipelines.evaluate model=openai index.url=... runtime.workers=W
   runtime.concurrency=C` (model.max_concurrency=C, the judge off: it would add model calls that
   are not the agent's) over `--episodes` 2Wiki dev questions repeated with distinct ids.
   Measured: episodes/min over the steady window (from the moment the first wave is answered, as
   many answers as episodes in flight, to the first request of the last episode: every slot busy at
   both ends, no ramp-up inside; the simulator's /stats polled every second), and over the whole run
   (from the stored rows' start and finish times; the ratio uses it when the steady window holds
   fewer answers than episodes in flight, a run of too few episodes per slot), against
   the simulator's ideal for W x C episodes in flight with the run's own mean episode
   (GET /stats?episodes_in_flight=..,
   converted to wall-clock minutes by its time scale), the peak of requests in flight at the
   endpoint, tool-call p50/p95 (each stored row's per-call latency_s), RSS of the evaluation
   driver, its workers and the tool server over time (<out>/rss_evaluate.csv).
5. sweep and report: `python -m pipelines.evaluate -m agent.max_steps=.. model.reasoning_effort=..`
   (`--sweep-questions` each, against a second simulator at `--sweep-time-scale`: reasoning
   tokens at engine speed would take hours and the sweep checks composition, not speed) into the
   same results tree, then `python -m pipelines.report` over the tree.
6. rows stored exactly once: DuckDB over every episode and failed Parquet file of the tree;
   lost = expected - distinct (run, question), duplicated = stored - distinct.

The last line reads `rehearsal: sentences=.. episodes=.. in_flight_peak=.. ratio=.. lost=.. duplicated=..`
(sentences: the index's count; episodes: the evaluation's; ratio: measured / ideal episodes/min).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from arag.evaluation.results import row_files as results_row_files
from tests.support.rehearsal_parts import INDEX_FIGURES, MIB, RssSampler, StatsPoller, get_json, index_key, reusable_index, write_ann_questions

REPO = Path(__file__).resolve().parents[1]


# The full size runs its simulated engine at 4x speed: at engine speed one engine answers ~95 of
# these episodes a minute, so 10,000 would take ~110 min; at 4x it serves what 4 engines would,
# which is the load the harness must then keep up with.
FULL = dict(sentences=10_000_000, pool_sentences=None, part_mb=16.0, ann="auto", episodes=10_000, workers=4, concurrency=500,
            steps="5,10,15,20", efforts="low,medium,high", sweep_questions=50, time_scale=0.25)
SMALL = dict(sentences=200_000, pool_sentences=50_000, part_mb=4.0, ann="ivfpq", episodes=1_000, workers=2, concurrency=250,
             steps="2,4", efforts="low,medium", sweep_questions=10, time_scale=1.0)


class RehearsalError(RuntimeError):
    """A step failed; the message names it and its log."""


# ---- processes and their memory -------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# pipelines.evaluate's last line when its run, or a run of its sweep, holds failed episodes.
INCOMPLETE_RUN = re.compile(r"^error: (run \S+, \d+ questions: \d+ failed episodes|\d+ runs of the sweep are incomplete)")


class Step:
    """One command of the rehearsal: its own process, stdout and stderr to <logs>/<name>.log."""

    def __init__(self, name: str, cmd: list[str], logs: Path, env: dict[str, str]):
        self.name, self.cmd, self.log = name, cmd, logs / f"{name}.log"
        self.log_file = open(self.log, "w")
        self.log_file.write("$ " + " ".join(cmd) + "\n\n")
        self.log_file.flush()
        self.started = time.time()
        self.proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=self.log_file, stderr=subprocess.STDOUT)

    def wait(self, timeout: float | None = None, *, failed_rows_ok: bool = False) -> float:
        """`failed_rows_ok`: an evaluation's exit status 1 for failed episodes is no failure of the
        step (the rehearsal counts them and their causes itself), any other non-zero status is."""
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise RehearsalError(f"{self.name} ran past {timeout:.0f} s (log: {self.log})") from None
        self.log_file.close()
        if rc == 1 and failed_rows_ok and INCOMPLETE_RUN.search(self.tail()):
            return time.time() - self.started
        if rc != 0:
            raise RehearsalError(f"{self.name} failed with exit status {rc}: {self.tail()} (log: {self.log})")
        return time.time() - self.started

    def tail(self) -> str:
        lines = [ln for ln in self.log.read_text(errors="replace").splitlines() if ln.strip()]
        return lines[-1] if lines else "(no output)"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self.log_file.closed:
            self.log_file.close()


def wait_for(url: str, step: Step, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if step.proc.poll() is not None:
            raise RehearsalError(f"{step.name} exited with status {step.proc.returncode}: {step.tail()} (log: {step.log})")
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1)
    raise RehearsalError(f"{step.name} did not answer {url} within {timeout:.0f} s (log: {step.log})")


# ---- index figures -----------------------------------------------------------------------------------


def _last_mtime(paths: list[str]) -> float | None:
    return max((os.path.getmtime(p) for p in paths), default=None)


def stage_times(index: Path, started: float, ended: float, manifest: dict[str, Any]) -> dict[str, float]:
    """Seconds per build stage, from when each stage's last file was committed (the first stage
    includes starting Ray); the ANN's training and adding as its manifest entry records them."""
    ann_dir = index / "vectors" / "ann"
    ends = [
        ("chunking_and_keyword_caches", _last_mtime([p for p in glob.glob(str(index / "parts" / "*.json")) if not p.endswith(".vectors.json")]
                                                    + glob.glob(str(index / "tools_cache" / "**" / "*"), recursive=True))),
        ("embedding", _last_mtime(glob.glob(str(index / "parts" / "*.vectors.json")))),
        ("ann", _last_mtime(glob.glob(str(ann_dir / "*")))),
        ("manifest", _last_mtime([str(index / "manifest.json")])),
    ]
    out, prev = {}, started
    for name, end in ends:
        if end is not None:
            out[name] = round(end - prev, 1)
            prev = end
    out["exit"] = round(ended - prev, 1)  # Ray's shutdown and the process's exit
    ann = manifest.get("ann") or {}
    if ann.get("kind") not in (None, "flat"):
        out["ann_training_recorded"] = ann.get("train_seconds")
        out["ann_adding_recorded"] = round(sum(p.get("encode_seconds", 0) for p in ann.get("parts", [])), 1)
    return out


def disk_per_component(index: Path) -> dict[str, float]:
    sizes: dict[str, int] = {}
    for p in index.rglob("*"):
        if p.is_file():
            rel = p.relative_to(index).parts
            top = "/".join(rel[:2]) if rel[:2] == ("vectors", "ann") else rel[0] if len(rel) > 1 else "(top-level files)"
            sizes[top] = sizes.get(top, 0) + p.stat().st_size
    return {k: round(v / MIB, 1) for k, v in sorted(sizes.items())}


def ann_recall(index: Path, questions: list[str], embedder_yaml: Path) -> dict[str, Any]:
    """Recall@10 of the index's vector search (its ANN, the tools' default knobs) against exact search."""
    import numpy as np
    from omegaconf import OmegaConf
    from benchmarks.semantic_search import exact_top

    from arag.index.embedding import EmbedderSpec, SentenceEmbedder
    from arag.index.layout import IndexLayout, read_json
    from arag.index.store import open_index
    from arag.tools.vector_search import VectorSearch

    layout = IndexLayout(index)
    manifest = read_json(layout.manifest)
    spec = EmbedderSpec.from_config(OmegaConf.to_container(OmegaConf.load(embedder_yaml), resolve=True))
    queries = np.ascontiguousarray(SentenceEmbedder(spec).encode_queries(questions), dtype=np.float32)
    search = VectorSearch(open_index(index))
    parts = sorted(int(Path(p).stem.rsplit("-", 1)[1]) for p in glob.glob(str(index / "vectors" / "part-*.faiss")))
    t = time.perf_counter()
    exact = exact_top([(p, layout.vectors(p)) for p in parts], queries)
    exact_s = time.perf_counter() - t
    t = time.perf_counter()
    got = [search.search(q[None, :], 10)[1].tolist() for q in queries]
    ann_s = time.perf_counter() - t
    hits = [len(set(g) & set(e.tolist())) / 10 for g, e in zip(got, exact)]
    return {"kind": search.kind, "queries": len(questions), "recall_at_10": round(float(np.mean(hits)), 4),
            "exact_s": round(exact_s, 1), "search_ms_per_query": round(1e3 * ann_s / len(questions), 2),
            "vectors": int(manifest["num_sentences"]), "ann": manifest.get("ann", {}).get("factory") or manifest.get("ann", {}).get("kind")}


# ---- results figures --------------------------------------------------------------------------------


def query(sql: str, files: list[str]) -> list[tuple]:
    import duckdb

    with duckdb.connect() as con:
        return con.execute(sql, {"files": files}).fetchall()


def row_files(tree: Path) -> list[str]:
    return [str(p) for p in results_row_files(tree)]


def stored_rows(tree: Path, expected: int) -> dict[str, int]:
    files = row_files(tree)
    if not files:
        return {"expected": expected, "stored": 0, "distinct": 0, "failed": 0, "lost": expected, "duplicated": 0}
    [(stored, distinct, failed)] = query(
        "SELECT count(*), count(DISTINCT (run_id, question_id)), count(*) FILTER (WHERE status = 'failed') FROM read_parquet($files)", files)
    return {"expected": expected, "stored": stored, "distinct": distinct, "failed": failed, "lost": expected - distinct, "duplicated": stored - distinct}



def whole_rate(files: list[str]) -> dict[str, Any]:
    """Episodes/min from the first episode's start to the last one's end (ramp-up and tail included),
    from each stored row's finish time and wall seconds."""
    [(n, first, last)] = query(
        "SELECT count(*), min(epoch(finished_at) - wall_s), max(epoch(finished_at)) FROM read_parquet($files) WHERE status != 'failed'", files)
    minutes = (last - first) / 60 if n else 0
    return {"episodes": n, "whole_window_min": round(minutes, 2), "whole_episodes_per_min": round(n / minutes, 1) if minutes > 0 else None}


def tool_latency(files: list[str]) -> dict[str, Any]:
    """Every stored tool call's latency as the workers saw it: all calls, per tool, and per tool for
    questions asked the first time and again. The rehearsal repeats the dev questions under new ids
    (write_questions), and a repeat's keywords may be remembered by the tool server
    (arag.index.keyword.counts)."""
    calls = ("SELECT unnest(json_extract_string(trajectory, '$.tool_calls[*].name')) AS tool,"
             " unnest(CAST(json_extract(trajectory, '$.tool_calls[*].latency_s') AS DOUBLE[])) AS l,"
             " question_id LIKE '%~r0' AS first_time"
             " FROM read_parquet($files) WHERE status != 'failed'")
    rows = query(f"SELECT tool, first_time, GROUPING(first_time), count(*), quantile_cont(l, 0.5), quantile_cont(l, 0.95) FROM ({calls})"
                 " GROUP BY GROUPING SETS ((), (tool), (tool, first_time))", files)

    def ms(v: float | None) -> float | None:
        return round(1e3 * v, 1) if v is not None else None

    out: dict[str, Any] = {"tool_calls": 0, "p50_ms": None, "p95_ms": None, "per_tool": {}}
    for tool, first, all_asked, n, p50, p95 in sorted(rows, key=lambda r: (r[0] is not None, r[2] == 0)):
        figures = {"calls": n, "p50_ms": ms(p50), "p95_ms": ms(p95)}
        if tool is None:
            out.update(tool_calls=n, p50_ms=ms(p50), p95_ms=ms(p95))
        elif all_asked:
            out["per_tool"][tool] = figures
        else:
            out["per_tool"][tool]["first_time_asked" if first else "asked_again"] = figures
    return out


def failure_causes(files: list[str], top: int = 5) -> dict[str, int]:
    """The most common causes of failed rows (their first 160 characters) and how many each."""
    rows = query(f"SELECT substr(failure, 1, 160), count(*) FROM read_parquet($files) WHERE status = 'failed' GROUP BY 1 ORDER BY 2 DESC LIMIT {top}", files)
    return {cause: n for cause, n in rows}


def write_questions(source: Path, path: Path, count: int) -> list[dict[str, Any]]:
    """`count` questions: the dev questions repeated, each repetition under distinct ids."""
    base = [json.loads(line) for line in source.read_text().splitlines() if line.strip()]
    with open(path, "w") as f:
        for i in range(count):
            q = dict(base[i % len(base)])
            q["id"] = f"{q['id']}~r{i // len(base)}"
            f.write(json.dumps(q) + "\n")
    return base


# ---- the rehearsal ----------------------------------------------------------------------------------


def rehearse(args: argparse.Namespace) -> dict[str, Any]:
    out = args.out.resolve()
    logs = out / "logs"
    if out.exists() and not args.keep:
        # the corpus is kept (it is reused when its arguments match); everything built from it is not
        for name in ("index", INDEX_FIGURES, "results", "logs", "hydra", "questions.jsonl", "ann_questions.jsonl", "rehearsal.json"):
            p = out / name
            shutil.rmtree(p) if p.is_dir() else p.unlink(missing_ok=True)
    logs.mkdir(parents=True, exist_ok=True)
    data_dir = args.data_dir.resolve()
    env = {**os.environ, "ARAG_DATA_DIR": str(data_dir), "OPENAI_API_KEY": "rehearsal", "PYTHONUNBUFFERED": "1"}
    py = sys.executable
    figures: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}}
    sampler = RssSampler(args.rss_interval).start()
    steps: list[Step] = []

    def step(name: str, cmd: list[str]) -> Step:
        s = Step(name, cmd, logs, env)
        steps.append(s)
        return s

    def say(msg: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)

    try:
        # 1. corpus
        t = time.time()
        cmd = [py, "-m", "benchmarks.rehearsal_corpus", "--out", str(out / "corpus"), "--sentences", str(args.sentences),
               "--data-dir", str(data_dir)]
        if args.pool_sentences:
            cmd += ["--pool-sentences", str(args.pool_sentences)]
        s = step("corpus", cmd)
        s.wait()
        figures["corpus"] = {**json.loads(s.log.read_text().splitlines()[-1]), "wall_s": round(time.time() - t, 1)}
        say(f"corpus: {figures['corpus']['sentences']:,} sentences, {figures['corpus']['documents']:,} documents, "
            f"{figures['corpus']['perturbed_copies']} perturbed copies ({figures['corpus']['wall_s']} s)")

        # 2. index and 3. its ANN recall, or an earlier build's (--keep; see "Staging")
        index = out / "index"
        dev = data_dir / "2wikimultihopqa" / "questions.jsonl"
        base = write_questions(dev, out / "questions.jsonl", args.episodes)
        key = index_key(args, figures["corpus"])
        earlier = reusable_index(out, key) if args.keep else None
        if earlier is not None:
            figures.update({k: earlier[k] for k in ("index", "ann_recall")})
            figures["index"]["reused_from"] = earlier["built_at"]
            say(f"index: reusing {index} and the figures of its build at {earlier['built_at']}")
        else:
            (out / INDEX_FIGURES).unlink(missing_ok=True)
            resumed = (index / "build.json").exists()  # a --keep run over an unfinished build: it resumes
            tuning = write_ann_questions(base, args.recall_queries, args.ann_questions, out / "ann_questions.jsonl")
            t = time.time()
            s = step("index", [py, "-m", "pipelines.index", "+corpus=jsonl", "corpus.name=rehearsal", f"corpus.path={out / 'corpus' / 'shards'}",
                               f"corpus.part_size_mb={args.part_mb}", f"embedder={args.embedder}", f"index.ann={args.ann}",
                               *([f"index.ann_questions={tuning}"] if tuning else []),
                               f"index.path={index}", "progress=false", f"hydra.run.dir={out / 'hydra' / 'index'}"])
            sampler.watch("index", s.proc.pid)
            s.wait()
            ended = time.time()
            sampler.forget("index")
            manifest = json.loads((index / "manifest.json").read_text())
            figures["index"] = {"wall_s": round(ended - t, 1), "sentences": manifest["num_sentences"], "chunks": manifest["num_chunks"],
                                "documents": manifest["num_documents"], "rejected": manifest["num_rejected"], "parts": len(glob.glob(str(index / "parts" / "*.vectors.json"))),
                                "stages_s": stage_times(index, t, ended, manifest), "rss": sampler.summary("index"), "disk_mib": disk_per_component(index)}
            say(f"index: {manifest['num_sentences']:,} sentences in {figures['index']['wall_s']} s; stages {figures['index']['stages_s']}; "
                f"RSS {figures['index']['rss']}; disk MiB {figures['index']['disk_mib']}")

            figures["ann_recall"] = ann_recall(index, [q["question"] for q in base[: args.recall_queries]], REPO / "conf" / "embedder" / f"{args.embedder}.yaml")
            say(f"ANN recall@10 against exact search: {figures['ann_recall']}")
            figures["index"]["resumed_build"] = resumed
            (out / INDEX_FIGURES).write_text(json.dumps({"key": key, "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                                         "index": figures["index"], "ann_recall": figures["ann_recall"]}, indent=1, default=str))
        if args.until == "index":
            return figures

        # 4. serve, simulator, evaluate
        serve_port, sim_port = free_port(), free_port()
        in_flight = args.workers * args.concurrency
        serve = step("serve", [py, "-m", "pipelines.serve", f"index.path={index}", f"serve.workers={args.serve_workers}", f"serve.port={serve_port}",
                               "serve.token=none", f"serve.max_connections={args.serve_max_connections or in_flight + 64}", "serve.log_level=warning"])
        sim = step("simulator", [py, "-m", "tests.support.model_server", "--port", str(sim_port), "--time-scale", str(args.time_scale)])
        wait_for(f"http://127.0.0.1:{serve_port}/health", serve, 600)
        wait_for(f"http://127.0.0.1:{sim_port}/v1/models", sim, 120)
        sampler.watch("serve", serve.proc.pid, children_are_workers=True)
        sampler.watch("simulator", sim.proc.pid)
        results = out / "results"
        common = ["model=openai", f"model.base_url=http://127.0.0.1:{sim_port}/v1", f"model.model={args.model_name}", "+corpus=2wikimultihopqa",
                  f"questions.path={out / 'questions.jsonl'}", f"index.url=http://127.0.0.1:{serve_port}", "method=arag_full",
                  "judge.enabled=false", f"results.path={results}", "progress=false", f"index.timeout_s={args.tool_timeout}", f"model.timeout_s={args.model_timeout}"]
        t = time.time()
        ev = step("evaluate", [py, "-m", "pipelines.evaluate", *common, f"limit={args.episodes}", f"runtime.workers={args.workers}",
                               f"runtime.concurrency={args.concurrency}", f"model.max_concurrency={args.concurrency}",
                               f"runtime.num_cpus={args.workers + 1}", f"hydra.run.dir={out / 'hydra' / 'evaluate'}"])
        sampler.watch("evaluate", ev.proc.pid)
        poller = StatsPoller(f"http://127.0.0.1:{sim_port}/stats")
        eval_from = time.monotonic() - sampler.started
        try:
            ev.wait(failed_rows_ok=True)
        finally:
            poller.stop()
        eval_until = time.monotonic() - sampler.started
        sampler.forget("evaluate")
        eval_wall = time.time() - t
        stats = get_json(f"http://127.0.0.1:{sim_port}/stats?episodes_in_flight={min(in_flight, args.episodes)}")
        main_files = row_files(results)
        rate = {**whole_rate(main_files), **poller.steady_rate(min(args.episodes, stats["episodes_started"]), min(in_flight, args.episodes))}
        ideal_wall = stats["ideal"]["episodes_per_min"] / args.time_scale if stats.get("ideal") else None
        # A steady window that holds fewer answers than episodes in flight (a run of few episodes per
        # slot) has not seen every slot turn over: the whole run is used.
        basis = "steady" if rate.get("steady_episodes", 0) >= min(in_flight, args.episodes) else "whole"
        measured = rate.get(f"{basis}_episodes_per_min")
        figures["evaluate"] = {
            "wall_s": round(eval_wall, 1), "episodes_in_flight_asked": in_flight, "rate": rate,
            "ideal_episodes_per_min": round(ideal_wall, 1) if ideal_wall else None,
            "ratio": round(measured / ideal_wall, 3) if measured and ideal_wall else None, "ratio_basis": basis,
            "in_flight_peak": stats["peak_in_flight"], "running_peak": stats["peak_running"],
            "simulator": {k: stats[k] for k in ("requests", "episodes_started", "episodes_answered", "tool_calls", "mean_queue_s", "mean_service_s", "ideal") if k in stats},
            "tool_latency": tool_latency(main_files),
            "failure_causes": failure_causes(main_files),
            "rss_driver_and_workers": sampler.summary("evaluate"),
            # where the machine's cores went while the evaluation ran (each tree over the same window)
            "cpu": {tree: sampler.cpu(tree, eval_from, eval_until) for tree in ("evaluate", "serve", "simulator")},
        }
        sampler.write_csv(out / "rss_evaluate.csv", "evaluate")
        say(f"evaluate: {json.dumps(figures['evaluate'])}")
        sim.stop()
        sampler.forget("simulator")
        sampler.forget("serve")
        figures["serve_rss"] = sampler.summary("serve")
        sampler.write_csv(out / "rss_serve.csv", "serve")

        # 5. sweep and report
        sweep_sim_port = free_port()
        sweep_sim = step("sweep-simulator", [py, "-m", "tests.support.model_server", "--port", str(sweep_sim_port), "--time-scale", str(args.sweep_time_scale)])
        wait_for(f"http://127.0.0.1:{sweep_sim_port}/v1/models", sweep_sim, 120)
        sweep_common = [c if not c.startswith("model.base_url=") else f"model.base_url=http://127.0.0.1:{sweep_sim_port}/v1" for c in common]
        t = time.time()
        step("sweep", [py, "-m", "pipelines.evaluate", "-m", *sweep_common, f"limit={args.sweep_questions}",
                       f"agent.max_steps={args.steps}", f"model.reasoning_effort={args.efforts}",
                       f"runtime.workers={args.workers}", f"runtime.num_cpus={args.workers + 1}",
                       f"hydra.sweep.dir={out / 'hydra' / 'sweep'}"]).wait(failed_rows_ok=True)
        runs = len(args.steps.split(",")) * len(args.efforts.split(","))
        figures["sweep"] = {"runs": runs, "questions_each": args.sweep_questions, "wall_s": round(time.time() - t, 1)}
        sweep_sim.stop()
        serve.stop()
        step("report", [py, "-m", "pipelines.report", f"results.path={results}", f"hydra.run.dir={out / 'hydra' / 'report'}"]).wait()
        report = results / "report" / "report.md"
        if not report.is_file():
            raise RehearsalError(f"pipelines.report wrote no {report}")
        figures["report"] = str(report)
        say(f"sweep: {runs} runs x {args.sweep_questions} questions in {figures['sweep']['wall_s']} s; report: {report}")

        # 6. rows stored exactly once
        figures["rows"] = stored_rows(results, args.episodes + runs * args.sweep_questions)
        say(f"rows: {figures['rows']}")
    finally:
        for s in reversed(steps):
            s.stop()
        sampler.stop()
        (out / "rehearsal.json").write_text(json.dumps(figures, indent=1, default=str))
    return figures


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--small", action="store_true", help="the same composition scaled down (defaults below marked small)")
    p.add_argument("--out", type=Path, default=None, help="working folder (default outputs/rehearsal[-small])")
    p.add_argument("--data-dir", type=Path, default=Path(os.environ.get("ARAG_DATA_DIR", REPO.parent / "shared" / "data")))
    p.add_argument("--sentences", type=int, help=f"corpus size (full {FULL['sentences']:,}, small {SMALL['sentences']:,})")
    p.add_argument("--pool-sentences", type=int, help="distinct source text in sentences before copies start (full: all, small 50,000)")
    p.add_argument("--part-mb", type=float, help="corpus.part_size_mb: input per index part (full 16, small 4)")
    p.add_argument("--ann", help="index.ann (full auto, small ivfpq: the IVF-PQ that auto builds at full size)")
    p.add_argument("--embedder", default="minilm-static")
    p.add_argument("--recall-queries", type=int, default=300)
    p.add_argument("--ann-questions", type=int, default=500,
                   help="index.ann_questions: this many dev questions after the --recall-queries ones join the build's recall measurement (0: none)")
    p.add_argument("--episodes", type=int, help="evaluation episodes (full 10,000, small 1,000)")
    p.add_argument("--workers", type=int, help="runtime.workers (full 4, small 2)")
    p.add_argument("--concurrency", type=int, help="runtime.concurrency and model.max_concurrency (full 500, small 250)")
    p.add_argument("--serve-workers", type=int, default=2)
    p.add_argument("--serve-max-connections", type=int, default=None, help="serve.max_connections (default: episodes in flight + 64)")
    p.add_argument("--model-name", default="gpt-oss-120b-simulated", help="model.model: a gpt-oss name takes reasoning efforts low..high")
    p.add_argument("--time-scale", type=float, help="the simulator's time scale for the evaluation (full 0.25: 4x engine speed, small 1.0)")
    p.add_argument("--steps", help="the sweep's agent.max_steps (full 5,10,15,20, small 2,4)")
    p.add_argument("--efforts", help="the sweep's model.reasoning_effort (full low,medium,high, small low,medium)")
    p.add_argument("--sweep-questions", type=int, help="questions per sweep run (full 50, small 10)")
    p.add_argument("--sweep-time-scale", type=float, default=0.02)
    p.add_argument("--tool-timeout", type=float, default=1800.0,
                   help="index.timeout_s: a tool call may wait this long at the server (default 1800: on 2 cores the first wave of "
                        "episodes queues minutes for the first, uncached keyword searches at 10M; the client's default is 120)")
    p.add_argument("--model-timeout", type=float, default=1800.0,
                   help="model.timeout_s: one simulated engine holds every episode in flight, so a request queues for in-flight "
                        "requests / engine throughput (about 100 s at 2,000 in flight and 4x speed); the backend's default 120 s "
                        "turns that queue into timeouts, retries and failed episodes")
    p.add_argument("--rss-interval", type=float, default=1.0)
    p.add_argument("--keep", action="store_true", help="keep an earlier index and results in --out, and reuse a finished index's figures (default: built again)")
    p.add_argument("--until", choices=("index", "all"), default="all", help="index: stop after the index and its ANN recall (a later --keep run goes on)")
    args = p.parse_args(argv)
    for key, value in (SMALL if args.small else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.out is None:
        args.out = REPO / "outputs" / ("rehearsal-small" if args.small else "rehearsal")
    for key in ("sentences", "episodes", "workers", "concurrency", "serve_workers", "sweep_questions", "recall_queries"):
        if getattr(args, key) <= 0:
            p.error(f"--{key.replace('_', '-')} must be positive")
    if args.ann_questions < 0:
        p.error("--ann-questions must be 0 or more")
    if args.time_scale <= 0 or args.sweep_time_scale <= 0:
        p.error("--time-scale and --sweep-time-scale must be positive")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    started = time.time()
    try:
        f = rehearse(args)
    except RehearsalError as exc:
        sys.exit(f"error: {exc}")
    print(f"rehearsal wall time: {time.time() - started:.0f} s; figures: {args.out / 'rehearsal.json'}")
    if args.until == "index":
        print(f"rehearsal: sentences={f['index']['sentences']} index built; go on with --keep")
        return
    ratio = f["evaluate"]["ratio"]
    print(f"rehearsal: sentences={f['index']['sentences']} episodes={args.episodes} in_flight_peak={f['evaluate']['in_flight_peak']} "
          f"ratio={ratio if ratio is None else f'{ratio:.2f}'} lost={f['rows']['lost']} duplicated={f['rows']['duplicated']}")


if __name__ == "__main__":
    main()
