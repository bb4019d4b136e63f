"""`embedder.dtype` on this CPU: the index's embedder in float32 against the same embedder in a
reduced dtype (bfloat16: OpenVINO's bf16 on CPUs with AMX/AVX512-BF16), on sentences of a built index.

    python -m benchmarks.openvino_precision --index indexes/wiki [--n 4000] [--dtype bfloat16]

Each dtype runs in a fresh process: it loads the index's embedder spec with `dtype` replaced,
encodes the first `--n` sentences of part 0, and compares the vectors with the ones stored in the
index (min cosine). Prints sentences/s and the ratio to float32 measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _measure(index_dir: str, n: int, dtype: str) -> dict:
    import numpy as np
    import pyarrow.parquet as pq

    from dataclasses import replace

    from arag.index.embedding import SentenceEmbedder
    from arag.index.store import open_index
    from arag.index.vectors import stored_vectors

    index = open_index(index_dir)
    part = index.parts[0]
    table = pq.read_table(part.sentences, columns=["sentence_id", "text"]).slice(0, n)
    embedder = SentenceEmbedder(replace(index.embedder_spec, dtype=dtype))
    started = time.perf_counter()
    vectors = np.asarray(embedder.encode_documents(table["text"].to_pylist()), dtype=np.float32)
    seconds = time.perf_counter() - started
    stored = stored_vectors([part.vectors], table["sentence_id"].to_pylist())
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return {"dtype": embedder.precision, "backend": embedder.backend, "n": table.num_rows, "seconds": seconds,
            "min_cosine": float(np.sum(vectors * stored, axis=1).min())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", required=True, help="a built index (its embedder and stored vectors are the baseline)")
    ap.add_argument("--n", type=int, default=4000, help="sentences of part 0 to encode")
    ap.add_argument("--dtype", default="bfloat16", help="the embedder.dtype to compare with float32")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(_measure(args.index, args.n, args.worker)))
        return
    results = []
    for dtype in ("float32", args.dtype):
        cmd = [sys.executable, __file__, "--index", args.index, "--n", str(args.n), "--worker", dtype]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
        if proc.returncode != 0:
            sys.exit(f"{dtype} run failed:\n{proc.stderr[-3000:]}")
        results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    base = results[0]["n"] / results[0]["seconds"]
    for r in results:
        rate = r["n"] / r["seconds"]
        print(f"{r['dtype']:>8s} ({r['backend']}): {rate:7.1f} sentences/s  {rate / base:4.2f}x float32   min cosine to the index {r['min_cosine']:.6f}")


if __name__ == "__main__":
    main()
