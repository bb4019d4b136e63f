"""Pieces of the Ray runtime that need no cluster: defaults and vLLM engine placement."""

from __future__ import annotations

from arag.llm.factory import worker_overrides
from arag.runtime.evaluate_job import default_concurrency, summarize_error


def test_default_concurrency_follows_the_backend():
    assert default_concurrency({"backend": "llamacpp"}) == 1
    assert default_concurrency({"backend": "openai", "max_concurrency": 4}) == 4
    assert default_concurrency({"backend": "vllm", "max_num_seqs": 128}) == 128
    assert default_concurrency({"backend": "scripted"}) == 16


def test_each_worker_slot_names_its_vllm_engine():
    cfg = {"backend": "vllm", "model": "Qwen/Qwen3-8B", "num_gpus": 1, "reasoning_effort": "low"}
    names = [worker_overrides(cfg, slot, 2)["actor_name"] for slot in range(4)]
    assert names[0] == names[2] != names[1] == names[3] and names[0].endswith("-e0")
    # Settings the engine does not depend on (reasoning effort, per-request) keep the engines.
    assert worker_overrides({**cfg, "reasoning_effort": "high"}, 0, 2) == worker_overrides(cfg, 0, 2)
    assert worker_overrides({**cfg, "model": "other"}, 0, 2) != worker_overrides(cfg, 0, 2)
    assert worker_overrides({**cfg, "actor_name": "mine"}, 3, 2) == {"actor_name": "mine-e1"}
    assert worker_overrides({"backend": "llamacpp"}, 0, 1) == {}


def test_a_workers_error_is_summarised_to_its_last_line():
    err = RuntimeError("Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: unknown backend 'nope'\n")
    assert summarize_error(err) == "RuntimeError: ValueError: unknown backend 'nope'"
