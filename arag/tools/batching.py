"""Micro-batching of query encoding: concurrent callers share one call of the encoder.

Encoding one short query costs nearly as much as encoding a few (the model's fixed cost per call
dominates), so when many episodes search at once, queries that arrive while the encoder is busy,
or within `window_s` of each other, are encoded as ONE batch. A single caller pays one hand-off
to the worker thread plus the window (1 ms by default).

The worker is a daemon thread started on first use; callers block on a future. An encoder error
is raised in every caller of that batch.
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
    def __init__(self, encode: Encoder, max_batch: int = 64, window_s: float = 0.001):
        self._encode = encode
        self.max_batch = max_batch
        self.window_s = window_s
        self._queue: queue.SimpleQueue[tuple[str, Future] | None] = queue.SimpleQueue()
        self._worker: threading.Thread | None = None
        self._start = threading.Lock()  # guards only the one-time start of the worker
        self.batches = 0  # encoder calls made (for tests and benchmarks)
        self.queries = 0

    def encode(self, query: str) -> np.ndarray:
        """The encoder's row for `query`, shape (d,)."""
        if self._worker is None:
            with self._start:
                if self._worker is None:
                    self._worker = threading.Thread(target=self._run, name="query-encoder", daemon=True)
                    self._worker.start()
        done: Future = Future()
        self._queue.put((query, done))
        return done.result()

    def close(self) -> None:
        if self._worker is not None:
            self._queue.put(None)
            self._worker.join(timeout=5)
            self._worker = None

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
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
                if item is None:
                    self._queue.put(None)  # stop after this batch
                    break
                batch.append(item)
            self._answer(batch)

    def _answer(self, batch: list[tuple[str, Future]]) -> None:
        try:
            vectors = np.asarray(self._encode([q for q, _ in batch]), dtype=np.float32)
            if vectors.ndim != 2 or vectors.shape[0] != len(batch):
                raise ValueError(f"query encoder returned shape {vectors.shape} for {len(batch)} queries")
        except BaseException as exc:  # every waiting caller gets the error
            for _, f in batch:
                f.set_exception(exc)
            return
        self.batches += 1
        self.queries += len(batch)
        for i, (_, f) in enumerate(batch):
            f.set_result(vectors[i])
