"""keyword_search with each keyword counted on its own and costly keywords' counts remembered
(arag.index.keyword.counts), against scoring every keyword on the union of all keywords'
candidates with nothing remembered (how keyword_top worked before), on a real index.

    python -m benchmarks.keyword_recurring --index outputs/rehearsal/index [--questions Q.jsonl] [--queries 100] [--no-reference]
    python -m benchmarks.keyword_recurring --index /tmp/kw-449k --generate 449324 [--parts 98] [--sentences-per-chunk 21]

`--generate N` first writes, where --index points and nothing is there yet, a keyword-only index of
N chunks shaped like the full-size rehearsal's (449,324 chunks in 98 parts at 10M sentences, its
corpus planned at `corpus.part_size_mb` 16; benchmarks/keyword_parts.py merges them into fewer): each
chunk `--sentences-per-chunk` sentences drawn from a pool of the rehearsal's sources
(benchmarks/rehearsal_corpus.py: 2WikiMultiHopQA's passages first, then GraphRAG-Bench medical and
novel, then the Wikipedia sample; cut by the pipeline's sentence splitter; the first `--pool`
sentences) plus one of its own (tests/support/synthetic_index.py), and builds its tools caches as
the pipeline's phase 1 does, printing the build time; the rehearsal's index itself needs a 10M-sentence
embedding run.

The keyword lists are what the rehearsal's simulated agent gives (tests/support/agent_policy.py
`keywords_of`: the question's names and titles, one relation word) for the first --queries 2Wiki
dev questions. Same queries, same process, same page cache on both sides: a first pass of the
baseline, not timed, brings the candidates' text into the OS page cache; then
  * baseline: every keyword scored on the union of the call's candidates, nothing remembered;
  * first time asked: the tool with an empty memory, each question once (the memory fills as
    relation words recur across questions, which is what it is for);
  * asked again: the same questions again (every costly keyword remembered: the ceiling, reached
    when the same questions come back, as in the rehearsal's repeated dev questions).
Every query's top 5 (chunk, score) must be identical on all sides and to the reference definition
(tests/support/tools_reference.py: a Python loop over every chunk's lowered text; --no-reference
skips it, which holds every chunk text in memory). Prints p50/p95/mean per side,
the baseline's mean over each side's mean, and the queries' five keywords slowest to count with
nothing remembered (the time, their candidate chunks, the chunks holding them), and a digest of
the first-time answers (`answers_sha1`: the same chunks in another part layout must give the same).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]

from arag.index.store import open_index
from arag.tools import ToolContext
from arag.index.keyword.counts import KeywordCounts
from arag.tools.index_cache import top_pairs
from benchmarks.code_versions import Code
from tests.support import tools_reference as reference
from tests.support.agent_policy import keywords_of
from tests.support.synthetic_index import iter_chunk_texts, write_synthetic_index

TOP_K = 5


def union_top(store, keywords: list[str], top_k: int) -> list[tuple[int, int]]:
    """The baseline: every term scored on the union of the keywords' candidates, per part."""
    terms = [(k.lower(), len(k)) for k in keywords]
    distinct = list(dict.fromkeys(t for t, _ in terms))
    ords, scores = [], []
    for w, part in enumerate(store.parts):
        if part.num_chunks == 0:
            continue
        rows = part.candidate_rows(distinct)
        if len(rows) == 0:
            continue
        s = part.keyword_scores(rows, terms)
        hit = s > 0
        ords.append(rows[hit] + store.chunk_offsets[w])
        scores.append(s[hit])
    if not ords:
        return []
    return top_pairs(np.concatenate(ords), np.concatenate(scores), top_k)


def timed(fn, queries: list[list[str]]) -> tuple[list[float], list]:
    latencies, results = [], []
    for kws in queries:
        t = time.perf_counter()
        results.append(fn(kws))
        latencies.append(time.perf_counter() - t)
    return latencies, results


def summary(latencies: list[float]) -> dict[str, float]:
    s = sorted(latencies)
    return {"p50_ms": round(1e3 * s[len(s) // 2], 1), "p95_ms": round(1e3 * s[min(len(s) - 1, int(0.95 * len(s)))], 1), "mean_ms": round(1e3 * statistics.mean(s), 1)}


def costliest(store, queries: list[list[str]], n: int = 5) -> list[dict[str, Any]]:
    """The `n` keywords of the queries slowest to count with nothing remembered: the time, their
    candidate chunks (texts read for a keyword with separators; the chunks holding a word) and the
    chunks holding them."""
    store.keyword_counts = KeywordCounts(budget_bytes=0)
    timed_counts = []
    for k in sorted({k.lower() for kws in queries for k in kws}):
        t = time.perf_counter()
        ords, _ = store.keyword_occurrences(k)
        timed_counts.append((time.perf_counter() - t, k, len(ords)))
    return [{"keyword": k, "count_ms": round(1e3 * s, 1), "candidates": sum(len(p.candidate_rows([k])) for p in store.parts if p.num_chunks), "chunks": chunks}
            for s, k, chunks in sorted(timed_counts, reverse=True)[:n]]


def rehearsal_pool(data_dir: Path, limit: int) -> list[str]:
    """The first `limit` sentences of the rehearsal's sources, cut by the pipeline's splitter."""
    from arag.index.sentences import sentence_spans
    from benchmarks.rehearsal_corpus import source_documents

    pool: list[str] = []
    for _, doc in source_documents(data_dir):
        pool.extend(doc.text[s.start : s.end] for s in sentence_spans(doc.text))
        if len(pool) >= limit:
            break
    return pool[:limit]


def generate_index(root: Path, chunks: int, parts: int, sentences_per_chunk: int, pool_size: int, data_dir: Path) -> None:
    from benchmarks.keyword_search import build_caches

    t = time.perf_counter()
    pool = rehearsal_pool(data_dir, pool_size)
    print(f"pool: {len(pool):,} sentences of the rehearsal's sources in {time.perf_counter() - t:.0f} s", flush=True)
    t = time.perf_counter()
    write_synthetic_index(root, chunks, sentences_per_chunk=sentences_per_chunk, parts=parts, pool=pool, log=lambda m: None)
    print(f"wrote {chunks:,} chunks in {parts} parts in {time.perf_counter() - t:.0f} s", flush=True)
    wall, summed = build_caches(root, workers=2)
    sentences = chunks * (sentences_per_chunk + 1)
    print(f"tools caches of {parts} parts: {wall:.0f} s wall, {summed:.0f} s summed over parts ({1e6 * summed / sentences:.1f} µs a sentence)", flush=True)


QUESTIONS = REPO.parent / "shared" / "data" / "2wikimultihopqa" / "questions.jsonl"


def agent_queries(questions: str | Path, n: int) -> list[list[str]]:
    """The keyword lists the rehearsal's simulated agent gives for the first `n` questions."""
    lines = [line for line in Path(questions).read_text().splitlines() if line.strip()][:n]
    return [keywords_of(json.loads(line)["question"]) for line in lines]


SIDES = ("baseline_union_no_memory", "first_time_asked", "asked_again")


def run_printed(code: Code, index: Path, questions: Path, queries: int, reference: bool = False) -> dict:
    """What this benchmark prints (its JSON), run by `code`'s version of it as a subprocess on `index`."""
    cmd = code.command("benchmarks.keyword_recurring", "--index", str(index), "--questions", str(Path(questions).resolve()), "--queries", str(queries))
    out = subprocess.run(cmd + ([] if reference else ["--no-reference"]), cwd=code.root, env=code.env(), capture_output=True, text=True, check=True).stdout
    return json.loads(out[: out.index("keyword_recurring:")])


def sides_line(printed: dict) -> str:
    return "; ".join(f"{s} p50 {printed[s]['p50_ms']} / p95 {printed[s]['p95_ms']} / mean {printed[s]['mean_ms']} ms" for s in SIDES)


def medians_line(runs: list[dict]) -> str:
    return "; ".join(f"{s} p50 {statistics.median(r[s]['p50_ms'] for r in runs):.1f} / p95 {statistics.median(r[s]['p95_ms'] for r in runs):.1f} ms" for s in SIDES)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", required=True)
    ap.add_argument("--questions", default=str(QUESTIONS))
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--no-reference", action="store_true", help="skip the check against the reference loop over every chunk")
    ap.add_argument("--generate", type=int, default=0, help="first write a keyword-only index of this many chunks at --index (if absent)")
    ap.add_argument("--parts", type=int, default=98, help="parts of the generated index")
    ap.add_argument("--sentences-per-chunk", type=int, default=21, help="pool sentences per generated chunk (+1 of its own)")
    ap.add_argument("--pool", type=int, default=400_000, help="pool sentences for the generated index")
    ap.add_argument("--data-dir", default=os.environ.get("ARAG_DATA_DIR", str(REPO.parent / "shared" / "data")))
    args = ap.parse_args(argv)
    if args.generate and not (Path(args.index) / "manifest.json").exists():
        generate_index(Path(args.index), args.generate, args.parts, args.sentences_per_chunk, args.pool, Path(args.data_dir))

    queries = agent_queries(args.questions, args.queries)
    ctx = ToolContext(open_index(args.index))
    store = ctx.store
    baseline = lambda kws: union_top(store, kws, TOP_K)  # noqa: E731
    tool = lambda kws: store.keyword_top(kws, TOP_K)  # noqa: E731

    timed(baseline, queries)  # the page cache, as both sides will find it
    base_lat, base_res = timed(baseline, queries)
    store.keyword_counts = KeywordCounts()
    first_lat, first_res = timed(tool, queries)
    remembered = store.keyword_counts.stats()
    again_lat, again_res = timed(tool, queries)
    if not (base_res == first_res == again_res):
        bad = [q for q, a, b, c in zip(queries, base_res, first_res, again_res) if not a == b == c]
        raise SystemExit(f"results differ for {len(bad)} queries, e.g. {bad[:3]}")
    if not args.no_reference:
        texts = [t.lower() for batch in iter_chunk_texts(Path(args.index)) for t in batch]
        expected = [reference.keyword_scores(texts, kws, TOP_K, lowered_texts=True) for kws in queries]
        del texts
        bad = [q for q, e, r in zip(queries, expected, first_res) if [tuple(p) for p in r] != e]
        if bad:
            raise SystemExit(f"results differ from the reference for {len(bad)} queries, e.g. {bad[:3]}")

    out = {
        "index": args.index, "chunks": store.num_chunks, "queries": len(queries),
        "baseline_union_no_memory": summary(base_lat),
        "first_time_asked": summary(first_lat),
        "asked_again": summary(again_lat),
        "memory_after_first_pass": remembered,
    }
    out["answers_sha1"] = hashlib.sha1(json.dumps([[list(map(int, p)) for p in r] for r in first_res]).encode()).hexdigest()  # to compare layouts
    out["costliest_keywords"] = costliest(store, queries)
    out["ratio_first_time"] = round(statistics.mean(base_lat) / statistics.mean(first_lat), 2)
    out["ratio_asked_again"] = round(statistics.mean(base_lat) / statistics.mean(again_lat), 2)
    print(json.dumps(out, indent=1))
    print(f"keyword_recurring: chunks={store.num_chunks} queries={len(queries)} identical=yes{'' if args.no_reference else ' (and to the reference)'} "
          f"mean baseline {out['baseline_union_no_memory']['mean_ms']} ms, first time {out['first_time_asked']['mean_ms']} ms "
          f"({out['ratio_first_time']}x), asked again {out['asked_again']['mean_ms']} ms ({out['ratio_asked_again']}x)")


if __name__ == "__main__":
    main()
