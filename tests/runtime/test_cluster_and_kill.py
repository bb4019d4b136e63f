"""Slow, real-process tests: a two-node Ray cluster on this machine, and kill -9 mid-build."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import faiss
import numpy as np
import psutil
import pytest

from tests.conftest import write_jsonl
from tests.support.index_checks import files_missing_or_short

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
RAY = str(Path(sys.executable).with_name("ray"))
WORKER_RESOURCE = "arag_test_worker"


def corpus(tmp_path: Path, n: int = 200) -> Path:
    rows = [
        {"doc_id": f"d{i}", "title": f"Topic {i}", "text": " ".join(f"Statement {j} concerns topic {i} in some detail." for j in range(2 + i % 6))}
        for i in range(n)
    ]
    return write_jsonl(tmp_path / "corpus" / "c.jsonl", rows)


def index_command(corpus_path: Path, index_path: Path) -> list[str]:
    return [
        sys.executable, "-m", "pipelines.index", "+corpus=jsonl", f"corpus.path={corpus_path}",
        f"index.path={index_path}", "corpus.part_size_mb=0.005", "index.chunk_tokens=64", "progress=false",
        f"hydra.run.dir={index_path.parent / ('hydra-' + index_path.name)}",
    ]


def env(**extra: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    e.update({"RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(REPO), **extra})
    return e


def table(index: Path, kind: str, order: str) -> list[tuple]:
    return duckdb.sql(f"select * from read_parquet('{index}/{kind}/*.parquet') order by {order}").fetchall()


def vectors(index: Path) -> dict[int, np.ndarray]:
    out = {}
    for f in sorted((index / "vectors").glob("*.faiss")):
        shard = faiss.read_index(str(f))
        for i in faiss.vector_to_array(shard.id_map):
            out[int(i)] = shard.reconstruct(int(i))
    return out


def assert_same_index(a: Path, b: Path) -> None:
    assert table(a, "chunks", "chunk_id") == table(b, "chunks", "chunk_id")
    assert table(a, "sentences", "sentence_id") == table(b, "sentences", "sentence_id")
    va, vb = vectors(a), vectors(b)
    assert va.keys() == vb.keys()
    assert all(np.allclose(va[k], vb[k], atol=1e-5) for k in va)


def wait_for(predicate, proc: subprocess.Popen, log: Path, timeout: float = 600) -> None:
    deadline = time.time() + timeout
    while not predicate():
        assert proc.poll() is None, "the job ended before it could be interrupted:\n" + log.read_text()[-3000:]
        assert time.time() < deadline, "timed out:\n" + log.read_text()[-3000:]
        time.sleep(0.1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kill_tree_matching(marker: str) -> None:
    """Kill the processes of one Ray cluster (found by its temp dir) and their children only."""
    victims = []
    for p in psutil.process_iter(["cmdline"]):
        if any(marker in part for part in (p.info["cmdline"] or [])):
            victims += [p, *p.children(recursive=True)]
    for p in victims:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    psutil.wait_procs(victims, timeout=10)


@pytest.fixture
def two_node_cluster():
    import ray

    ray.shutdown()  # this test process must not hold a local instance of its own
    port = free_port()
    temp_dir = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # short: Ray's socket paths have a length limit
    common = ["--num-cpus=1", "--disable-usage-stats", f"--temp-dir={temp_dir}" ]
    try:
        subprocess.run([RAY, "start", "--head", f"--port={port}", "--include-dashboard=false", *common], env=env(), check=True, capture_output=True, timeout=120)
        # The worker node alone has the resource the embedding actors are made to ask for below.
        subprocess.run([RAY, "start", f"--address=127.0.0.1:{port}", "--num-cpus=1", "--disable-usage-stats", f"--resources={{\"{WORKER_RESOURCE}\": 1}}"],
                       env=env(), check=True, capture_output=True, timeout=120)
        yield f"127.0.0.1:{port}"
    finally:
        kill_tree_matching(temp_dir)
        kill_tree_matching(f"127.0.0.1:{port}")


def cluster_nodes(address: str) -> dict[str, dict]:
    """Node id → resources of the live nodes, asked of the cluster by a separate driver."""
    script = "import json, ray; ray.init(); print(json.dumps({n['NodeID']: n['Resources'] for n in ray.nodes() if n['Alive']}))"
    out = subprocess.run([sys.executable, "-c", script], env=env(RAY_ADDRESS=address), capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_two_node_cluster_build_equals_local_build(two_node_cluster, tmp_path):
    source = corpus(tmp_path)
    index = tmp_path / "cluster"
    command = [*index_command(source, index), f"runtime.embed.resources={{{WORKER_RESOURCE}:1}}"]
    on_cluster = subprocess.run(command, env=env(RAY_ADDRESS=two_node_cluster), cwd=REPO, capture_output=True, text=True, timeout=900)
    assert on_cluster.returncode == 0, on_cluster.stderr[-3000:]
    assert "2 nodes" in on_cluster.stdout + on_cluster.stderr
    # Embedding and shard writing happened on the worker node: every shard's commit record names
    # it (the record is written by the process that wrote the shard), and none names the head.
    nodes = cluster_nodes(two_node_cluster)
    worker = [n for n, resources in nodes.items() if WORKER_RESOURCE in resources]
    assert len(nodes) == 2 and len(worker) == 1
    written_on = {json.loads(p.read_text())["node"] for p in (index / "parts").glob("*.vectors.json")}
    assert written_on == set(worker)
    assert len(list((index / "parts").glob("*.vectors.json"))) == len(list((index / "vectors").glob("*.faiss"))) > 1
    local = subprocess.run(index_command(source, tmp_path / "local"), env=env(), cwd=REPO, capture_output=True, text=True, timeout=900)
    assert local.returncode == 0, local.stderr[-3000:]
    assert "1 nodes" in local.stdout + local.stderr
    assert_same_index(tmp_path / "cluster", tmp_path / "local")


def test_kill_9_mid_build_then_rerun_finishes_without_redoing_work(tmp_path):
    source = corpus(tmp_path, n=400)
    index = tmp_path / "killed"
    # The build holds still after its second FAISS shard (a fault point read from the
    # environment), so the kill lands mid-build however fast the machine is.
    log = tmp_path / "killed.log"
    with log.open("w") as out:
        proc = subprocess.Popen(index_command(source, index), env=env(ARAG_FAULT_HANG_AFTER_SHARDS="2"), cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_for(lambda: "holding the build here" in log.read_text(), proc, log)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    parts = len(list((index / "parts").glob("part-?????.json")))
    assert 2 <= len(list((index / "vectors").glob("part-*.faiss"))) < parts
    assert not (index / "manifest.json").exists()
    assert len(list((index / "parts").glob("*.vectors.json"))) == 2
    assert files_missing_or_short(index) == []  # killed mid-build: every record still names whole files
    survivors = {p.name: p.stat().st_mtime_ns for p in (index / "vectors").glob("part-*.faiss")}
    records = {p.name: p.stat().st_mtime_ns for p in (index / "parts").glob("*.json")}
    assert survivors and records
    rerun = subprocess.run(index_command(source, index), env=env(), cwd=REPO, capture_output=True, text=True, timeout=900)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert (index / "manifest.json").exists()
    assert {n: (index / "vectors" / n).stat().st_mtime_ns for n in survivors} == survivors  # not redone
    assert {n: (index / "parts" / n).stat().st_mtime_ns for n in records} == records
    assert files_missing_or_short(index) == []
    clean = subprocess.run(index_command(source, tmp_path / "clean"), env=env(), cwd=REPO, capture_output=True, text=True, timeout=900)
    assert clean.returncode == 0, clean.stderr[-3000:]
    assert_same_index(index, tmp_path / "clean")
