"""What a larger PQ code on the same coarse centroids saves by taking each row's list from the earlier
code's lists (`ann.encode_part(..., lists=...)`) instead of searching the centroids again.

    python -m benchmarks.ann_reencode --index <dir>/index [--part 0] [--rows 100000] [--rounds 2]

On an index the pipeline built with an IVF ANN: one part's first `--rows` exact vectors (written to
a temporary shard as the pipeline writes one), encoded with the index's own trained quantizer
(`vectors/ann/trained.faiss`) on one FAISS thread, as a build's encoding task runs: **fresh** (the
coarse search of every row, `add_with_ids`) and **from lists** (each row's list read from the fresh
side's lists file, `ann.list_assignment`, then `ann.encode_part(..., lists=...)`: the reading is in the
time). The same rows, trained index and thread on both sides, alternated round by round (the first
round fresh first, the next from lists first); both sides' lists are checked to hold the same ids and
codes. Prints each round's seconds and the median ratio fresh / from lists.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import faiss
import numpy as np

from arag.index import ann
from arag.index.layout import PART_SHIFT, IndexLayout
from arag.index.vectors import build_shard, write_shard
from tests.support.ann_lists import list_entries


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", required=True, help="an index built by pipelines.index with an IVF ANN")
    ap.add_argument("--part", type=int, default=0)
    ap.add_argument("--rows", type=int, default=100_000, help="the part's first rows (0 = all)")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    layout = IndexLayout(Path(args.index))
    trained_file = ann.trained_path(layout.root)
    if not trained_file.exists():
        raise SystemExit(f"{args.index}: no {trained_file.relative_to(layout.root)} (an index whose manifest has an IVF ANN)")
    if not layout.vectors(args.part).exists():
        raise SystemExit(f"{args.index}: part {args.part} has no exact shard ({layout.vectors(args.part).relative_to(layout.root)})")
    faiss.omp_set_num_threads(1)  # as a build's encoding task (one per core)
    trained = ann.read_trained(trained_file)
    vectors = ann.map_flat_shard(layout.vectors(args.part))
    rows = len(vectors) if args.rows <= 0 else min(args.rows, len(vectors))
    with tempfile.TemporaryDirectory(prefix="arag-reencode-") as tmp:
        work = Path(tmp)
        shard = work / "shard.faiss"
        write_shard(build_shard(np.ascontiguousarray(vectors[:rows]), (np.int64(args.part) << PART_SHIFT) | np.arange(rows, dtype=np.int64)), shard)
        print(f"{args.index}: part {args.part}, {rows:,} of {len(vectors):,} rows ({vectors.shape[1]}-d), {faiss.extract_index_ivf(trained).nlist:,} lists, "
              "one FAISS thread", flush=True)

        def fresh() -> float:
            t = time.perf_counter()
            ann.encode_part(trained, shard, args.part, work / "fresh.ivf")
            return time.perf_counter() - t

        def from_lists() -> float:
            t = time.perf_counter()
            lists = ann.list_assignment(trained, work / "fresh.ivf", args.part, rows)
            ann.encode_part(trained, shard, args.part, work / "reused.ivf", lists=lists)
            return time.perf_counter() - t

        fresh()  # the lists the first from-lists round reads (and the page cache warm for both sides)
        times: dict[str, list[float]] = {"fresh": [], "from lists": []}
        for r in range(args.rounds):
            for name in (["fresh", "from lists"] if r % 2 == 0 else ["from lists", "fresh"]):
                times[name].append(fresh() if name == "fresh" else from_lists())
            ratio = times["fresh"][-1] / times["from lists"][-1]
            print(f"round {r + 1}: fresh {times['fresh'][-1]:.2f} s, from lists {times['from lists'][-1]:.2f} s, fresh / from lists {ratio:.1f}x", flush=True)
        same = list_entries(trained, work / "fresh.ivf") == list_entries(trained, work / "reused.ivf")
        ratios = [a / b for a, b in zip(times["fresh"], times["from lists"])]
        print(f"median over {args.rounds} rounds: fresh {statistics.median(times['fresh']):.2f} s, from lists {statistics.median(times['from lists']):.2f} s, "
              f"ratio {statistics.median(ratios):.1f}x; same ids and codes in every list: {same}")
        if not same:
            raise SystemExit("the two encodings differ")


if __name__ == "__main__":
    main()
