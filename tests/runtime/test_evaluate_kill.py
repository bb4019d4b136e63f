"""Slow, real-process tests: kill -9 of an evaluation then rerun; a two-node Ray cluster losing its
worker node mid-run. Every question must end up stored exactly once."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile

import psutil
import pytest

from tests.conftest import write_jsonl
from tests.support.scripted_evaluation import QUESTIONS, base_overrides, read_rows
from tests.runtime.test_cluster_and_kill import REPO, RAY, env, free_port, kill_tree_matching, wait_for

pytestmark = pytest.mark.slow


def command(*overrides: str) -> list[str]:
    return [sys.executable, "-m", "pipelines.evaluate", *overrides]


def kill_process_tree(proc: subprocess.Popen) -> None:
    """SIGKILL the evaluation and everything it started (its local Ray instance too)."""
    try:
        victims = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        victims = []
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    for p in victims:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    psutil.wait_procs(victims, timeout=30)
    proc.wait()


def test_kill_9_mid_run_then_rerun_stores_every_episode_once(eval_index, questions_file, tmp_path):
    results = tmp_path / "results"
    overrides = base_overrides(eval_index.path, questions_file, results, "runtime.batch_size=2", "runtime.concurrency=1", f"hydra.run.dir={tmp_path / 'h'}")
    log = tmp_path / "killed.log"
    # The driver holds still after writing its first batch (a fault point read from the
    # environment), so the kill lands mid-run however fast the machine is.
    with log.open("w") as out:
        proc = subprocess.Popen(command(*overrides), env=env(ARAG_FAULT_HANG_AFTER_BATCHES="1"), cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_for(lambda: "holding the evaluation here" in log.read_text(), proc, log)
        finally:
            kill_process_tree(proc)
    (run_dir,) = [p for p in results.iterdir() if p.is_dir()]
    parts = {p.name: p.stat().st_mtime_ns for p in (run_dir / "episodes").glob("*.parquet")}
    before = read_rows(results)
    assert len(parts) == 1 and len(before) == 2
    # A write cut short by a kill leaves a temp file: it must never be read, and goes at the next open.
    (run_dir / "episodes" / ".part-cut.parquet.4242.tmp").write_bytes(b"PAR1 half written")

    rerun = subprocess.run(command(*overrides), env=env(), cwd=REPO, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "2 already answered, 0 failed before (retrying), 4 to run" in rerun.stdout
    rows = read_rows(results)
    assert sorted(r["question_id"] for r in rows) == sorted(q["id"] for q in QUESTIONS)  # each exactly once
    assert {p.name: p.stat().st_mtime_ns for p in (run_dir / "episodes").glob("*.parquet") if p.name in parts} == parts
    assert {(r["question_id"], r["finished_at"]) for r in before} <= {(r["question_id"], r["finished_at"]) for r in rows}  # not run again
    assert not list(run_dir.glob("**/*.tmp"))
    last = json.loads((run_dir / "invocations.jsonl").read_text().splitlines()[-1])
    assert last["to_run"] == 4 and last["ran"] == 4


@pytest.fixture
def two_nodes():
    """A head node and a worker node on this machine, one CPU each; yields (address, worker marker)."""
    import ray

    ray.shutdown()  # this test process must not hold a local instance of its own
    port = free_port()
    head_dir = tempfile.mkdtemp(prefix="rh", dir="/tmp")  # short: Ray's socket paths have a length limit
    worker_dir = tempfile.mkdtemp(prefix="rw", dir="/tmp")
    # Dead nodes are noticed within seconds rather than the default tens of seconds.
    fast = env(RAY_health_check_period_ms="500", RAY_health_check_failure_threshold="4", RAY_health_check_timeout_ms="1000")
    try:
        subprocess.run([RAY, "start", "--head", f"--port={port}", "--num-cpus=1", "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={head_dir}"], env=fast, check=True, capture_output=True, timeout=120)
        subprocess.run([RAY, "start", f"--address=127.0.0.1:{port}", "--num-cpus=1", "--disable-usage-stats", f"--temp-dir={worker_dir}"], env=fast, check=True, capture_output=True, timeout=120)
        yield f"127.0.0.1:{port}", worker_dir
    finally:
        kill_tree_matching(worker_dir)
        kill_tree_matching(head_dir)
        kill_tree_matching(f"127.0.0.1:{port}")


def test_losing_the_worker_node_mid_run_still_stores_every_episode_once(two_nodes, eval_index, tmp_path):
    address, worker_dir = two_nodes
    many = [{**QUESTIONS[i % len(QUESTIONS)], "id": f"q{i:02d}"} for i in range(60)]
    questions = write_jsonl(tmp_path / "bench" / "questions.jsonl", many)
    results = tmp_path / "results"
    overrides = base_overrides(
        eval_index.path, questions, results,
        "runtime.workers=2", "runtime.worker_cpus=1", "runtime.concurrency=2", "runtime.batch_size=2", "runtime.flush_s=1",
        "model.latency_s=0.25", f"hydra.run.dir={tmp_path / 'h'}",
    )
    log = tmp_path / "cluster.log"
    with log.open("w") as out:
        proc = subprocess.Popen(command(*overrides), env=env(RAY_ADDRESS=address), cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            # Kill the worker node once each node has run something and much remains to do.
            def both_nodes_busy() -> bool:
                rows = read_rows(results) if results.exists() else []
                return len({r["worker"] for r in rows}) == 2 and len(rows) < 45

            wait_for(both_nodes_busy, proc, log)
            kill_tree_matching(worker_dir)
            assert proc.wait(timeout=600) == 0, log.read_text()[-3000:]
        finally:
            if proc.poll() is None:
                kill_process_tree(proc)
    text = log.read_text()
    assert "2 nodes" in text and "evaluation worker lost" in text
    rows = read_rows(results)
    assert sorted(r["question_id"] for r in rows) == sorted(q["id"] for q in many)  # every one, once
    assert all(r["status"] == "ok" for r in rows)
    (run_dir,) = [p for p in results.iterdir() if p.is_dir()]
    last = json.loads((run_dir / "invocations.jsonl").read_text().splitlines()[-1])
    assert last["workers_lost"] >= 1 and last["requeued"] >= 1 and last["ran"] == 60
