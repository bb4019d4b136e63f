"""No limit hides below `runtime.concurrency`: a backend's own request limit follows it (or is named in
a warning when the config sets it lower), in an evaluation and in a re-judge, and a worker has a
thread for every episode in flight."""

from __future__ import annotations

import asyncio
import logging
import threading
from types import SimpleNamespace

import pytest

from arag.runtime.evaluate_job import EpisodeWorker, backend_caps
from tests.conftest import write_jsonl
from tests.support.scripted_evaluation import base_overrides, compose_evaluate


def test_a_null_endpoint_limit_follows_the_episodes_in_flight():
    assert backend_caps({"backend": "openai", "max_concurrency": None}, 64, 64) == ({"max_concurrency": 64}, [])
    assert backend_caps({"backend": "openai", "max_concurrency": 64}, 64, 64) == ({}, [])


def test_a_lower_endpoint_limit_is_kept_and_named():
    raised, warnings = backend_caps({"backend": "openai", "max_concurrency": 8}, 64, 64, role="judge.model")
    assert raised == {} and len(warnings) == 1
    assert "judge.model.max_concurrency=8 is below the 64 episodes in flight per worker" in warnings[0]


def test_vllm_actor_calls_are_raised_and_a_smaller_batch_is_named():
    raised, warnings = backend_caps({"backend": "vllm", "max_inflight": 512, "max_num_seqs": 128}, 600, 1200)
    assert raised == {"max_inflight": 1200}
    assert len(warnings) == 1 and "model.max_num_seqs=128 is below the 1200 episodes in flight per engine" in warnings[0]
    assert backend_caps({"backend": "vllm", "max_inflight": 512, "max_num_seqs": 128}, 128, 128) == ({}, [])
    assert backend_caps({"backend": "scripted"}, 1000, 1000) == ({}, [])


def test_a_worker_runs_as_many_blocking_steps_at_once_as_episodes_in_flight():
    """Blocking steps (a served index's tool calls, evidence recall) go to the loop's default
    executor, which asyncio caps at min(32, cores + 4) threads: 64 of them must run at once."""
    barrier = threading.Barrier(64, timeout=10)

    async def sixty_four_blocking_steps():
        await EpisodeWorker.ready(SimpleNamespace(threads=64, node="n"))
        return await asyncio.gather(*(asyncio.to_thread(barrier.wait) for _ in range(64)))

    assert sorted(asyncio.run(sixty_four_blocking_steps())) == list(range(64))


def questions(path, n):
    return write_jsonl(path, [{"id": f"q{i}", "question": f"When did Lothair II's mother die ({i})?", "answers": ["20 March 851"], "supporting_titles": ["Lothair II"]} for i in range(n)])


@pytest.mark.slow
def test_an_evaluation_keeps_runtime_concurrency_requests_at_the_endpoint(ray_local, eval_index, tmp_path, caplog):
    """model=openai with runtime.concurrency=64: 64 requests reach the endpoint at once (the
    backend's old default limit let 8 through, silently); a limit set lower is named at start."""
    from tests.support.model_server import fixed_latency, serve
    from arag.runtime.evaluate import evaluate

    server = fixed_latency(0.05, hold_until=64, hold_timeout_s=3.0)
    file = questions(tmp_path / "questions.jsonl", 64)
    with serve(server) as base:
        common = [
            f"index.path={eval_index.path}", f"questions.path={file}", "model=openai", f"model.base_url={base}", "model.model=fixed",
            "method=arag_no_semantic", "judge.model={backend:scripted,protocol:json,model:judge,replay:true,script:[{verdict:correct}]}",
            "runtime.worker_cpus=0.5", "runtime.concurrency=64", "progress=false",
        ]
        with caplog.at_level(logging.WARNING, logger="arag.runtime.evaluate"):
            summary = evaluate(compose_evaluate(*common, f"results.path={tmp_path / 'results'}"))
        assert summary["ok"] == 64 and server.stats.peak_in_flight == 64
        assert not [r for r in caplog.records if "max_concurrency" in r.getMessage()]

        server.reset()
        with caplog.at_level(logging.WARNING, logger="arag.runtime.evaluate"):
            evaluate(compose_evaluate(*common, "model.max_concurrency=16", "limit=16", f"results.path={tmp_path / 'limited'}"))
        assert server.stats.peak_in_flight == 16
        assert [r for r in caplog.records if "model.max_concurrency=16 is below the 64 episodes in flight per worker" in r.getMessage()]


@pytest.mark.slow
def test_a_rejudge_keeps_its_concurrency_requests_at_the_judge_endpoint(ray_local, eval_index, tmp_path):
    """pipelines.rejudge concurrency=16 with an openai judge whose max_concurrency is null: 16 judge
    calls reach the endpoint at once (the backend's default limit let 8 through)."""
    from tests.support.model_server import fixed_latency, serve
    from arag.runtime.evaluate import evaluate
    from tests.evaluation.test_rejudge import run_rejudge

    results = tmp_path / "results"
    # Answers the scripted agent misses, so every one goes to the judge.
    file = write_jsonl(tmp_path / "q.jsonl", [{"id": f"q{i}", "question": f"When did Lothair II's mother die ({i})?", "answers": [f"not it {i}"], "supporting_titles": []} for i in range(16)])
    evaluate(compose_evaluate(*base_overrides(eval_index.path, file, results)))
    server = fixed_latency(0.0, hold_until=16, hold_timeout_s=3.0)
    with serve(server) as base:
        run_rejudge(results, f"judge.model={{backend:openai,protocol:json,model:fixed,base_url:'{base}'}}", "concurrency=16")
    assert server.stats.peak_in_flight == 16
