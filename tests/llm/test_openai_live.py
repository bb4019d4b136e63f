"""The OpenAI backend against a real local OpenAI-compatible server: llama.cpp's (llama-cpp-python's
`llama_cpp.server`), on 127.0.0.1 only, serving the embedded GGUF model. Slow."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from arag.agent import ANSWERED, Agent, AgentConfig
from arag.llm.models import MODELS, ModelUnavailable, ensure_model
from arag.methods import load_method

pytest.importorskip("httpx")
pytest.importorskip("llama_cpp.server.app", reason="needs llama-cpp-python[server]")

pytestmark = pytest.mark.slow


def smallest_model():
    for name in ("qwen2.5-coder-0.5b-instruct-q4", "qwen2.5-coder-1.5b-instruct"):
        try:
            return ensure_model(name)
        except ModelUnavailable:
            continue
    pytest.skip(f"no embedded model installed ({', '.join(MODELS)})")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path_factory.mktemp("server") / "server.log"
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(smallest_model()), "--model_alias", "local", "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "OPENAI_API_KEY": ""})
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 300
        while True:
            if proc.poll() is not None:
                pytest.fail(f"server exited: {log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"server did not start: {log.read_text()[-2000:]}")
            time.sleep(1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def backend(url, **kw):
    from arag.llm.openai import OpenAIBackend

    return OpenAIBackend("local", base_url=url, api_key_env=None, json_mode="json_object", max_tokens=160, timeout_s=600, max_concurrency=1, **kw)


def test_json_actions_episode(server, agent_ctx):
    agent = Agent(backend(server), load_method("arag_full"), agent_ctx, protocol="json", config=AgentConfig(max_steps=3, llm_attempts=2))
    ep = agent.run("When did Lothair II's mother die?")
    assert ep.status == ANSWERED, ep.failure
    assert ep.invalid_replies == 0, [m.raw for m in ep.model_calls]  # the server enforced the schema
    assert all(m.prompt_tokens and m.completion_tokens for m in ep.model_calls)


def test_plain_answer_native(server):
    ep = Agent(backend(server), load_method("direct"), protocol="native", config=AgentConfig(max_steps=1, llm_attempts=2)).run("What is the capital of France?")
    assert ep.status == ANSWERED and ep.answer


def test_unreachable_server_fails_the_episode():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once the socket is closed
    cfg = AgentConfig(max_steps=1, llm_attempts=2, backoff_initial_s=0, backoff_max_s=0, backoff_jitter_s=0)
    ep = Agent(backend(f"http://127.0.0.1:{port}/v1"), load_method("direct"), protocol="native", config=cfg).run("q?")
    assert ep.status == "failed" and "connection error" in ep.failure and ep.model_calls[0].attempts == 2
