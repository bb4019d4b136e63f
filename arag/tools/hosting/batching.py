"""Micro-batching of query encoding: concurrent callers share one call of the encoder.

`workers` encoder slots (one per core) and no encoder threads: a caller that finds a slot free encodes
on its own thread (a hand-off to an encoder thread made two callers wait for each other's GIL time:
benchmarks/tools_concurrency.py); one that finds every slot busy queues, and the next slot freed encodes
the queue (up to `max_batch`; under load it waits up to `window_s`) as one batch. An encoder error is
raised in every caller of its batch (docs/tools.md, "Concurrency").
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from typing import Callable

import numpy as np

# Encodes queries into unit float32 vectors of the index's dimension, shape (n, d).
Encoder = Callable[[list[str]], np.ndarray]

class _Waiter:
    """One caller's query, and how it ends: an answer (`future`: a vector or an error), or the hand-over of a slot."""

    __slots__ = ("query", "taken", "promoted", "future", "wake")

    def __init__(self, query: str):
        self.query = query
        self.taken = False  # in a batch being encoded (by any slot holder)
        self.promoted = False  # a slot was handed to this caller
        self.future: Future[np.ndarray] = Future()
        self.wake = threading.Event()  # set on the answer or on promotion

    def answer(self, vector: np.ndarray | None, error: BaseException | None) -> None:
        if error is None:
            self.future.set_result(vector)
        else:
            self.future.set_exception(error)
        self.wake.set()


class BatchingEncoder:
    def __init__(self, encode: Encoder, max_batch: int = 64, window_s: float = 0.001, workers: int = 1):
        self._encode = encode
        self.max_batch = max(1, int(max_batch))
        self.window_s = window_s
        self.workers = max(1, int(workers))
        self._lock = threading.Lock()  # guards the queue, the slots and the counters
        self._queue: list[_Waiter] = []  # FIFO of queries not yet in a batch
        self._free = self.workers  # encoder slots nobody holds
        self.batches = 0  # encoder calls made (for tests and benchmarks)
        self.queries = 0

    def encode(self, query: str) -> np.ndarray:
        """The encoder's row for `query`, shape (d,)."""
        me = _Waiter(query)
        with self._lock:
            self._queue.append(me)
            holds_slot = self._free > 0
            if holds_slot:
                self._free -= 1
        if not holds_slot:
            me.wake.wait()  # answered, or handed a slot
            holds_slot = me.promoted
        if holds_slot:
            try:
                while self._encode_next(me):
                    pass
            finally:
                self._hand_on_slot()
        return me.future.result()  # taken into another holder's batch: waits for its answer

    def _encode_next(self, me: _Waiter) -> bool:
        """Encode the next batch from the queue while `me` is still queued; False once it is not."""
        with self._lock:
            if me.taken:
                return False
            gather = self.window_s > 0 and self._free == 0 and 1 < len(self._queue) < self.max_batch
        if gather:  # under load: let more queries join this batch
            time.sleep(self.window_s)
        with self._lock:
            if me.taken:  # another holder took it meanwhile
                return False
            batch, self._queue = self._queue[: self.max_batch], self._queue[self.max_batch :]
            for w in batch:
                w.taken = True
        self._answer(batch)
        return True

    def _hand_on_slot(self) -> None:
        """Give this slot to the first queued caller not yet handed one; else free it."""
        with self._lock:
            for w in self._queue:
                if not w.promoted:
                    w.promoted = True
                    w.wake.set()
                    return
            self._free += 1

    def _answer(self, batch: list[_Waiter]) -> None:
        try:
            vectors = np.asarray(self._encode([w.query for w in batch]), dtype=np.float32)
            if vectors.ndim != 2 or vectors.shape[0] != len(batch):
                raise ValueError(f"query encoder returned shape {vectors.shape} for {len(batch)} queries")
        except BaseException as exc:  # every waiting caller gets the error
            for w in batch:
                w.answer(None, exc)
            return
        with self._lock:
            self.batches += 1
            self.queries += len(batch)
        for i, w in enumerate(batch):
            w.answer(vectors[i], None)
