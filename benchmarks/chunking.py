"""Chunking cost: packed windows (index.chunking=packed) against per-document chunking, same documents,
same process, same settings otherwise (chunk_tokens, sentence splitter, tokenizer).

Reads a benchmark corpus the way its config does (title line prepended where the config says so),
chunks it both ways a few times, and prints the best time of each, the ratio packed / per_document,
and what each produced (chunks, tokens per chunk, documents per chunk). Chunking runs inside the
index build's phase 1, one part per task; this measures it alone, without Parquet or embedding.

    python -m benchmarks.chunking                                   # 2wikimultihopqa, 1000 / 100 (its config's)
    python -m benchmarks.chunking --corpus graphrag-bench-medical
    python -m benchmarks.chunking --chunk-tokens 500 --chunk-overlap 50
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from arag.corpus.readers import plan_parts, read_part
from arag.corpus.documents import Document
from arag.index.chunking import chunk_document
from arag.index.packing import COVERED_SEPARATOR, WindowPacker
from benchmarks.pipeline_config import compose_pipeline

REPO = Path(__file__).resolve().parents[1]


def documents(corpus: str, data_dir: str) -> tuple[list[Document], int]:
    """The corpus's documents and its config's chunk_tokens."""
    from pipelines.index import settings_from_config

    cfg = compose_pipeline("index", [f"+corpus={corpus}", f"data_dir={data_dir}"])
    settings = settings_from_config(cfg)
    spec = settings.corpus
    return [d for part in plan_parts(spec) for d in read_part(spec, part) if isinstance(d, Document)], settings.chunking.chunk_tokens


def per_document(docs: list[Document], chunk_tokens: int) -> list:
    return [c for d in docs for c in chunk_document(d, chunk_tokens)]


def packed(docs: list[Document], chunk_tokens: int, chunk_overlap: int) -> list:
    packer = WindowPacker(0, chunk_tokens, chunk_overlap)
    out = []
    for d in docs:
        out += packer.add(d) or []
    return out + packer.finish()


def best_of(repeats: int, fn, *args) -> tuple[float, list]:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn(*args)
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default="2wikimultihopqa")
    ap.add_argument("--data-dir", default=os.environ.get("ARAG_DATA_DIR") or str(REPO.parent / "shared" / "data"))
    ap.add_argument("--chunk-tokens", type=int, default=None, help="default: the corpus config's")
    ap.add_argument("--chunk-overlap", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    docs, config_tokens = documents(args.corpus, args.data_dir)
    args.chunk_tokens = args.chunk_tokens or config_tokens
    per_doc_s, per_doc = best_of(args.repeats, per_document, docs, args.chunk_tokens)
    packed_s, windows = best_of(args.repeats, packed, docs, args.chunk_tokens, args.chunk_overlap)
    print(f"{args.corpus}: {len(docs)} documents, chunk_tokens={args.chunk_tokens}, chunk_overlap={args.chunk_overlap} (packed), best of {args.repeats}, load average {os.getloadavg()[0]:.1f}")
    for name, seconds, chunks in (("per_document", per_doc_s, per_doc), ("packed", packed_s, windows)):
        tokens = [c.n_tokens for c in chunks]
        docs_per = [len(c.doc_id.split(COVERED_SEPARATOR)) for c in chunks]
        print(
            f"  {name:12s} {seconds:7.2f} s  {len(docs) / seconds:8.0f} documents/s  {len(chunks):6d} chunks  "
            f"tokens/chunk mean {statistics.mean(tokens):6.1f} median {statistics.median(tokens):6.0f} max {max(tokens):5d}  documents/chunk mean {statistics.mean(docs_per):.1f}"
        )
    print(f"  ratio packed / per_document time: {packed_s / per_doc_s:.2f}")


if __name__ == "__main__":
    main()
