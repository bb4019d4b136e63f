"""The graph job on Ray: a build resumes from committed parts (after a kill -9 too) and writes the
manifest last; the pipeline refuses unknown settings and graphs of other settings."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from arag.graph.build import GraphBuildError, GraphLayout, GraphSettings, extract_part, plan_graph_parts, prepare_graph_directory
from arag.graph.extract import RuleExtractor
from arag.graph.store import GraphStore
from arag.index.store import open_index
from tests.support.graph_index import GRAPH_DOCS, RULES
from tests.runtime.test_cluster_and_kill import REPO, two_node_cluster, wait_for  # noqa: F401  (two_node_cluster: the fixture)
from tests.support.tiny_index import fake_encode, make_index


def test_build_resumes_from_committed_parts(tmp_path, ray_local):
    from arag.runtime.graph_job import build_graph

    root = make_index(tmp_path / "index", GRAPH_DOCS).path
    settings = GraphSettings(extractor=RULES, chunks_per_part=2)
    index = open_index(root)
    layout = GraphLayout(root)
    # A build that committed its first part and died writing the second (a stray temporary).
    prepare_graph_directory(layout, settings.identity(index, RuleExtractor()), overwrite=False)
    plan = plan_graph_parts(index, 2)
    assert len(plan) == 3  # parts 0 (4 chunks) and 1 (2 chunks) of the index, two chunks each
    first = extract_part(str(root), plan[0], RULES, worker="before-the-kill")
    (layout.root / "triples" / ".tmp-abc.parquet").write_bytes(b"half a file")
    assert not layout.manifest.exists()

    result = build_graph(str(root), settings, progress=False, ray_init=lambda: "test", encoder=fake_encode)
    assert result.action == "resume"
    records = [json.loads(layout.part_file("parts", p.part).read_text()) for p in plan]
    assert records[0]["worker"] == "before-the-kill" and records[0] == {**first.__dict__}
    assert all(r["worker"] and r["worker"] != "before-the-kill" for r in records[1:])
    assert not list(layout.root.rglob(".tmp-*")) and layout.manifest.exists()
    manifest = json.loads(layout.manifest.read_text())
    assert manifest["num_chunks"] == 6 and manifest["num_nodes"] == len(GraphStore(root).names) > 0
    again = build_graph(str(root), settings, progress=False, ray_init=lambda: "test", encoder=fake_encode)
    assert again.action == "up_to_date"
    with pytest.raises(GraphBuildError, match="other settings.*chunks_per_part"):
        build_graph(str(root), GraphSettings(extractor=RULES, chunks_per_part=3), progress=False, ray_init=lambda: "test")


def test_graph_command_refuses_unknown_settings(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "pipelines.graph", f"index.path={tmp_path}", "+graph.extractor.knd=rule", f"hydra.run.dir={tmp_path}/hydra"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 1 and "unknown setting graph.extractor.knd" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_kill_9_mid_graph_build_then_rerun_keeps_committed_parts(tmp_path, ray_local):
    from arag.runtime.graph_job import build_graph

    root = make_index(tmp_path / "index", GRAPH_DOCS).path
    log_path = tmp_path / "graph.log"
    command = [sys.executable, "-m", "pipelines.graph", f"index.path={root}", "graph.chunks_per_part=1", "runtime.num_cpus=1", "runtime.graph.max_in_flight=1", "progress=false", f"hydra.run.dir={tmp_path}/hydra"]
    with log_path.open("w") as log:
        proc = subprocess.Popen(command, env={**os.environ, "ARAG_FAULT_HANG_AFTER_GRAPH_PARTS": "2", "PYTHONPATH": str(REPO)}, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            # Waits for the fault point's own words.
            wait_for(lambda: "holding the graph build here" in log_path.read_text(), proc, log_path, timeout=300)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    layout = GraphLayout(root)
    committed = {p.name: p.read_text() for p in (layout.root / "parts").glob("*.json")}
    assert 2 <= len(committed) < 6 and not layout.manifest.exists()
    result = build_graph(str(root), GraphSettings(extractor=RULES, chunks_per_part=1), progress=False, ray_init=lambda: "test", encoder=fake_encode)
    assert result.action == "resume" and result.manifest["num_parts"] == 6
    assert all((layout.root / "parts" / name).read_text() == text for name, text in committed.items())  # not redone


@pytest.mark.slow
def test_graph_builds_on_a_two_node_cluster(tmp_path, two_node_cluster, monkeypatch):
    import ray

    from arag.runtime.cluster import init_ray
    from arag.runtime.graph_job import build_graph

    root = make_index(tmp_path / "index", GRAPH_DOCS).path
    monkeypatch.setenv("RAY_ADDRESS", two_node_cluster)
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    try:
        result = build_graph(str(root), GraphSettings(extractor=RULES, chunks_per_part=1), progress=False, ray_init=init_ray, encoder=fake_encode)
        assert len([n for n in ray.nodes() if n["Alive"]]) == 2
    finally:
        ray.shutdown()
    nodes = {w.split("/")[0] for w in result.manifest["workers"]}
    assert result.manifest["num_parts"] == 6 and len(nodes) == 2, result.manifest["workers"]  # work on both nodes


def test_llm_extraction_tasks_that_would_oversubscribe_the_cores_are_warned_about():
    from arag.runtime.graph_job import oversubscribed_cores

    llm = {"kind": "llm", "model": {"backend": "llamacpp", "n_threads": None}}
    warning = oversubscribed_cores(llm, task_cpus=1, cores=2)
    assert "runtime.graph.num_cpus=2" in warning and "n_threads=1" in warning
    assert oversubscribed_cores(llm, task_cpus=2, cores=2) is None  # one task per machine: fits
    assert oversubscribed_cores({**llm, "model": {"backend": "llamacpp", "n_threads": 1}}, task_cpus=1, cores=8) is None
    assert oversubscribed_cores({**llm, "model": {"backend": "openai"}}, task_cpus=1, cores=8) is None  # the model runs elsewhere
    assert oversubscribed_cores({"kind": "rule"}, task_cpus=1, cores=8) is None
