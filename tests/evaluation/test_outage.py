"""An outage is a failure, never an answer. An evaluation over index.url= whose tool server is
killed mid-run stores no `ok` row for an episode that hit the outage, and the rerun, with a server
back, completes those episodes; a model endpoint that answers 5xx or cannot be reached after the
retries fails the episode (a failed row, retried by the next run like any failure)."""

from __future__ import annotations

import asyncio
import io
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from arag.evaluation.questions import Question, load_questions
from arag.evaluation.run_config import run_settings
from arag.evaluation.runner import EpisodeRunner
from arag.runtime.evaluate import evaluate
from tests.support.scripted_evaluation import QUESTIONS, base_overrides, compose_evaluate, read_rows

ANSWERED_FIRST = 1  # answered rows stored before the server is killed


def evaluate_in_thread(overrides: list[str]) -> tuple[threading.Thread, dict]:
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["summary"] = evaluate(compose_evaluate(*overrides), out=(out := io.StringIO()))
            outcome["text"] = out.getvalue()
        except BaseException as exc:  # handed to the test's thread
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


@pytest.mark.slow
def test_a_tool_server_killed_mid_run_leaves_no_ok_row_and_the_rerun_completes(ray_local, eval_index, questions_file, tmp_path):
    pytest.importorskip("mcp", reason="the tool server needs the serve extra: pip install -e '.[serve]'")
    from tests.support.tool_server import start_http_server, stop

    results = tmp_path / "results"
    server = start_http_server(eval_index.path, tmp_path / "server.log", "serve.preload=false")  # keyword search and chunk_read need no encoder
    # Two episodes at a time, each row written as soon as it is done, each model reply slow enough
    # that episodes are still to run when the first row is stored.
    knobs = ("runtime.concurrency=2", "runtime.batch_size=1", "model.latency_s=0.3")
    thread, outcome = evaluate_in_thread([*base_overrides(eval_index.path, questions_file, results, *knobs), f"index.url={server.url}"])
    try:
        deadline = time.monotonic() + 300
        while len(list(results.glob("*/episodes/*.parquet"))) < ANSWERED_FIRST:
            assert thread.is_alive(), outcome
            assert time.monotonic() < deadline, "no row was stored"
            time.sleep(0.05)
        server.process.kill()  # a crash: no goodbye to the connections in flight
        server.process.wait()
        thread.join(600)
    finally:
        if server.process.poll() is None:
            stop(server)
    assert "error" not in outcome, outcome.get("error")
    summary = outcome["summary"]
    assert summary["ok"] >= ANSWERED_FIRST and summary["failed"] >= 1 and summary["ok"] + summary["failed"] == len(QUESTIONS)

    rows = read_rows(results)
    assert len(rows) == len(QUESTIONS)
    for row in rows:
        calls = json.loads(row["trajectory"] or "{}").get("tool_calls", [])  # none: a row failed in scoring
        if row["status"] == "ok":  # answered before the outage: every tool call was answered
            assert [c["error"] for c in calls] == [None, None], row["question_id"]
        else:
            assert row["prediction"] is None and "tool server (index.url)" in row["failure"], row["failure"]
        port = server.url.rsplit(":", 1)[1]
        assert f"127.0.0.1:{port}" not in json.dumps(row, default=str), row["question_id"]
    failed_ids = sorted(r["question_id"] for r in rows if r["status"] == "failed")

    server = start_http_server(eval_index.path, tmp_path / "back.log", "serve.preload=false")  # back, at another address: the same run
    try:
        again = evaluate(compose_evaluate(*base_overrides(eval_index.path, questions_file, results), f"index.url={server.url}"), out=(out := io.StringIO()))
    finally:
        stop(server)
    assert f"{len(failed_ids)} failed before (retrying)" in out.getvalue()
    assert again["run_id"] == summary["run_id"] and again["ran"] == len(failed_ids) and again["failed"] == 0
    rows = read_rows(results)
    assert sorted(r["question_id"] for r in rows) == sorted(q["id"] for q in QUESTIONS) and {r["status"] for r in rows} == {"ok"}
    assert {r["question_id"] for r in rows if r["attempt"] == 2} == set(failed_ids)
    assert not list((results / summary["run_id"] / "failed").glob("*.parquet"))


class Failing(BaseHTTPRequestHandler):
    """A model endpoint that answers every request 503."""

    requests = 0

    def do_POST(self) -> None:
        type(self).requests += 1
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = b'{"error": {"message": "the model is overloaded"}}'
        self.send_response(503)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.mark.parametrize("endpoint", ["answers 503", "unreachable"])
def test_a_model_endpoint_failing_after_the_retries_fails_the_episode(endpoint, eval_index, questions_file):
    from arag.llm.openai import OpenAIBackend
    from tests.support.tool_server import free_port

    Failing.requests = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), Failing) if endpoint == "answers 503" else None
    port = server.server_address[1] if server else free_port()
    if server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    fast = ("agent.llm_attempts=3", "agent.backoff_initial_s=0", "agent.backoff_max_s=0", "agent.backoff_jitter_s=0")
    cfg = compose_evaluate(*base_overrides(eval_index.path, questions_file, questions_file.parent / "results", *fast))
    settings = run_settings(cfg, load_questions(str(questions_file), "error"))
    backend = OpenAIBackend("gpt-4o-mini", base_url=f"http://127.0.0.1:{port}/v1", api_key_env=None, connect_timeout_s=2.0)
    runner = EpisodeRunner(settings, backend=backend)
    try:
        row = asyncio.run(runner.run(Question(**{**QUESTIONS[0], "answers": tuple(QUESTIONS[0]["answers"]), "supporting_titles": tuple(QUESTIONS[0]["supporting_titles"])})))
    finally:
        runner.close()
        if server:
            server.shutdown()
    assert row.status == "failed" and row.prediction is None and row.llm_acc in (None, 0.0)
    assert "model call failed after 3 attempt(s)" in row.failure, row.failure
    assert ("503" in row.failure) if server else ("connect" in row.failure.lower()), row.failure
    if server:
        assert Failing.requests == 3
    messages = json.loads(row.trajectory)["messages"]
    assert not any("overloaded" in (m.get("content") or "") or str(port) in (m.get("content") or "") for m in messages)
