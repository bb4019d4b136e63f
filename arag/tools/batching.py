"""Micro-batching of query encoding: concurrent callers share one call of the encoder.

Encoding one short query costs nearly as much as encoding a few (the model's fixed cost per call
dominates), so when many episodes search at once, queries that arrive while the encoder is busy,
or within `window_s` of each other, are encoded as ONE batch.

A worker gathers a batch only while every other worker is busy: with a worker idle, the next
query is better encoded by that worker, at the same time on another core, than appended to this
batch (one stream encodes a batch of two in nearly twice the time of one). So a single caller,
or two, pay one hand-off to the worker thread and no window; under load, when queries queue up,
batches form.

`workers` batches are encoded at once (each by its own daemon thread, started on first use):
with a CPU encoder that runs one batch per core (the embedder's OpenVINO streams are
single-threaded), one worker would leave the other cores idle while two callers take turns;
with one worker per core, two callers' queries are encoded side by side. Callers block on a
future. An encoder error is raised in every caller of that batch.
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future
from typing import Callable

import numpy as np

Encoder = Callable[[list[str]], np.ndarray]


class BatchingEncoder:
    def __init__(self, encode: Encoder, max_batch: int = 64, window_s: float = 0.001, workers: int = 1):
        self._encode = encode
        self.max_batch = max_batch
        self.window_s = window_s
        self.workers = max(1, int(workers))
        self._queue: queue.SimpleQueue[tuple[str, Future] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._start = threading.Lock()  # guards the one-time start of the workers and the counters
        self._busy = 0  # workers encoding (or gathering) a batch now
        self.batches = 0  # encoder calls made (for tests and benchmarks)
        self.queries = 0

    def encode(self, query: str) -> np.ndarray:
        """The encoder's row for `query`, shape (d,)."""
        if not self._threads:
            with self._start:
                if not self._threads:
                    threads = [threading.Thread(target=self._run, name=f"query-encoder-{i}", daemon=True) for i in range(self.workers)]
                    for t in threads:
                        t.start()
                    self._threads = threads
        done: Future = Future()
        self._queue.put((query, done))
        return done.result()

    def close(self) -> None:
        threads, self._threads = self._threads, []
        for _ in threads:
            self._queue.put(None)  # one stop marker per worker
        for t in threads:
            t.join(timeout=5)

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            with self._start:
                self._busy += 1
                others_busy = self._busy == self.workers
            try:
                batch = self._gather(first) if others_busy else [first]
                if batch[-1] is None:  # this worker's stop marker: stop after this batch
                    batch.pop()
                    self._answer(batch)
                    return
                self._answer(batch)
            finally:
                with self._start:
                    self._busy -= 1

    def _gather(self, first: tuple[str, Future]) -> list:
        """`first` and what else is waiting or arrives within the window (up to max_batch); ends
        with None when a stop marker was met."""
        batch: list = [first]
        deadline = time.perf_counter() + self.window_s
        while len(batch) < self.max_batch:
            try:  # take everything already waiting, then wait out the window for more
                item = self._queue.get_nowait()
            except queue.Empty:
                left = deadline - time.perf_counter()
                if left <= 0:
                    break
                try:
                    item = self._queue.get(timeout=left)
                except queue.Empty:
                    break
            batch.append(item)
            if item is None:
                break
        return batch

    def _answer(self, batch: list[tuple[str, Future]]) -> None:
        try:
            vectors = np.asarray(self._encode([q for q, _ in batch]), dtype=np.float32)
            if vectors.ndim != 2 or vectors.shape[0] != len(batch):
                raise ValueError(f"query encoder returned shape {vectors.shape} for {len(batch)} queries")
        except BaseException as exc:  # every waiting caller gets the error
            for _, f in batch:
                f.set_exception(exc)
            return
        with self._start:
            self.batches += 1
            self.queries += len(batch)
        for i, (_, f) in enumerate(batch):
            f.set_result(vectors[i])
