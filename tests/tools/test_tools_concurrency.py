"""Many callers on one ToolContext: the same answers as one at a time, and query encodings batched."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from arag.tools import ReadTracker, ToolContext
from arag.tools.batching import BatchingEncoder

from conftest import fake_encode

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
        gate.wait(5)  # the first batch is held until every caller has queued
        return fake_encode(texts)

    enc = BatchingEncoder(slow_encode, window_s=0.001)
    queries = [f"query number {i}" for i in range(9)]
    with ThreadPoolExecutor(max_workers=9) as pool:
        first = pool.submit(enc.encode, queries[0])
        while not calls:
            time.sleep(0.001)
        rest = [pool.submit(enc.encode, q) for q in queries[1:]]
        time.sleep(0.05)
        gate.set()
        vectors = [first.result()] + [f.result() for f in rest]
    assert calls == [1, 8]  # the 8 that arrived while the encoder was busy went in together
    assert np.array_equal(np.stack(vectors), fake_encode(queries))
    enc.close()


def test_a_single_caller_is_not_delayed_and_errors_reach_every_caller():
    enc = BatchingEncoder(fake_encode, window_s=0.001)
    for q in ("one", "two", "three"):
        t = time.perf_counter()
        assert np.array_equal(enc.encode(q), fake_encode([q])[0])
        assert time.perf_counter() - t < 0.5
    assert enc.batches == 3 and enc.queries == 3

    def broken(texts):
        raise RuntimeError("model exploded")

    bad = BatchingEncoder(broken)
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = [pool.submit(bad.encode, str(i)) for i in range(4)]
    for f in futures:
        with pytest.raises(RuntimeError, match="model exploded"):
            f.result()
    enc.close()
    bad.close()


def test_sql_runs_on_a_cursor_per_thread(ctx):
    def titles(ids):
        return sorted(ctx.sql("SELECT chunk_id, title FROM chunks WHERE chunk_id IN (SELECT unnest($1::VARCHAR[]))", [ids]))

    with ThreadPoolExecutor(max_workers=8) as pool:
        got = list(pool.map(titles, [["0#0", "5#1"]] * 16))
    assert got == [[("0#0", "Teutberga"), ("5#1", "Tie")]] * 16
