"""pipelines.evaluate on a local Ray instance with the scripted backend: rows, resume, failed
episodes, Hydra multirun, DuckDB over the results tree, bad input."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from arag.runtime.evaluate import evaluate
from tests.support.scripted_evaluation import CONF, QUESTIONS, base_overrides, compose_evaluate, read_rows

REPO = Path(CONF).parent


def run(eval_index, questions_file, results, *extra):
    out = io.StringIO()
    summary = evaluate(compose_evaluate(*base_overrides(eval_index.path, questions_file, results, *extra)), out=out)
    return summary, out.getvalue()


def test_evaluate_stores_one_row_per_question_and_a_rerun_runs_nothing(ray_local, eval_index, questions_file, tmp_path):
    results = tmp_path / "results"
    summary, text = run(eval_index, questions_file, results, "runtime.workers=2", "runtime.batch_size=2")
    assert "6 to run" in text and summary["stored"] == summary["ok"] == 6 and summary["failed"] == 0
    rows = read_rows(results)
    assert sorted(r["question_id"] for r in rows) == [q["id"] for q in QUESTIONS]
    assert {r["run_id"] for r in rows} == {summary["run_id"]} and {r["status"] for r in rows} == {"ok"}
    by_id = {r["question_id"]: r for r in rows}
    assert by_id["q0"]["contain_acc"] == 1.0 and by_id["q0"]["llm_acc"] == 1.0 and by_id["q0"]["judge_status"] == "exact_match"
    assert by_id["q1"]["contain_acc"] == 0.0 and by_id["q1"]["judge_status"] == "correct"  # the scripted judge says so
    assert by_id["q0"]["evidence_recall_read"] == 0.5 and by_id["q4"]["evidence_recall_read"] == 1.0
    assert by_id["q5"]["evidence_recall_read"] is None  # no supporting titles
    assert all(r["calls_keyword_search"] == 1 and r["calls_chunk_read"] == 1 and r["worker"] for r in rows)
    assert summary["contain_acc"] == pytest.approx(2 / 6)
    run_dir = results / summary["run_id"]
    info = json.loads((run_dir / "run.json").read_text())
    assert info["run_id"] == summary["run_id"] and info["config"]["model"]["backend"] == "scripted" and info["identity"]["method"]["name"] == "arag_full"
    parts = sorted(p.name for p in (run_dir / "episodes").glob("*.parquet"))
    assert len(parts) >= 3  # batches of 2

    summary2, text2 = run(eval_index, questions_file, results, "runtime.workers=1")  # runtime knobs: same run
    assert "6 already answered" in text2 and "0 to run" in text2 and summary2["run_id"] == summary["run_id"] and summary2["ran"] == 0
    assert sorted(p.name for p in (run_dir / "episodes").glob("*.parquet")) == parts
    assert len((run_dir / "invocations.jsonl").read_text().splitlines()) == 2


def test_a_larger_limit_continues_the_same_run(ray_local, eval_index, questions_file, tmp_path):
    results = tmp_path / "results"
    first, _ = run(eval_index, questions_file, results, "limit=2")
    assert first["stored"] == 2 and first["questions"] == 2
    second, text = run(eval_index, questions_file, results, "limit=5")
    assert second["run_id"] == first["run_id"] and "2 already answered" in text and second["ran"] == 3
    assert sorted(r["question_id"] for r in read_rows(results)) == ["q0", "q1", "q2", "q3", "q4"]


def test_failed_episodes_are_kept_apart_and_retried_on_rerun(ray_local, eval_index, questions_file, tmp_path):
    results = tmp_path / "results"
    run(eval_index, questions_file, results, "limit=2")
    # A slow model and a tight episode time limit (both run-time settings: the same run) fail the rest.
    failed, text = run(eval_index, questions_file, results, "model.latency_s=0.5", "runtime.episode_timeout_s=0.2")
    assert failed["ran"] == 4 and failed["ok"] == 2 and failed["failed"] == 4 and failed["stored"] == 6
    rows = {r["question_id"]: r for r in read_rows(results)}
    bad = [rows[q] for q in ("q2", "q3", "q4", "q5")]
    assert all(r["status"] == "failed" and r["prediction"] is None and "timed out" in r["failure"] and r["contain_acc"] == 0.0 for r in bad)
    assert all(r["attempt"] == 1 and r["judge_status"] == "no_answer" for r in bad)
    run_dir = results / failed["run_id"]
    assert list((run_dir / "failed").glob("*.parquet"))
    ((n_ok,),) = duckdb.sql(f"SELECT count(*) FROM '{run_dir}/episodes/*.parquet'").fetchall()
    assert n_ok == 2  # failed episodes never count as answers

    retried, text = run(eval_index, questions_file, results)
    assert "2 already answered, 4 failed before (retrying), 4 to run" in text and retried["ok"] == 6 and retried["failed"] == 0
    rows = read_rows(results)
    assert len(rows) == 6 and len({r["question_id"] for r in rows}) == 6
    assert {r["question_id"]: r["attempt"] for r in rows} == {"q0": 1, "q1": 1, "q2": 2, "q3": 2, "q4": 2, "q5": 2}
    assert not list((run_dir / "failed").glob("*.parquet"))


def test_a_worker_that_cannot_start_stops_the_run_with_its_reason(ray_local, eval_index, questions_file, tmp_path):
    from arag.runtime.evaluate_job import EvaluationError

    # A backend setting only the backend can refuse: the worker builds it, fails, and says why.
    with pytest.raises(EvaluationError, match="could not start: .*reasoning effort must be one of .* got 'extreme'"):
        run(eval_index, questions_file, tmp_path / "results", "model.reasoning_effort=extreme")


def test_an_unknown_backend_stops_the_run_before_any_worker(eval_index, questions_file, tmp_path):
    with pytest.raises(ValueError, match="unknown backend 'nope'"):
        run(eval_index, questions_file, tmp_path / "results", "model.backend=nope")
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
def test_hydra_multirun_sweeps_into_one_results_tree_that_duckdb_reads(eval_index, questions_file, tmp_path, monkeypatch):
    results = tmp_path / "results"
    sweep = ["agent.max_steps=1,3", "model.reasoning_effort=low,high"]
    argv = [sys.executable, "-m", "pipelines.evaluate", "-m", *sweep, *base_overrides(eval_index.path, questions_file, results), f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900, cwd=REPO, env={**env, "RAY_AUTH_MODE": "disabled"})
    runs = sorted(p.name for p in results.iterdir() if (p / "run.json").exists())
    assert len(runs) == 4, done.stderr[-3000:]  # every run of the sweep ran
    # The two max_steps=1 runs failed every episode: each is named as it ends, and the sweep exits 1 after the last.
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert done.returncode == 1 and len(errors) == 3 and errors[-1].startswith("error: 2 runs of the sweep are incomplete"), done.stderr[-3000:]
    assert all("6 questions: 6 failed episodes" in line for line in errors[:2])
    # The query from the issue, over the whole tree, from the results' parent folder.
    monkeypatch.chdir(tmp_path)
    table = duckdb.sql("select method, max_steps, reasoning_effort, avg(contain_acc), count(*) from 'results/**/*.parquet' group by all order by all").fetchall()
    # max_steps=1: the scripted agent's second action comes in the forced final call, which is not an answer → failed.
    assert table == [
        ("arag_full", 1, "high", 0.0, 6),
        ("arag_full", 1, "low", 0.0, 6),
        ("arag_full", 3, "high", pytest.approx(2 / 6), 6),
        ("arag_full", 3, "low", pytest.approx(2 / 6), 6),
    ]
    rows = read_rows(results)
    assert {r["max_steps"]: r["status"] for r in rows} == {1: "failed", 3: "ok"}
    assert {tuple(sorted(o for o in r["overrides"] if o.startswith(("agent.", "model.reasoning")))) for r in rows} == {
        ("agent.max_steps=1", "model.reasoning_effort=low"), ("agent.max_steps=1", "model.reasoning_effort=high"),
        ("agent.max_steps=3", "model.reasoning_effort=low"), ("agent.max_steps=3", "model.reasoning_effort=high"),
    }


@pytest.mark.parametrize(
    "sweep, first",
    [
        ("test_time_scaling_steps", "#0 : method=arag_full agent.max_steps=5 model.reasoning_effort=medium"),
        ("test_time_scaling_effort", "#0 : method=arag_full agent.max_steps=15 model.reasoning_effort=minimal"),  # the official step count
    ],
)
def test_the_test_time_scaling_sweeps_vary_one_setting_at_a_time(tmp_path, sweep, first):
    """The paper's design, not a grid: 4 runs each, the other setting held at one value."""
    # The first job stops at once (no questions file): enough to see what the sweep launches.
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.evaluate", "-m", f"+sweep={sweep}", "model=scripted", f"questions.path={tmp_path / 'none.jsonl'}", f"hydra.sweep.dir={tmp_path / 's'}"],
        capture_output=True, text=True, timeout=300, cwd=REPO,
    )
    text = done.stdout + done.stderr
    assert "Launching 4 jobs locally" in text, text[-3000:]
    assert first in text
    assert done.returncode != 0 and "questions file not found" in text


def test_a_sweeps_fixed_setting_is_overridden_on_the_command_line(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "pipelines.evaluate", "-m", "+sweep=test_time_scaling_steps", "model.reasoning_effort=low", "model=scripted",
         f"questions.path={tmp_path / 'none.jsonl'}", f"hydra.sweep.dir={tmp_path / 's'}"],
        capture_output=True, text=True, timeout=300, cwd=REPO,
    )
    text = done.stdout + done.stderr
    assert "Launching 4 jobs locally" in text and "#0 : method=arag_full agent.max_steps=5 model.reasoning_effort=low" in text, text[-3000:]


def test_cli_errors_name_the_bad_input(tmp_path):
    def cli(*args):
        return subprocess.run([sys.executable, "-m", "pipelines.evaluate", *args, f"hydra.run.dir={tmp_path / 'h'}"], capture_output=True, text=True, timeout=300, cwd=REPO)

    missing = cli(f"questions.path={tmp_path / 'nope.jsonl'}", "method=direct", "model=scripted")
    assert missing.returncode != 0 and f"questions file not found: {tmp_path / 'nope.jsonl'}" in missing.stderr
    bad = tmp_path / "q.jsonl"
    bad.write_text('{"id": "a", "question": "Q", "answers": ["A"]}\n{"id": "b", "question": \n')
    broken = cli(f"questions.path={bad}", "method=direct", "model=scripted")
    assert broken.returncode != 0 and f"{bad}:2: not valid JSON" in broken.stderr
    none = cli("method=direct", "model=scripted")
    assert none.returncode != 0 and "+corpus=<name>" in none.stderr
    no_index = cli(f"questions.path={bad}", "questions.on_bad_line=skip", f"index.path={tmp_path / 'noindex'}", "model=scripted")
    assert no_index.returncode != 0 and "noindex" in no_index.stderr


def test_an_evaluation_opens_its_index_and_builds_its_method_once_in_this_process(ray_local, eval_index, questions_file, tmp_path, monkeypatch):
    """The driver reads the index's chunk ids, fingerprint and facts from one opening, and renders
    the run id's texts with the method it built; the workers (other processes) open their own."""
    import arag.index.store as store
    import arag.methods as methods
    import arag.evaluation.run_config as run_config

    counts = {"opened": 0, "built": 0}
    real_init, real_build = store.Index.__init__, methods.method_from_config

    def counted_init(self, *args, **kwargs):
        counts["opened"] += 1
        real_init(self, *args, **kwargs)

    def counted_build(cfg):
        counts["built"] += 1
        return real_build(cfg)

    monkeypatch.setattr(store.Index, "__init__", counted_init)
    monkeypatch.setattr(methods, "method_from_config", counted_build)
    monkeypatch.setattr(run_config, "method_from_config", counted_build)
    summary, _ = run(eval_index, questions_file, tmp_path / "results", "limit=2")
    assert summary["stored"] == 2
    assert counts == {"opened": 1, "built": 1}
