"""Benchmark keyword_search against the original A-RAG way (a Python loop over every chunk).

    python -m benchmarks.keyword_search [--index indexes/2wiki] [--chunks 1000000] [--part-chunks 62500] [--text wiki|pseudo] [--workdir /tmp/arag-bench-keyword] [--read-gap N]

In one run, on each index (the real 2Wiki index if given/found, and a synthetic corpus of
`--chunks` chunks generated under --workdir, never committed), over the SAME keyword lists:
  * the reference: `t.count(k.lower())` summed over keywords for every chunk, over the chunk
    texts held in a Python list and lowered once beforehand (as the tools cache keeps them
    searchable), so the ratio compares search with search;
  * keyword_search through `ToolContext` (counts from the per-part caches' word postings, or exact
    scoring of the candidates they leave), reading the candidates' texts with os.pread (the default) and
    in place from the memory map, alternated (pread, mmap, mmap, pread), every run with an empty
    keyword memory (each question asked for the first time), and with --scan the same tool scoring every chunk;
  * checks that every query returns identical top-k chunk ids and scores;
  * prints p50/p95 latency, the speed-up as a ratio to the reference, the tool's RSS growth split
    into anonymous (its own) and file-backed (mapped cache pages), the cache's size on disk against
    the chunk text with what each part of it costs, and the one-time cost of building the per-part caches
    (built the way the pipeline's phase 1 does: one part per task, --build-workers at a time).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import time
from pathlib import Path

import numpy as np
import psutil


from arag.index.store import open_index
from arag.tools import ToolContext
from arag.index.keyword import part_cache
from arag.index.keyword.counts import KeywordCounts
from arag.index.keyword.part_cache import build_part_cache
from arag.tools.index_cache import part_cache_dir
from tests.support import tools_reference as reference
from tests.support.synthetic_index import Vocabulary, iter_chunk_texts, wiki_sentences, write_synthetic_index

TOP_K = 5


def rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


def rss_split_mb() -> tuple[float, float]:
    """(anonymous, file-backed) resident MiB of this process: the process's own memory vs mapped
    cache pages (the OS page cache, shared and reclaimable)."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return tuple(int(fields.get(k, "0 kB").split()[0]) / 1024 for k in ("RssAnon", "RssFile"))  # type: ignore[return-value]


def cache_breakdown(dirs: list[Path]) -> dict[str, int]:
    """Bytes on disk of each kind of thing in the per-part caches: the chunk text (its Arrow
    values and offsets), the other chunk columns (and Arrow's framing), the word postings (with
    their vocabulary), the sentence spans, the id lookups and the rest."""
    import pyarrow as pa

    out = dict.fromkeys(["chunk text", "other chunk columns", "word postings", "sentence spans", "id lookups", "other"], 0)
    for d in dirs:
        for f in d.iterdir():
            size = f.stat().st_size
            if f.name == "chunks.arrow":
                table = pa.ipc.open_file(pa.memory_map(str(f))).read_all()
                text = sum(b.size for c in table.column("text").chunks for b in c.buffers() if b is not None)
                out["chunk text"] += text
                out["other chunk columns"] += size - text
            elif f.name.startswith("words_"):
                out["word postings"] += size
            elif f.name.startswith("sentence"):
                out["sentence spans"] += size
            elif f.name.endswith(("_hash.npy", "_rows.npy")) and not f.name.startswith("python_lower"):
                out["id lookups"] += size
            else:
                out["other"] += size
    return out


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs) * 1000, q))


def twowiki_queries(n: int, seed: int = 0) -> list[list[str]]:
    """Keyword lists an agent would send for 2Wiki questions: the entities of their evidence."""
    path = Path(__file__).resolve().parents[2] / "shared" / "data" / "2wikimultihopqa" / "questions.jsonl"
    if not path.exists():
        raise SystemExit(f"no 2Wiki questions at {path}")
    rng = random.Random(seed)
    out = []
    for line in path.read_text().splitlines():
        q = json.loads(line)
        ents = list(dict.fromkeys([e for t in q.get("evidence", []) for e in (t[0], t[2]) if isinstance(e, str) and 3 <= len(e) <= 60]))
        if ents:
            rng.shuffle(ents)
            out.append(ents[: rng.randint(1, 3)])
    rng.shuffle(out)
    return out[:n]


def synthetic_queries(n: int, seed: int = 0) -> list[list[str]]:
    """Names (full, surname only), years and rarer words of the synthetic vocabulary, 1-3 per list."""
    vocab = Vocabulary(seed)  # the same vocabulary the corpus was drawn from
    rng = random.Random(seed + 7)
    out = []
    for _ in range(n):
        kws = []
        for _ in range(rng.randint(1, 3)):
            kind = rng.random()
            if kind < 0.45:
                kws.append(vocab.names[int(len(vocab.names) ** rng.random()) - 1])  # log-uniform rank: common to rare
            elif kind < 0.65:
                kws.append(vocab.names[rng.randrange(len(vocab.names))].split()[1])
            elif kind < 0.8:
                kws.append(str(rng.randint(1500, 2024)))
            else:
                kws.append(vocab.words[rng.randrange(2000, len(vocab.words))])
        out.append(kws)
    return out


def wiki_queries(folder: Path, n: int, seed: int = 0) -> list[list[str]]:
    """Article titles, capitalised two-word names and years from the same Wikipedia sentences."""
    import re

    sentences, titles = wiki_sentences(folder)
    names = sorted({m for s in sentences[::7] for m in re.findall(r"\b[A-Z][a-z]+ [A-Z][a-z]+\b", s)})
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        kws = []
        for _ in range(rng.randint(1, 3)):
            kind = rng.random()
            if kind < 0.4:
                kws.append(rng.choice([t for t in titles if len(t) >= 3]))
            elif kind < 0.8:
                kws.append(rng.choice(names))
            else:
                kws.append(str(rng.randint(1500, 2015)))
        out.append(kws)
    return out


def run_reference(texts: list[str], queries: list[list[str]]) -> tuple[list, list[float]]:
    results, times = [], []
    for kws in queries:
        t = time.perf_counter()
        results.append(reference.keyword_scores(texts, kws, TOP_K, lowered_texts=True))
        times.append(time.perf_counter() - t)
    return results, times


def run_tool(ctx: ToolContext, queries: list[list[str]]) -> tuple[list, list[float]]:
    for kws in queries[:3]:  # warm-up: page in the memory-mapped files
        ctx.call("keyword_search", {"keywords": kws, "top_k": TOP_K})
    results, times = [], []
    for kws in queries:
        t = time.perf_counter()
        r = ctx.call("keyword_search", {"keywords": kws, "top_k": TOP_K})
        times.append(time.perf_counter() - t)
        if r.error:
            raise SystemExit(f"tool error for {kws}: {r.error}")
        results.append([(h.chunk_id, int(h.score)) for h in r.results])
    return results, times


def build_caches(index_dir: Path, workers: int) -> tuple[float, float]:
    """Build the missing per-part caches, one part per process as phase 1 does: (wall s, sum of part s)."""
    from concurrent.futures import ProcessPoolExecutor

    index = open_index(index_dir)
    t = time.perf_counter()
    with ProcessPoolExecutor(max_workers=workers) as pool:
        dirs = list(pool.map(build_part_cache, [p.chunks for p in index.parts], [p.sentences for p in index.parts], [p.part for p in index.parts], [part_cache_dir(index_dir, p.part) for p in index.parts]))
    wall = time.perf_counter() - t
    return wall, sum(json.loads((d / "cache.json").read_text())["build_seconds"] for d in dirs)


def bench(name: str, index_dir: Path, queries: list[list[str]], scan: bool, rebuild_cache: bool, workers: int) -> None:
    print(f"\n== {name}: {index_dir}")
    cache = index_dir / "tools_cache"
    if rebuild_cache and cache.exists():
        shutil.rmtree(cache)
    wall, part_s = build_caches(index_dir, workers)
    gc.collect()
    t = time.perf_counter()
    ctx = ToolContext(index_dir)
    open_s = time.perf_counter() - t
    metas = [json.loads((d / "cache.json").read_text()) for d in ctx.store.dirs]
    disk = sum(f.stat().st_size for d in ctx.store.dirs for f in d.iterdir())
    text_bytes = sum(len(t.encode()) for batch in iter_chunk_texts(index_dir) for t in batch)
    print(f"chunks: {ctx.store.num_chunks:,}  sentences: {ctx.store.num_sentences:,}  chunk text: {text_bytes / 2**20:,.0f} MiB (UTF-8)")
    print(
        f"tools cache: {len(metas)} parts built in {wall:.1f} s wall ({part_s:.1f} s summed over parts, {workers} at a time; "
        f"done by the pipeline's phase-1 tasks), open {open_s * 1000:.0f} ms; on disk {disk / 2**20:,.0f} MiB = "
        f"{disk / text_bytes:.2f}x the chunk text; word postings {sum(m['word_postings'] for m in metas):,}, "
        f"distinct words summed over parts {sum(m['vocabulary'] for m in metas):,}; "
        f"build {1e6 * part_s / max(1, sum(m['num_sentences'] for m in metas)):.1f} µs per sentence summed over parts"
    )
    parts = cache_breakdown(ctx.store.dirs)
    print("  on disk, as a multiple of the chunk text: " + ", ".join(f"{k} {v / text_bytes:.3f}x ({v / 2**20:,.0f} MiB)" for k, v in parts.items()))
    # The tool over the same queries, reading candidate texts with os.pread and in place from the
    # memory map, each run with an empty keyword memory (every question asked for the first time),
    # after one untimed pass that brings the candidates' text into the page cache; the two modes
    # alternate (pread, mmap, mmap, pread) so neither sees a warmer machine. RSS is the growth over
    # each mode's first run, split into anonymous memory (the process's own) and file-backed pages
    # (the mapped cache pages it touched).
    def one_run(mode: str) -> tuple[list, list[float], float, float, float]:
        for p in ctx.store.parts:
            p.text_reads = mode
        ctx.store.keyword_counts = KeywordCounts()
        gc.collect()
        anon0, file0 = rss_split_mb()
        res, times = run_tool(ctx, queries)
        anon1, file1 = rss_split_mb()
        return res, times, anon1 - anon0, file1 - file0, rss_mb()

    one_run("pread")  # the page cache, as every timed run finds it
    runs: dict[str, tuple] = {}
    for mode in ("pread", "mmap", "mmap", "pread"):
        res, times, anon, file, total = one_run(mode)
        if mode in runs:
            assert runs[mode][0] == res, f"two {mode} runs differ"
            runs[mode] = (res, runs[mode][1] + times, *runs[mode][2:])
        else:
            runs[mode] = (res, times, anon, file, total)
    assert runs["pread"][0] == runs["mmap"][0], "pread and mmap reads differ"
    tool_res = runs["pread"][0]
    chunk_ids = [c for w in range(len(ctx.store.parts)) for b in range(0, ctx.store.parts[w].num_chunks, 4096) for c in ctx.store.chunk_rows(range(int(ctx.store.chunk_offsets[w]) + b, int(ctx.store.chunk_offsets[w]) + min(b + 4096, ctx.store.parts[w].num_chunks)), ["chunk_id"])["chunk_id"]]
    scan_t: list[float] = []
    if scan:
        sctx = ToolContext(index_dir, accelerate=False)
        scan_res, scan_t = run_tool(sctx, queries)
        assert scan_res == tool_res, "scan and word-postings paths differ"
        sctx.close()
    ctx.close()
    del ctx
    gc.collect()
    # The reference holds every chunk text in a Python list, lowered once.
    before = rss_mb()
    t = time.perf_counter()
    texts = [s.lower() for batch in iter_chunk_texts(index_dir) for s in batch]
    load_s = time.perf_counter() - t
    ref_rss = rss_mb() - before
    ref_res, ref_t = run_reference(texts, queries)
    mismatches = 0
    for q, r, mine in zip(queries, ref_res, tool_res):
        expected = [(chunk_ids[o], s) for o, s in r]
        if expected != mine:
            mismatches += 1
            print(f"  MISMATCH for {q}: reference {expected} tool {mine}")
    del texts
    gc.collect()
    n = len(queries)
    print(f"queries: {n} keyword lists (top_k={TOP_K}), the same for every method; identical top-k ids and scores: {n - mismatches}/{n}")
    print("keyword_search: each question asked for the first time (empty keyword memory), the two read modes alternated (pread, mmap, mmap, pread), percentiles over both runs of a mode")
    print(f"{'method':<40}{'p50 ms':>10}{'p95 ms':>10}{'speed-up p50':>14}{'RSS MiB':>10}")
    rp50, rp95 = pct(ref_t, 50), pct(ref_t, 95)
    print(f"{'reference (Python loop, lowered once)':<40}{rp50:>10.1f}{rp95:>10.1f}{'1.0x':>14}{ref_rss:>10,.0f}   (+{load_s:.1f} s to load and lower the texts)")
    for mode, label in (("pread", "word postings, pread"), ("mmap", "word postings, mmap")):
        _, times, anon, file, total = runs[mode]
        p50 = pct(times, 50)
        print(
            f"{'keyword_search (' + label + ')':<40}{p50:>10.1f}{pct(times, 95):>10.1f}{rp50 / p50:>13.0f}x{anon + file:>10,.0f}"
            f"   (anonymous +{anon:,.0f}, file-backed +{file:,.0f}; process RSS after {total:,.0f} MiB)"
        )
    if scan_t:
        s50 = pct(scan_t, 50)
        print(f"{'keyword_search (every chunk scored)':<40}{s50:>10.1f}{pct(scan_t, 95):>10.1f}{rp50 / s50:>13.1f}x")
    print(
        "RSS: growth of this process while the method ran (anonymous + file-backed). The tool's is split into anonymous "
        "memory (the process's own: Python objects, Arrow and numpy buffers) and file-backed pages of the memory-mapped "
        "cache files it touched (the OS page cache mapped into the process: shared, reclaimable, not the process's own). "
        "pread: candidate texts are copied into short-lived buffers, so the text file's pages are not mapped; mmap: "
        "read in place, so every text page touched stays in the process's RSS. The reference's is its list of texts."
    )
    if mismatches:
        raise SystemExit(f"{mismatches} queries differ from the reference")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", default=str(Path(__file__).resolve().parents[1] / "indexes" / "2wiki"), help="a real index (skipped if missing)")
    ap.add_argument("--chunks", type=int, default=1_000_000, help="synthetic corpus size (0: skip)")
    ap.add_argument("--sentences-per-chunk", type=int, default=7, help="pool sentences per synthetic chunk (+1 unique)")
    ap.add_argument("--part-chunks", type=int, default=62_500, help="synthetic chunks per part (the pipeline's 64 MB parts hold ~60k of these ~1 kB chunks)")
    ap.add_argument("--workdir", default="/tmp/arag-bench-keyword")
    ap.add_argument("--queries", type=int, default=60, help="keyword lists per index (the reference runs them all)")
    ap.add_argument("--scan", action="store_true", help="also time the tool scoring every chunk (no candidates)")
    ap.add_argument("--rebuild-cache", action="store_true", help="delete and rebuild the tools caches (times the build)")
    ap.add_argument("--build-workers", type=int, default=2, help="parts whose cache is built at once")
    ap.add_argument("--keep", action="store_true", help="keep the generated corpus for the next run")
    ap.add_argument("--text", choices=["wiki", "pseudo"], default="wiki", help="synthetic sentences: real Wikipedia sentences (shared/data/wiki) or pseudo-words")
    ap.add_argument("--wiki", default=str(Path(__file__).resolve().parents[2] / "shared" / "data" / "wiki"), help="WikiExtractor folder for --text wiki")
    ap.add_argument("--read-gap", type=int, default=None, help="bytes between candidates' texts read in one pread (default: arag.index.keyword.part_cache.READ_GAP)")
    args = ap.parse_args()
    if args.read_gap is not None:
        if args.read_gap < 0:
            ap.error(f"--read-gap must be 0 or more bytes, got {args.read_gap}")
        part_cache.READ_GAP = args.read_gap
    print(f"keyword candidate reads: READ_GAP {part_cache.READ_GAP} bytes")
    print(f"machine: {os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB RAM")

    real = Path(args.index)
    if (real / "manifest.json").exists():
        qs = twowiki_queries(args.queries)
        bench("2Wiki", real, qs, args.scan, args.rebuild_cache, args.build_workers)
    else:
        print(f"\n(no index at {real}: skipping the 2Wiki run)")

    if args.chunks:
        wiki = Path(args.wiki) if args.text == "wiki" else None
        if wiki is not None and not any(wiki.rglob("wiki_*")):
            print(f"(no Wikipedia sample under {wiki}: using pseudo-word text)")
            wiki = None
        work = Path(args.workdir) / f"synthetic-{args.chunks}-{args.sentences_per_chunk}-{args.part_chunks}-{'wiki' if wiki else 'pseudo'}"
        if not (work / "manifest.json").exists():
            shutil.rmtree(work, ignore_errors=True)
            t = time.perf_counter()
            print(f"\ngenerating {args.chunks:,} synthetic chunks under {work} ...")
            write_synthetic_index(work, args.chunks, sentences_per_chunk=args.sentences_per_chunk, parts=-(-args.chunks // args.part_chunks), wiki=wiki)
            print(f"generated in {time.perf_counter() - t:.0f} s")
        try:
            queries = wiki_queries(wiki, args.queries) if wiki else synthetic_queries(args.queries)
            label = "Wikipedia sentences" if wiki else "pseudo-words"
            bench(f"synthetic {args.chunks:,} chunks ({label})", work, queries, args.scan, args.rebuild_cache, args.build_workers)
        finally:
            if not args.keep:
                shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
