"""Many callers on one ToolContext: the same answers as one at a time, and query encodings batched."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from arag.tools import ReadTracker, ToolContext
from arag.tools.hosting import batching
from arag.tools.hosting.batching import BatchingEncoder

from tests.support.tiny_index import fake_encode

CALLS = [
    ("keyword_search", {"keywords": ["Lothair II"], "top_k": 3}),
    ("keyword_search", {"keywords": ["aa", "tie"], "top_k": 5}),
    ("keyword_search", {"keywords": ["İ"]}),
    ("keyword_search", {"keywords": ["e"], "top_k": 20}),
    ("semantic_search", {"query": "queen of Lotharingia", "top_k": 3}),
    ("semantic_search", {"query": "a rocket launch", "top_k": 5}),
    ("semantic_search", {"query": "Greek road", "top_k": 2}),
    ("naive_embedding_search", {"query": "the river", "top_k": 2}),
    ("chunk_read", {"chunk_ids": ["0#1", "1#2", "nope"]}),
    ("chunk_read", {"chunk_ids": ["5#0"]}),
    ("keyword_search", {"keywords": ["x"], "top_k": 0}),  # an error answer
]


def answer(ctx: ToolContext, i: int) -> tuple:
    tool, args = CALLS[i % len(CALLS)]
    r = ctx.call(tool, args, tracker=ReadTracker(), full_text=(i // len(CALLS)) % 2 == 1)
    return r.text, r.to_json()


@pytest.fixture(scope="module")
def ctx(edge_index):
    with ToolContext(edge_index.path, encoder=fake_encode) as c:
        yield c


def test_threads_get_the_answers_of_sequential_calls(ctx):
    n = 8 * len(CALLS)
    expected = [answer(ctx, i) for i in range(n)]
    with ThreadPoolExecutor(max_workers=32) as pool:
        got = list(pool.map(lambda i: answer(ctx, i), range(n)))
    assert got == expected


def test_asyncio_callers_get_the_answers_of_sequential_calls(ctx):
    n = 4 * len(CALLS)
    expected = [answer(ctx, i) for i in range(n)]

    async def main():
        return await asyncio.gather(*(asyncio.to_thread(answer, ctx, i) for i in range(n)))

    assert asyncio.run(main()) == expected


def test_concurrent_queries_are_encoded_as_one_batch():
    calls: list[int] = []
    gate = threading.Event()

    def slow_encode(texts: list[str]) -> np.ndarray:
        calls.append(len(texts))
        gate.wait(60)  # the first batch is held until every caller has queued
        return fake_encode(texts)

    enc = BatchingEncoder(slow_encode, window_s=0.001)
    queries = [f"query number {i}" for i in range(9)]
    with ThreadPoolExecutor(max_workers=9) as pool:
        first = pool.submit(enc.encode, queries[0])
        while not calls:
            time.sleep(0.001)
        rest = [pool.submit(enc.encode, q) for q in queries[1:]]
        deadline = time.monotonic() + 30
        while len(enc._queue) < 8 and time.monotonic() < deadline:  # every caller queued, however slow the machine
            time.sleep(0.001)
        gate.set()
        vectors = [first.result()] + [f.result() for f in rest]
    assert calls == [1, 8]  # the 8 that arrived while the encoder was busy went in together
    assert np.array_equal(np.stack(vectors), fake_encode(queries))


def test_a_single_caller_is_not_delayed_and_errors_reach_every_caller(monkeypatch):
    waits = []
    monkeypatch.setattr(batching.time, "sleep", waits.append)  # the gathering window is the only wait
    enc = BatchingEncoder(fake_encode, window_s=60.0)  # a window a lone caller would notice
    for q in ("one", "two", "three"):
        assert np.array_equal(enc.encode(q), fake_encode([q])[0])
    assert waits == []  # alone, a caller never waits for others to join its batch
    assert enc.batches == 3 and enc.queries == 3
    monkeypatch.undo()

    def broken(texts):
        raise RuntimeError("model exploded")

    bad = BatchingEncoder(broken)
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = [pool.submit(bad.encode, str(i)) for i in range(4)]
    for f in futures:
        with pytest.raises(RuntimeError, match="model exploded"):
            f.result()


def test_many_callers_get_their_own_rows_with_at_most_one_batch_per_slot():
    active, most = [0], [0]
    lock = threading.Lock()

    def counting_encode(texts: list[str]) -> np.ndarray:
        with lock:
            active[0] += 1
            most[0] = max(most[0], active[0])
        time.sleep(0.002)
        with lock:
            active[0] -= 1
        if "fail" in texts:
            raise RuntimeError("bad batch")
        return fake_encode(texts)

    enc = BatchingEncoder(counting_encode, max_batch=5, window_s=0.001, workers=2)
    queries = [f"q{i % 37}" for i in range(400)]
    with ThreadPoolExecutor(max_workers=64) as pool:
        got = list(pool.map(enc.encode, queries))
        failed = pool.submit(enc.encode, "fail")
        with pytest.raises(RuntimeError, match="bad batch"):
            failed.result()
    assert np.array_equal(np.stack(got), fake_encode(queries))
    assert most[0] <= 2  # never more batches at once than slots
    assert enc.queries >= 400 and enc.batches < 400  # queued queries were batched (max 5 each)
    assert enc._free == 2 and not enc._queue  # every slot handed back, an error included


def test_sql_runs_on_a_cursor_per_thread(ctx):
    def titles(ids):
        return sorted(ctx.sql("SELECT chunk_id, title FROM chunks WHERE chunk_id IN (SELECT unnest($1::VARCHAR[]))", [ids]))

    with ThreadPoolExecutor(max_workers=8) as pool:
        got = list(pool.map(titles, [["0#0", "5#1"]] * 16))
    assert got == [[("0#0", "Teutberga"), ("5#1", "Tie")]] * 16


def test_with_a_slot_free_two_queries_are_encoded_side_by_side_on_the_callers_threads():
    started: list[int] = []
    encoding_threads: set[str] = set()
    gate = threading.Event()

    def slow_encode(texts: list[str]) -> np.ndarray:
        started.append(len(texts))
        encoding_threads.add(threading.current_thread().name)
        gate.wait(60)
        return fake_encode(texts)

    enc = BatchingEncoder(slow_encode, window_s=0.05, workers=2)
    with ThreadPoolExecutor(max_workers=12, thread_name_prefix="caller") as pool:
        first = [pool.submit(enc.encode, q) for q in ("one", "two")]
        deadline = time.perf_counter() + 5
        while len(started) < 2 and time.perf_counter() < deadline:
            time.sleep(0.001)
        assert started == [1, 1]  # both slots encode at once, each its own query
        rest = [pool.submit(enc.encode, f"query {i}") for i in range(8)]
        deadline = time.monotonic() + 30
        while len(enc._queue) < 8 and time.monotonic() < deadline:  # the 8 queued behind the busy slots
            time.sleep(0.001)
        gate.set()
        got = [f.result() for f in first + rest]
    # With both slots busy, the 8 queued queries went into fewer calls than queries.
    assert sum(started) == 10 and len(started) < 10
    assert np.array_equal(np.stack(got), fake_encode(["one", "two"] + [f"query {i}" for i in range(8)]))
    assert encoding_threads and all(name.startswith("caller") for name in encoding_threads)  # no thread of its own
    assert enc._free == 2 and not enc._queue  # every slot handed back


def test_acall_runs_on_a_bounded_pool_with_the_answers_of_call(edge_index):
    with ToolContext(edge_index.path, encoder=fake_encode, max_active=2) as ctx:
        n = 6 * len(CALLS)
        expected = [answer(ctx, i) for i in range(n)]
        threads: set[str] = set()

        async def one(i: int):
            tool, args = CALLS[i % len(CALLS)]
            r = await ctx.acall(tool, args, tracker=ReadTracker(), full_text=(i // len(CALLS)) % 2 == 1)
            return r.text, r.to_json()

        def spy(*a, **k):
            threads.add(threading.current_thread().name)
            return real(*a, **k)

        real, ctx.call = ctx.call, spy
        try:
            got = asyncio.run(_gather(one, n))
        finally:
            ctx.call = real
        assert got == expected
        assert 1 <= len(threads) <= 2 * ctx.max_active and all(t.startswith("arag-tools") for t in threads)


async def _gather(fn, n):
    return await asyncio.gather(*(fn(i) for i in range(n)))
