"""ToolWorkerPool: tool calls in worker processes answer exactly as ToolContext.call in-process
(per-episode state included), under concurrency from threads and asyncio, survive a killed worker,
and `serve.workers` runs a real server's calls there."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from arag.agent import ANSWERED
from arag.tools import ReadTracker
from arag.tools.failures import ToolInfrastructureError, checked
from arag.tools.hosting.worker_pool import ToolWorkerPool
from tests.support.tool_server import CALLS
from tests.serve.test_serve_documents import episode


@pytest.fixture(scope="module")
def pool(served_index):
    with ToolWorkerPool(served_index.path, workers=2) as pool:
        yield pool


def same(a, b) -> bool:
    return (a.tool, a.text, a.results, a.retrieved_tokens, a.error) == (b.tool, b.text, b.results, b.retrieved_tokens, b.error)


def test_every_tool_answers_as_in_process_with_the_episode_memory(pool, local_ctx):
    here, there = ReadTracker(), ReadTracker()
    for tool, args in CALLS:
        expected = local_ctx.call(tool, args, tracker=here)
        got = pool.call(tool, args, tracker=there)
        assert same(got, expected), tool
    # The last call re-read 1#0: the worker saw the tracker, and its reads came back into it.
    assert got.results[0].already_read and not got.results[1].already_read
    assert there.order == here.order == ["1#0", "1#1"]


def test_document_sessions_resolve_their_reference_ids_across_calls(pool, local_ctx):
    """AgenticRAG's search hands out ids that later find/open calls (on whichever worker) resolve."""
    served, local = episode(pool), episode(local_ctx)
    assert served.status == local.status == ANSWERED
    key = lambda e: [(c.name, c.text, c.error, c.chunk_ids, c.ref_ids, c.retrieved_tokens) for c in e.tool_calls]  # noqa: E731
    assert key(served) == key(local)
    assert served.tool_calls[2].text.startswith("[turn1search1]") and served.citations == local.citations


def test_concurrent_threads_and_tasks_get_their_own_answers(pool, local_ctx):
    calls = [c for c in CALLS if c[0] != "chunk_read"] * 8
    expected = [local_ctx.call(t, a).text for t, a in calls]
    with ThreadPoolExecutor(8) as threads:
        assert list(threads.map(lambda c: pool.call(*c).text, calls)) == expected

    async def gathered():
        return await asyncio.gather(*(pool.acall(t, a) for t, a in calls))

    assert [r.text for r in asyncio.run(gathered())] == expected


def test_a_lone_caller_keeps_the_worker_it_last_used(pool):
    # The worker that went idle last is handed out first, so one caller's calls stay on one warm worker.
    served: list[int] = []
    for worker in pool._all:
        send = worker.conn.send
        worker.conn.send = lambda message, pid=worker.process.pid, send=send: (served.append(pid), send(message))[1]
    try:
        for _ in range(3):
            pool.call("keyword_search", {"keywords": ["Teutberga"]})
        asyncio.run(pool.acall("keyword_search", {"keywords": ["Teutberga"]}))
    finally:
        for worker in pool._all:
            del worker.conn.send
    assert len(served) == 4 and len(set(served)) == 1


def test_a_cancelled_task_does_not_hand_its_answer_to_the_next_call(pool, local_ctx):
    slow = ("semantic_search", {"query": "Who was the mother of Lothair II?", "top_k": 2})
    quick = ("keyword_search", {"keywords": ["Teutberga"]})

    async def scenario():
        tasks = [asyncio.ensure_future(pool.acall(*slow)) for _ in range(4)]
        deadline = time.monotonic() + 30
        while pool._idle.qsize() and time.monotonic() < deadline:  # both workers running a slow call
            await asyncio.sleep(0.001)
        busy = pool._idle.qsize() == 0
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return busy, [await pool.acall(*quick) for _ in range(4)]

    busy, answers = asyncio.run(scenario())
    assert busy  # the cancelled calls were running in the workers
    assert all(a.text == local_ctx.call(*quick).text for a in answers)


def test_a_killed_worker_is_replaced_and_its_call_answers_an_internal_failure(served_index, local_ctx):
    with ToolWorkerPool(served_index.path, workers=1) as pool:
        (pid,) = pool.pids()
        os.kill(pid, signal.SIGKILL)  # out of memory, say: the next call finds it gone
        died = pool.call("keyword_search", {"keywords": ["Lothair II"]})
        assert died.error and "killed by signal 9" in died.text
        with pytest.raises(ToolInfrastructureError, match="keyword_search failed on its own: the tool worker process was killed by signal 9"):
            checked(died)  # not the model's to read: the episode fails
        assert pool.pids() and pool.pids() != [pid]
        after = pool.call("keyword_search", {"keywords": ["Lothair II"]})
        assert same(after, local_ctx.call("keyword_search", {"keywords": ["Lothair II"]}))
    with pytest.raises(RuntimeError, match="closed"):
        pool.call("keyword_search", {"keywords": ["x"]})


def test_bad_settings_are_named(tmp_path, served_index):
    with pytest.raises(RuntimeError, match=f"could not open index {tmp_path / 'none'}.*no index directory"):
        ToolWorkerPool(tmp_path / "none", workers=1)
    with pytest.raises(ValueError, match="workers must be at least 1"):
        ToolWorkerPool(served_index.path, workers=0)
    with pytest.raises(RuntimeError, match="unexpected keyword argument 'nprob'"):
        ToolWorkerPool(served_index.path, workers=1, nprob=3)
    from arag.serve.app import ServeSettings

    with pytest.raises(ValueError, match="serve.workers must be a whole number of at least 1"):
        ServeSettings.from_dict({"workers": 0})


def test_a_server_with_worker_processes_answers_as_in_process(served_index, local_ctx, tmp_path):
    pytest.importorskip("mcp", reason="the tool server needs the serve extra: pip install -e '.[serve]'")
    import httpx

    from arag.serve.tool_service import result_json
    from tests.support.tool_server import start_http_server, stop

    server = start_http_server(served_index.path, tmp_path / "workers.log", "serve.workers=2")
    try:
        assert httpx.get(f"{server.url}/index").json()["workers"] == 2
        tracker = ReadTracker()
        for tool, args in CALLS:
            response = httpx.post(f"{server.url}/tools/{tool}", json=args, headers={"X-Session-Id": "episode-w"}, timeout=60)
            assert response.status_code == 200, response.text
            assert response.json() == result_json(local_ctx.call(tool, args, tracker=tracker)), tool
        assert response.json()["results"][0]["already_read"]  # the session's reads, kept by the server
    finally:
        stop(server)
