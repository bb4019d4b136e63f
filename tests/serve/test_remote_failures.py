"""Failures of the infrastructure are failures: what RemoteTools raises (ToolServerError, a
ToolInfrastructureError) and what it hands to the model, on answers made up by a mock transport,
then with a real tool server stopped in the middle of an agent's episode."""

from __future__ import annotations

import json
import re

import httpx
import pytest

from arag.serve.client import RemoteTools, ToolServerError
from arag.tools.failures import ToolInfrastructureError

URL = "http://10.1.2.3:8765"
INFO = {"fingerprint": "fp", "tools": ["keyword_search", "chunk_read"], "num_chunks": 1, "retrieved_tokens_tokenizer": "o200k_base", "result_format_params": ["snippets_per_chunk", "result_titles"]}
REFUSAL = {"tool": "keyword_search", "text": "Error in keyword_search: keywords must be a list of strings", "results": [], "retrieved_tokens": 0, "error": "keywords must be a list of strings", "details": {}}


def remote(*answers, retries: int = 2) -> tuple[RemoteTools, list[httpx.Request]]:
    """A RemoteTools whose POSTs get `answers` in turn (a response, or an exception raised)."""
    sent: list[httpx.Request] = []
    queue = list(answers)

    def handle(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, json=INFO)
        sent.append(request)
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    return RemoteTools(URL, retries=retries, backoff_s=0.0, transport=httpx.MockTransport(handle)), sent


def tool_body(**fields) -> dict:
    return {"tool": "keyword_search", "text": "", "results": [], "retrieved_tokens": 0, "error": None, "details": {}, **fields}


def refused(request_error: type[httpx.TransportError]) -> httpx.TransportError:
    return request_error(f"[Errno 111] Connection refused ({URL})")


@pytest.mark.parametrize(
    "answer, posts, message",
    [
        (refused(httpx.ConnectError), 3, r"tool server \(index.url\) unreachable after 3 attempt\(s\): POST /tools/keyword_search \(ConnectError: \[Errno 111\] Connection refused \(the tool server\)\)"),
        (refused(httpx.ConnectTimeout), 3, r"unreachable after 3 attempt\(s\)"),
        (httpx.Response(503, json={"error": "overloaded"}), 3, r"answered 503 after 3 attempt\(s\): overloaded"),
        (httpx.Response(502, text="bad gateway"), 3, r"answered 502 after 3 attempt\(s\): bad gateway"),
        (httpx.Response(429, json={"error": "slow down"}), 3, "answered 429 after 3 attempt"),
        # Reached the server: never sent twice (a chunk_read would be marked read twice).
        (httpx.ReadTimeout("timed out"), 1, r"POST /tools/keyword_search failed \(ReadTimeout"),
        (httpx.RemoteProtocolError("Server disconnected without sending a response."), 1, "RemoteProtocolError"),
        (httpx.Response(500, json=tool_body(text="Error in keyword_search: internal error (OSError: disk gone)", error="internal error (OSError: disk gone)")), 1, r"keyword_search failed on the server: internal error \(OSError: disk gone\)"),
        (httpx.Response(500, text="Internal Server Error"), 1, "answered 500 without a tool result"),
        (httpx.Response(504, text="gateway timeout"), 1, "answered 504: gateway timeout"),
        (httpx.Response(401, json={"error": "unauthorized"}), 1, "answered 401: unauthorized"),
        (httpx.Response(400, json={"error": "x-session-id header: too long"}), 1, "answered 400 without a tool result"),
        (httpx.Response(200, json={"unexpected": True}), 1, "answered 200 without a tool result"),
    ],
)
def test_an_outage_raises_and_never_becomes_a_tool_answer(answer, posts, message):
    tools, sent = remote(answer)
    with pytest.raises(ToolServerError, match=message) as caught:
        tools.call("keyword_search", {"keywords": ["x"]})
    assert isinstance(caught.value, ToolInfrastructureError)
    assert len(sent) == posts
    assert URL not in str(caught.value) and "10.1.2.3" not in str(caught.value)  # the setting is named, not the address


def test_a_request_turned_away_then_served_is_answered():
    tools, sent = remote(httpx.Response(503, json={"error": "busy"}), httpx.Response(200, json=tool_body(text="found")))
    assert tools.call("keyword_search", {"keywords": ["x"]}).text == "found" and len(sent) == 2


def test_a_refusal_of_the_arguments_reaches_the_model_without_the_address():
    tools, _ = remote(httpx.Response(400, json={**REFUSAL, "text": REFUSAL["text"] + f" (server {URL}, host 10.1.2.3:8765)"}))
    result = tools.call("keyword_search", {"keywords": "x"})
    assert result.error and result.text.startswith("Error in keyword_search: keywords must be a list")
    assert "10.1.2.3" not in result.text and "the tool server" in result.text
    too_large, _ = remote(httpx.Response(413, json={"error": "request body too large: this server accepts at most 4096 bytes (serve.max_request_bytes)"}))
    result = too_large.call("keyword_search", {"keywords": ["x" * 5000]})
    assert result.error and "at most 4096 bytes" in result.text


def test_opening_names_the_address_for_the_operator():
    def handle(request):
        raise httpx.ConnectError("[Errno 111] Connection refused")

    with pytest.raises(ToolServerError, match=f"tool server {URL} unreachable after 2 attempt"):
        RemoteTools(URL, retries=1, backoff_s=0.0, transport=httpx.MockTransport(handle))


@pytest.mark.parametrize("unlike, fragment", [
    ({"retrieved_tokens_tokenizer": None}, "counts retrieved tokens with an older tokenizer (cl100k_base), not o200k_base"),
    ({"retrieved_tokens_tokenizer": "cl100k_base"}, "counts retrieved tokens with cl100k_base"),
    ({"result_format_params": ["snippets_per_chunk"]}, "does not take the result-format parameter(s) result_titles"),
])
def test_a_server_that_would_count_or_show_results_otherwise_is_refused(unlike, fragment):
    """An older server would ignore the method's result format or count retrieved tokens in
    cl100k_base: the run would silently differ from one over the same index in-process."""
    info = {k: v for k, v in {**INFO, **unlike}.items() if v is not None}
    with pytest.raises(ToolServerError, match=re.escape(fragment)):
        RemoteTools(URL, retries=0, transport=httpx.MockTransport(lambda request: httpx.Response(200, json=info)))


def test_every_call_carries_the_methods_result_format():
    from arag.tools.base import ResultFormat

    tools, sent = remote(httpx.Response(200, json=tool_body()))
    tools.call("keyword_search", {"keywords": ["x"]})
    tools.call("keyword_search", {"keywords": ["x"]}, result_format=ResultFormat(snippets_per_chunk=None, result_titles=True))
    assert [dict(r.url.params) for r in sent] == [
        {"full_text": "false", "snippets_per_chunk": "5", "result_titles": "false"},
        {"full_text": "false", "snippets_per_chunk": "all", "result_titles": "true"},
    ]


# ---- a real server, stopped in the middle of an episode ------------------------------------------


@pytest.mark.slow
def test_a_server_stopped_mid_episode_fails_the_episode_and_the_model_never_sees_why(served_index, tmp_path):
    """Step 1 searches, step 2's bad arguments are refused (the model reads the refusal), then the
    server stops; step 3's chunk_read cannot reach it: the episode fails with the cause, no answer
    and no forced one, and nothing the model was shown names the server."""
    pytest.importorskip("mcp", reason="the tool server needs the serve extra: pip install -e '.[serve]'")
    from arag.agent import Agent, AgentConfig
    from arag.llm.scripted import ScriptedBackend
    from arag.methods import load_method
    from tests.support.tool_server import start_http_server, stop

    server = start_http_server(served_index.path, tmp_path / "stopped.log")
    port = server.url.rsplit(":", 1)[1]

    class StopsTheServer(ScriptedBackend):
        async def acomplete(self, messages, **kwargs):
            if len(self.requests) == 2:
                stop(server)
            return await super().acomplete(messages, **kwargs)

    script = [
        {"tool": "keyword_search", "arguments": {"keywords": ["Lothair"]}},
        {"tool": "keyword_search", "arguments": {"keywords": "Lothair"}},
        {"tool": "chunk_read", "arguments": {"chunk_ids": ["1#0"]}},
        {"answer": "20 March 851"},
    ]
    backend = StopsTheServer(script)
    try:
        with RemoteTools(server.url, retries=2, backoff_s=0.0) as tools:
            fast = {"backoff_initial_s": 0.0, "backoff_max_s": 0.0, "backoff_jitter_s": 0.0}
            episode = Agent(backend, load_method("arag_full"), tools, protocol="json", config=AgentConfig(max_steps=6, **fast)).run("When did Lothair II's mother die?")
    finally:
        if server.process.poll() is None:
            stop(server)
    assert episode.status == "failed" and episode.answer is None and not episode.forced
    assert episode.failure.startswith("step 3: the chunk_read call failed: tool server (index.url) unreachable after 3 attempt(s)")
    assert [(c.name, bool(c.error)) for c in episode.tool_calls] == [("keyword_search", False), ("keyword_search", True), ("chunk_read", True)]
    assert episode.tool_calls[2].text == ""  # recorded for the operator, shown to nobody
    shown = [m["content"] or "" for m in episode.messages]
    assert any("keywords must be a list of strings" in text for text in shown)  # the refusal reached the model
    assert len(backend.requests) == 3 and all("unreachable" not in m.content for m in backend.requests[-1].messages)
    stored = json.dumps(episode.to_json())
    assert server.url not in stored and f"127.0.0.1:{port}" not in stored and f":{port}" not in stored


@pytest.mark.slow
def test_a_worker_lost_on_the_server_is_a_failure_not_an_answer(served_index, tmp_path):
    """serve.workers=2, both worker processes killed: the call that finds its worker gone answers
    500 (an internal failure), which RemoteTools raises instead of handing it to the model."""
    pytest.importorskip("mcp", reason="the tool server needs the serve extra: pip install -e '.[serve]'")
    import os
    import signal

    import psutil

    from tests.support.tool_server import start_http_server, stop

    server = start_http_server(served_index.path, tmp_path / "workers.log", "serve.workers=2", "serve.preload=false")
    try:
        workers = [p for p in psutil.Process(server.process.pid).children() if "arag.tools.hosting.worker_pool" in " ".join(p.cmdline())]
        assert len(workers) == 2
        for worker in workers:
            os.kill(worker.pid, signal.SIGKILL)
        psutil.wait_procs(workers, timeout=30)
        with RemoteTools(server.url, retries=0) as tools:
            with pytest.raises(ToolServerError, match=r"keyword_search failed on the server: the tool worker process was killed by signal 9"):
                tools.call("keyword_search", {"keywords": ["Lothair II"]})
    finally:
        stop(server)
