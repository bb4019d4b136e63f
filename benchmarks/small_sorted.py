"""numpy's sorted look-ups against arag.small_sorted's, on one thread and on two.

    python -m benchmarks.small_sorted [--seconds 1.0]

For each operation a tool call makes on a few values (a look-up of 2 rows in a 1M-row sorted
array, the distinct values of 5, the best-first order of 25 scores), the same inputs go through
numpy and through arag.small_sorted, each in a loop on 1 thread and then on 2 threads sharing the
process. Printed: calls/s on 1 thread, on 2, and "2 vs 1" (2-thread throughput over 1-thread,
same inputs, same run). numpy's calls release the GIL however small; with two threads each
release hands the GIL to the other thread, so "2 vs 1" falls below 1. The machine ceiling (2
threads of GIL-free hashing against 1) says what 2 threads could reach at that moment.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import threading
import time
from pathlib import Path
from typing import Callable

import numpy as np


from arag.small_sorted import best_first, distinct, positions


def rate(fn: Callable[[], object], threads: int, seconds: float) -> float:
    """Calls per second of `fn` looped on `threads` threads for about `seconds`."""
    n = 1
    t = time.perf_counter()
    while time.perf_counter() - t < seconds / 10:  # size the loop: ~a tenth of the time per thread
        for _ in range(n):
            fn()
        n *= 2
    reps = n * 5

    def loop() -> None:
        for _ in range(reps):
            fn()

    workers = [threading.Thread(target=loop) for _ in range(threads)]
    t = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return threads * reps / (time.perf_counter() - t)


def machine_ceiling(seconds: float) -> float:
    data = os.urandom(1 << 20)
    return rate(lambda: hashlib.sha256(data).digest(), 2, seconds) / rate(lambda: hashlib.sha256(data).digest(), 1, seconds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=1.0, help="about how long each measurement loops")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    starts = np.sort(rng.integers(0, 1 << 40, size=1_000_000))  # like a part's sentence starts
    rows = np.sort(rng.choice(starts, size=2))
    few = rng.integers(0, 4, size=5)  # like the parts of 5 chunks
    scores = rng.random(25).astype(np.float32)
    ids = rng.permutation(1000)[:25].astype(np.int64)
    cases = [
        ("look up 2 rows in 1M", lambda: np.searchsorted(starts, rows, side="right"), lambda: positions(starts, rows, side="right")),
        ("distinct of 5", lambda: np.unique(few).tolist(), lambda: distinct(few)),
        ("best first of 25", lambda: np.lexsort((ids, -scores)), lambda: best_first(scores, ids)),
    ]
    print(f"machine ceiling now: {machine_ceiling(args.seconds):.2f}x (2 threads of GIL-free hashing against 1)")
    print(f"{'operation':<22}{'by':<14}{'1 thread/s':>12}{'2 threads/s':>13}{'2 vs 1':>8}")
    for name, numpy_fn, small_fn in cases:
        for by, fn in (("numpy", numpy_fn), ("small_sorted", small_fn)):
            one, two = rate(fn, 1, args.seconds), rate(fn, 2, args.seconds)
            print(f"{name:<22}{by:<14}{one:>12,.0f}{two:>13,.0f}{two / one:>7.2f}x", flush=True)


if __name__ == "__main__":
    main()
