"""Index pipeline throughput against bare encoding and the original A-RAG scripts' approach.

One run:

1. builds an index with the real pipeline (`build_index`, configured exactly as
   `python -m pipelines.index +corpus=<corpus>` would be, Ray included) and times it;
2. reads the index's sentences back and, each in a fresh process, times
   * bare encode: `SentenceEmbedder(<the pipeline's embedder spec>).encode_documents` on all of
     them in one call: same model, backend, batch size and threads, no Ray, Parquet or FAISS;
   * the reference: what the original A-RAG scripts do, one process,
     `SentenceTransformer(model).encode(sentences, batch_size=32)` on a Python list, default
     torch fp32;
   both also check their vectors against the index's (cosine per sentence);
3. prints sentences/s of each and the ratios pipeline/bare and pipeline/reference.

    python -m benchmarks.index_throughput                         # wiki_00..01 of the wiki sample (~15k sentences, ~5 min)
    python -m benchmarks.index_throughput --include 'wiki_0[0-3].bz2'      # 4 files, ~30k sentences
    python -m benchmarks.index_throughput --corpus 2wikimultihopqa --include ''
    python -m benchmarks.index_throughput -o embedder.backend=torch        # any pipeline override

Data: `$ARAG_DATA_DIR`, by default `../shared/data` beside the repository. The machine is
shared and timings are noisy: the load average is printed beside every figure; compare ratios
from one run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _sentences(index_dir: str) -> tuple[list[int], list[str]]:
    import pyarrow.parquet as pq

    from arag.index.store import Index

    ids, texts = [], []
    for path in Index(index_dir).sentence_files:
        table = pq.read_table(path, columns=["sentence_id", "text"])
        ids.extend(table["sentence_id"].to_pylist())
        texts.extend(table["text"].to_pylist())
    return ids, texts


def _stored_vectors(index_dir: str, ids: list[int]):
    from arag.index.store import Index
    from arag.index.vectors import stored_vectors

    return stored_vectors(Index(index_dir).vector_files, ids)


def _worker(args: argparse.Namespace) -> None:
    """One timed encode in this fresh process; prints a JSON line."""
    import numpy as np

    ids, texts = _sentences(args.index)
    spec_dict = json.loads(Path(args.index, "manifest.json").read_text())["embedding"]["spec"]
    from arag.index.embedding import EmbedderSpec, SentenceEmbedder

    spec = EmbedderSpec(**spec_dict)
    started = time.perf_counter()
    if args.worker == "bare":
        embedder = SentenceEmbedder(spec)
        load_s = time.perf_counter() - started
        t0, c0 = time.perf_counter(), time.process_time()
        vectors = embedder.encode_documents(texts)
        info = {"backend": embedder.backend, "batch_size": spec.batch_size, "threads": embedder.threads, "streams": embedder.streams}
    else:  # the original scripts: plain sentence-transformers, torch fp32, batch 32, all defaults
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import torch
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(spec.resolve_path())
        load_s = time.perf_counter() - started
        t0, c0 = time.perf_counter(), time.process_time()
        vectors = model.encode(texts, batch_size=32)
        info = {"backend": "torch", "batch_size": 32, "threads": torch.get_num_threads(), "streams": 1}
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    vectors = np.asarray(vectors, dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    cosine = np.sum(vectors * _stored_vectors(args.index, ids), axis=1)
    print(json.dumps({
        "n": len(texts), "seconds": seconds, "cpu_s": cpu, "load_s": load_s, "load1": os.getloadavg()[0],
        "min_cosine": float(cosine.min()), "p001_cosine": float(np.quantile(cosine, 0.001)), **info,
    }))


def _run_worker(kind: str, index_dir: str) -> dict:
    cmd = [sys.executable, __file__, "--worker", kind, "--index", index_dir]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    if proc.returncode != 0:
        sys.exit(f"{kind} encode failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _build(args: argparse.Namespace, index_dir: str) -> dict:
    from functools import partial

    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    import arag.runtime.index_job as job
    from arag.runtime.cluster import init_ray
    from pipelines.index import settings_from_config

    overrides = [f"+corpus={args.corpus}", f"index.path={index_dir}", "index.overwrite=true", "progress=false"]
    if args.include:
        overrides.append(f"corpus.include=[{','.join(repr(g) for g in args.include.split(','))}]")
    overrides += args.override
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("index", overrides=overrides)
    settings = settings_from_config(cfg)
    embed = job.EmbedRuntime(**OmegaConf.to_container(cfg.runtime.embed))

    phases: dict[str, float] = {}

    def timed(name, fn):  # the benchmark's own instrumentation: wall time of each phase
        def wrapper(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                phases[name] = time.perf_counter() - t
        return wrapper

    job._run_phase1 = timed("chunk", job._run_phase1)
    job._run_phase2 = timed("embed", job._run_phase2)
    # The embedding actor notes when each part's call begins and ends (wall clock, one machine;
    # a call reads the part's sentences, embeds them and writes its shard): start-up is everything
    # before the first call, the rest is the steady state.
    timeline = Path(tempfile.mkdtemp(prefix="arag-timeline-")) / "calls.jsonl"
    timeline.touch()

    class TimedEmbedder(job._PartEmbedder):
        def __call__(self, row):
            started = time.time()
            out = super().__call__(row)
            with open(timeline, "a") as f:
                f.write(json.dumps({"start": started, "end": time.time(), "n": out["rows"]}) + "\n")
            return out

    job._PartEmbedder = TimedEmbedder
    build_started = time.time()
    load = os.getloadavg()[0]
    result = job.build_index(
        settings, index_dir, embed=embed, overwrite=True, progress=args.progress,
        ray_init=partial(init_ray, num_cpus=cfg.runtime.num_cpus),
    )
    import ray

    ray.shutdown()  # free the cores for the timings below
    m = result.manifest
    calls = [json.loads(line) for line in timeline.read_text().splitlines()]
    shutil.rmtree(timeline.parent, ignore_errors=True)
    steady = None
    if calls:
        first = min(c["start"] for c in calls)
        steady = {"first_batch_s": first - build_started, "rows": sum(c["n"] for c in calls), "seconds": max(c["end"] for c in calls) - first}
    return {
        "n": m["num_sentences"], "seconds": result.elapsed_s, "load1": max(load, os.getloadavg()[0]), "steady": steady,
        "chunks": m["num_chunks"], "documents": m["num_documents"], "phases": phases,
        "embedder": OmegaConf.to_container(cfg.embedder, resolve=True), "embed_runtime": OmegaConf.to_container(cfg.runtime.embed),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default="wiki", help="a conf/corpus name (default wiki)")
    ap.add_argument("--include", default="wiki_0[0-1].bz2", help="comma-separated file globs of the corpus ('' = the corpus default, all files)")
    ap.add_argument("-o", "--override", action="append", default=[], help="a pipeline config override, e.g. embedder.batch_size=32 (repeatable)")
    ap.add_argument("--index", help="index folder (default: a temporary one, removed afterwards)")
    ap.add_argument("--skip-reference", action="store_true", help="do not time the reference approach (the slowest step)")
    ap.add_argument("--progress", action="store_true", help="show the pipeline's progress bars")
    ap.add_argument("--json", help="also write the figures to this JSON file")
    ap.add_argument("--worker", choices=["bare", "reference"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    os.environ.setdefault("ARAG_DATA_DIR", str(REPO.parent / "shared" / "data"))
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    if args.worker:
        return _worker(args)

    with tempfile.TemporaryDirectory(prefix="arag-throughput-") as tmp:
        index_dir = args.index or str(Path(tmp) / "index")
        print(f"building the index of {args.corpus} {args.include or '(all files)'} with the pipeline ...", flush=True)
        pipe = _build(args, index_dir)
        e = pipe["embedder"]
        print(f"  {pipe['documents']} documents, {pipe['chunks']} chunks, {pipe['n']} sentences; embedder backend={e.get('backend')} "
              f"batch_size={e['batch_size']} threads={e['threads']} streams={e.get('streams')}; actors={pipe['embed_runtime']['actors']}", flush=True)
        print("bare encode (same embedder settings, one process) ...", flush=True)
        bare = _run_worker("bare", index_dir)
        ref = None
        if not args.skip_reference:
            print("reference: SentenceTransformer(model).encode(sentences, batch_size=32), torch fp32 ...", flush=True)
            ref = _run_worker("reference", index_dir)

    n = pipe["n"]
    rate = lambda r: r["n"] / r["seconds"]
    print()
    print(f"{'':34s} {'sentences/s':>11s} {'seconds':>8s} {'load1':>6s}  notes")
    embed_s = pipe["phases"].get("embed")
    print(f"{'pipeline (build_index, end to end)':34s} {rate(pipe):11.1f} {pipe['seconds']:8.1f} {pipe['load1']:6.2f}  "
          f"chunking {pipe['phases'].get('chunk', float('nan')):.1f}s, embedding {embed_s or float('nan'):.1f}s, rest (Ray start, manifest) "
          f"{pipe['seconds'] - sum(pipe['phases'].values()):.1f}s")
    if embed_s:
        print(f"{'  of which the embedding phase':34s} {n / embed_s:11.1f} {embed_s:8.1f}")
    steady = pipe.get("steady")
    if steady:
        print(f"{'  steady state (actor calls)':34s} {steady['rows'] / steady['seconds']:11.1f} {steady['seconds']:8.1f}  "
              f"the first call began {steady['first_batch_s']:.1f}s after the start (Ray, chunking, actor and model start-up)")
    for name, r in (("bare encode (pipeline settings)", bare), ("reference (A-RAG scripts)", ref)):
        if r:
            print(f"{name:34s} {rate(r):11.1f} {r['seconds']:8.1f} {r['load1']:6.2f}  {r['backend']} bs{r['batch_size']} "
                  f"{r['threads']} threads/{r['streams']} streams; cpu {r['cpu_s']:.0f}s; model load {r['load_s']:.1f}s; "
                  f"cosine to the index's vectors min {r['min_cosine']:.6f}")
    print()
    print(f"pipeline / bare encode:  {rate(pipe) / rate(bare):.2f}   (goal >= 0.85)")
    if embed_s:
        print(f"  embedding phase / bare: {n / embed_s / rate(bare):.2f}")
    if steady:
        print(f"  steady state / bare:    {steady['rows'] / steady['seconds'] / rate(bare):.2f}   (what the ratio tends to as the corpus grows)")
    if ref:
        print(f"pipeline / reference:    {rate(pipe) / rate(ref):.2f}   (goal >= 1.5)")
        print(f"bare / reference:        {rate(bare) / rate(ref):.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"pipeline": pipe, "bare": bare, "reference": ref}, indent=2))


if __name__ == "__main__":
    main()
