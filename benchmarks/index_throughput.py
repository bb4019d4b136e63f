"""Index pipeline throughput, like for like: the same sentences, model and threads on every side.

One process builds a small index with the real pipeline (`build_index`, configured exactly as
`python -m pipelines.index +corpus=<corpus>` would be, Ray included), reads its sentences back,
and then times, in rounds whose order rotates (A B C D, B C D A, ...):

* **bare**: `SentenceEmbedder.encode_documents` on all the sentences in one call: the model object
  the stage below uses, the pipeline's embedder settings (backend, batch size, threads, streams);
  no Parquet, FAISS or Ray;
* **stage**: the pipeline's embedding stage without Ray: `embed_part` (read the part's sentences
  Parquet, encode them per `runtime.embed.rows_per_batch` call, build and write the FAISS shard
  and its record) with that same object's `encode_documents`;
* **authors**: the A-RAG authors' `scripts/build_index.py` encode step as the same calls: one
  `SentenceTransformer(model).encode(all sentences, batch_size=32, normalize_embeddings=True)` on
  torch, fp32, with as many torch threads as the embedder uses;
* **job**: the whole `build_index` again (overwrite): Ray start, chunking, the embedding actor's
  start-up and its calls, the manifest; the actor notes when its calls begin and end, which
  separates start-up from its steady state.

Optional sides (`--sides`) show what the embedding stage's two fixes are worth in the same run:
**bare-by-chars** (bare with batches cut by characters, as `encode()` cuts them) and **job-nice15**
(the job with Ray's default worker niceness, +15).

Every side encodes the index's sentences, so tokens/s (the tokenizer's tokens, truncated as the
model truncates, padding not counted) compare like with like. Each side's vectors are checked
against bare's (max |difference| per component; cosine for the torch side). Beside tokens/s, the
table gives tokens per CPU-second of the process that encoded (all its threads), which moves far
less with the machine's load.

    python -m benchmarks.index_throughput --sentences 1000 --rounds 3    # 2Wiki, ~1k sentences, a few minutes alone
    python -m benchmarks.index_throughput --corpus wiki --include 'wiki_00.bz2' --rounds 2
    python -m benchmarks.index_throughput --corpus 2wikimultihopqa -o embedder.backend=torch   # any pipeline override

Data: `$ARAG_DATA_DIR`, by default `../shared/data` beside the repository. The machine is
shared and timings are noisy: compare the ratios of one run (the sides alternate) and read the
load average printed beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SIDES = ("bare", "stage", "authors", "job")
# Optional sides (--sides): what the two fixes of the embedding stage are worth, in the same run.
# bare-by-chars: bare with batches cut by characters (encode()'s order; the embedder's before it
# sorted by tokens); job-nice15: the job with Ray's default worker niceness (+15).
EXTRA_SIDES = ("bare-by-chars", "job-nice15")


def _first_documents(cfg, n_sentences: int, folder: Path) -> tuple[str, int]:
    """A JSONL file of the corpus's first documents holding about `n_sentences` sentences as the
    pipeline's splitter counts them (title line included where the corpus prepends it)."""
    from arag.index.sentences import sentence_spans

    fields = cfg.corpus.fields
    target = folder / "corpus.jsonl"
    count, docs = 0, 0
    with open(cfg.corpus.path, encoding="utf-8") as src, open(target, "w", encoding="utf-8") as out:
        for line in src:
            if count >= n_sentences:
                break
            doc = json.loads(line)
            text = doc.get(fields.text) or ""
            if cfg.corpus.get("prepend_title") and fields.get("title") and doc.get(fields.title):
                text = f"{doc[fields.title]}\n{text}"
            count += len(sentence_spans(text, cfg.index.language))
            out.write(line if line.endswith("\n") else line + "\n")
            docs += 1
    return str(target), docs


def _compose(args: argparse.Namespace, index_dir: str, corpus_path: str | None = None):
    from benchmarks.pipeline_config import compose_pipeline, include_override

    overrides = [f"+corpus={args.corpus}", f"index.path={index_dir}", "index.overwrite=true", "progress=false"]
    if args.include:
        overrides.append(include_override(args.include))
    overrides += args.override
    if corpus_path:  # the first documents of the corpus the overrides chose (-o corpus.path=... included)
        overrides.append(f"corpus.path={corpus_path}")
    return compose_pipeline("index", overrides)


class _Job:
    """`build_index` as `pipelines.index` runs it; `run()` times one whole build and the embedding
    actor's calls in it (the actor appends when each call began and ended to a file)."""

    def __init__(self, cfg, index_dir: str, scratch: Path):
        from omegaconf import OmegaConf

        import arag.runtime.index_job as job
        from pipelines.index import settings_from_config

        self.cfg, self.index_dir = cfg, index_dir
        self.settings = settings_from_config(cfg)
        self.embed = job.EmbedRuntime(**OmegaConf.to_container(cfg.runtime.embed))
        self.timeline = scratch / "calls.jsonl"
        timeline = self.timeline

        class TimedEmbedder(job._PartEmbedder):
            def __call__(self, row):
                import arag

                started, cpu = time.time(), time.process_time()
                out = super().__call__(row)
                record = {"start": started, "end": time.time(), "cpu": time.process_time() - cpu, "rows": out["rows"], "arag": arag.__file__}
                with open(timeline, "a") as f:
                    f.write(json.dumps(record) + "\n")
                return out

        job._PartEmbedder = TimedEmbedder

    def run(self) -> dict:
        import ray

        import arag.runtime.index_job as job
        from arag.runtime.cluster import init_ray

        self.timeline.write_text("")
        started = time.time()
        result = job.build_index(
            self.settings, self.index_dir, embed=self.embed, overwrite=True, progress=False,
            ray_init=partial(init_ray, num_cpus=self.cfg.runtime.num_cpus),
        )
        ray.shutdown()  # the other sides run without Ray's processes
        calls = [json.loads(line) for line in self.timeline.read_text().splitlines()]
        first = min(c["start"] for c in calls)
        if any(not c["arag"].startswith(str(REPO)) for c in calls):  # the actor must run this checkout's code
            sys.exit(f"the embedding actor imported arag from {calls[0]['arag']}, not from {REPO}")
        return {
            "seconds": result.elapsed_s, "startup_s": first - started,
            "actor_s": sum(c["end"] - c["start"] for c in calls), "actor_cpu_s": sum(c["cpu"] for c in calls), "manifest": result.manifest,
        }


def _padded_tokens(tokens: np.ndarray, keys: np.ndarray, batch: int, window: int | None = None) -> int:
    """Token slots a batching computes (each batch padded to its longest text): the texts cut
    into windows of `window` in order, each sorted by `keys`, longest first, then into batches."""
    total = 0
    window = window or len(tokens)
    for w in range(0, len(tokens), window):
        ordered = tokens[w : w + window][np.argsort(-keys[w : w + window], kind="stable")]
        total += sum(int(ordered[i : i + batch].max()) * len(ordered[i : i + batch]) for i in range(0, len(ordered), batch))
    return total


def _batches_by_characters(texts: list[str], batch: int) -> list[np.ndarray]:
    """encode()'s batching: longest first by characters."""
    order = np.argsort([-len(t) for t in texts], kind="stable")
    return np.split(order, range(batch, len(texts), batch))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default="2wikimultihopqa", help="a conf/corpus name (default 2wikimultihopqa)")
    ap.add_argument("--include", default="", help="comma-separated file globs of the corpus ('' = the corpus default)")
    ap.add_argument("--sentences", type=int, default=1000, help="a JSONL corpus: its first documents holding about this many sentences (0 = all)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the four sides, each round in a rotated order")
    ap.add_argument("--sides", default=",".join(SIDES), help=f"which sides to time (of {','.join(SIDES)})")
    ap.add_argument("-o", "--override", action="append", default=[], help="a pipeline config override, e.g. embedder.batch_size=32 (repeatable)")
    ap.add_argument("--json", help="also write the figures to this JSON file")
    args = ap.parse_args()
    os.environ.setdefault("ARAG_DATA_DIR", str(REPO.parent / "shared" / "data"))
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    sides = [s for s in args.sides.split(",") if s]
    if unknown := set(sides) - set(SIDES + EXTRA_SIDES):
        sys.exit(f"--sides: unknown {sorted(unknown)} (choose from {', '.join(SIDES + EXTRA_SIDES)})")

    scratch = Path(tempfile.mkdtemp(prefix="arag-throughput-"))
    try:
        _run(args, sides, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _run(args: argparse.Namespace, sides: list[str], scratch: Path) -> None:
    import pyarrow.parquet as pq
    import torch

    from arag.index.embedding import SentenceEmbedder, token_counts
    from arag.index.layout import IndexLayout
    from arag.index.part_vectors import embed_part
    from arag.index.parts import read_part_record
    from arag.index.store import Index
    from arag.index.vectors import shard_contents

    index_dir = str(scratch / "index")
    cfg = _compose(args, index_dir)
    corpus_path, what = None, f"{args.corpus} {args.include or '(all files)'}"
    if args.sentences and cfg.corpus.format == "jsonl":
        corpus_path, docs = _first_documents(cfg, args.sentences, scratch)
        what = f"{args.corpus}, its first {docs} documents"
        cfg = _compose(args, index_dir, corpus_path)
    job = _Job(cfg, index_dir, scratch)
    print(f"building the index of {what} with the pipeline (warm-up) ...", flush=True)
    first = job.run()
    index = Index(index_dir)
    spec = index.embedder_spec
    layout = IndexLayout(index_dir)
    parts = [read_part_record(layout, p.part) for p in index.parts]
    parts = [p for p in parts if p.num_sentences]
    texts: list[str] = []
    for part in parts:
        texts.extend(pq.read_table(layout.sentences(part.part), columns=["text"])["text"].to_pylist())
    n = len(texts)

    embedder = SentenceEmbedder(spec)
    tokens = token_counts(embedder.model, texts)  # as the model truncates them
    n_tokens = int(tokens.sum())
    rows_per_batch = int(cfg.runtime.embed.rows_per_batch)
    print(f"  {n} sentences, {n_tokens} tokens (mean {n_tokens / n:.1f}); embedder {spec.name} backend={embedder.backend} "
          f"{embedder.precision} batch_size={spec.batch_size} threads={embedder.threads} streams={embedder.streams}; "
          f"rows_per_batch={rows_per_batch}; job: first build {first['seconds']:.1f}s", flush=True)

    authors_model = None
    if "authors" in sides:
        from sentence_transformers import SentenceTransformer

        authors_model = SentenceTransformer(spec.resolve_path(), device="cpu")
        if spec.max_seq_length:
            authors_model.max_seq_length = spec.max_seq_length

    # The stage writes its shards into a copy of the index's parts (the job's own stay untouched).
    stage_layout = IndexLayout(scratch / "stage")
    stage_layout.make_dirs()
    for part in parts:
        shutil.copyfile(layout.sentences(part.part), stage_layout.sentences(part.part))

    reference: np.ndarray | None = None
    differences: dict[str, float] = {}

    def check(name: str, vectors: np.ndarray) -> None:
        if reference is not None:
            diff = np.abs(vectors - reference).max() if name != "authors" else 1 - float(np.min(np.sum(vectors * reference, axis=1)))
            differences[name] = max(differences.get(name, 0.0), float(diff))

    def run_side(name: str) -> dict:
        nonlocal reference
        load = os.getloadavg()[0]
        t0, c0 = time.perf_counter(), time.process_time()
        extra: dict = {}
        if name == "bare":
            vectors = embedder.encode_documents(texts)
        elif name == "bare-by-chars":
            by_tokens = embedder._batches_by_length
            embedder._batches_by_length = partial(_batches_by_characters, batch=spec.batch_size)
            try:
                vectors = embedder.encode_documents(texts)
            finally:
                embedder._batches_by_length = by_tokens
        elif name == "stage":
            for part in parts:
                embed_part(stage_layout, part, embedder.encode_documents, cfg.index.faiss_factory, rows_per_batch)
            vectors = None
        elif name == "authors":
            threads = torch.get_num_threads()
            torch.set_num_threads(embedder.threads)
            try:
                vectors = authors_model.encode(texts, batch_size=32, normalize_embeddings=True, show_progress_bar=False)
            finally:
                torch.set_num_threads(threads)
        else:
            if name == "job-nice15":
                os.environ["RAY_worker_niceness"] = "15"
            try:
                extra = job.run()
            finally:
                os.environ.pop("RAY_worker_niceness", None)
            extra.pop("manifest")
            vectors = None
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        if name == "stage":
            vectors = np.concatenate([shard_contents(stage_layout.vectors(p.part))[1] for p in parts])
        elif name.startswith("job"):
            vectors = np.concatenate([shard_contents(layout.vectors(p.part))[1] for p in parts])
        if name == "bare" and reference is None:
            reference = np.asarray(vectors, dtype=np.float32)
        check(name, np.asarray(vectors, dtype=np.float32))
        return {"seconds": seconds, "cpu_s": cpu, "load1": max(load, os.getloadavg()[0]), **extra}

    runs: dict[str, list[dict]] = {s: [] for s in sides}
    for r in range(args.rounds):
        order = sides[r % len(sides):] + sides[: r % len(sides)]
        for name in order:
            result = run_side(name)
            runs[name].append(result)
            print(f"  round {r + 1} {name:8s} {result['seconds']:7.1f}s  {n_tokens / result['seconds']:8.0f} tokens/s  load {result['load1']:.1f}", flush=True)

    def seconds_of(name: str, key: str = "seconds") -> float:
        return statistics.median(r[key] for r in runs[name])

    rows = []  # (name, seconds, CPU seconds of the process that encoded)
    for name in sides:
        rows.append((name, seconds_of(name), None if name.startswith("job") else seconds_of(name, "cpu_s")))
        if name.startswith("job"):
            rows.append((f"{name}: actor calls", seconds_of(name, "actor_s"), seconds_of(name, "actor_cpu_s")))
            rows.append((f"{name}: start-up", seconds_of(name, "startup_s"), None))
    print()
    # Wall-clock rates move with the machine's load; tokens per CPU-second of the encoding process
    # (all its threads) move much less on a shared machine.
    print(f"{'side (median of rounds)':26s} {'seconds':>8s} {'tokens/s':>9s} {'sent/s':>7s} {'/ bare':>7s} {'tok/CPU-s':>9s} {'/ bare':>7s}  vectors vs bare")
    bare_s = seconds_of("bare") if "bare" in sides else None
    bare_cpu = seconds_of("bare", "cpu_s") if "bare" in sides else None
    chars = np.array([len(t) for t in texts])  # what encode() sorts by
    padding = {  # the batchings each side computes: the embedder's (by tokens) and the authors' encode()'s
        "bare": _padded_tokens(tokens, tokens, spec.batch_size),
        "stage": _padded_tokens(tokens, tokens, spec.batch_size, rows_per_batch),
        "authors": _padded_tokens(tokens, chars, 32),
        "encode() at the embedder's batch size": _padded_tokens(tokens, chars, spec.batch_size),
    }
    for name, secs, cpu in rows:
        if name.endswith(": start-up"):
            print(f"{name:26s} {secs:8.1f}  (Ray, chunking, the actor's imports and model load)")
            continue
        ratio = f"{bare_s / secs:7.2f}" if bare_s else ""
        diff = differences.get(name.split(":")[0])
        note = "" if diff is None or name == "bare" else (f"1-cos {diff:.1e}" if name == "authors" else f"max|d| {diff:.1e}")
        per_cpu = f"{n_tokens / cpu:9.0f} {bare_cpu / cpu:7.2f}" if cpu and bare_cpu else f"{'':9s} {'':7s}"
        print(f"{name:26s} {secs:8.1f} {n_tokens / secs:9.0f} {n / secs:7.1f} {ratio} {per_cpu}  {note}")
    if bare_s:  # each round's bare beside the side in that round: what the alternation is for
        print("\nbare seconds / side seconds, round by round (wall):")
        for name in sides:
            key = "actor_s" if name.startswith("job") else "seconds"
            label = f"{name}: actor calls" if name.startswith("job") else name
            print(f"  {label:24s} " + "  ".join(f"{b['seconds'] / r[key]:.2f}" for b, r in zip(runs["bare"], runs[name])))
    print()
    print("token slots computed / tokens (padding): " + ", ".join(f"{k} {v / n_tokens:.3f}" for k, v in padding.items()))
    print(f"machine load (1 min) during the runs: {min(r['load1'] for rs in runs.values() for r in rs):.1f}-"
          f"{max(r['load1'] for rs in runs.values() for r in rs):.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "sentences": n, "tokens": n_tokens, "runs": runs, "differences": differences, "padding": padding,
            "embedder": {"backend": embedder.backend, "batch_size": spec.batch_size, "threads": embedder.threads, "streams": embedder.streams},
        }, indent=2))


if __name__ == "__main__":
    main()
