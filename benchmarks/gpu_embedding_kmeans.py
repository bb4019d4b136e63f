"""GPU rates behind cluster/README.md's estimates: sentence embedding and IVF-PQ training and adding.

Measurements on one GPU (the first and the last with a baseline on the same machine's CPU cores in
the same run):

* **Embedding**: `arag.index.embedding.SentenceEmbedder` (the embedding actors' own code) on CUDA,
  over the given sentences, in `rows_per_batch` slices as an embedding actor encodes a part;
  float16 (what `runtime=gpu_cluster` users set, `embedder.dtype=float16`) at several
  `embedder.batch_size` values, and float32. Baseline: the same sentences (a prefix) on the CPU
  in float32 with the default batch size, and float16 on the GPU over that same prefix for the
  ratio. The float16 vectors' cosine to the float32 ones says what the precision costs.
* **Split** (`--measure split`): the tokenizer alone and the model alone over the same float16
  batches, to see which one the GPU waits for.
* **Actors** (`--measure actors`): 1, 2 and 4 processes sharing the GPU, as embedding actors with
  `runtime.embed.num_gpus` 1, 0.5, 0.25 do, each encoding an equal share at once.
* **IVF-PQ training and adding, FAISS's algorithm in torch**: k-means for the coarse quantizer
  (`--nlist` lists, `--niter` iterations on `--train-size` vectors, what `index.ann=auto` plans
  for 10M vectors: IVF4096,PQ96 on 64 x 4096 samples), then 8-bit PQ codebooks on the residuals
  (`--pq` sub-quantizers of 256 centroids, all trained at once), then encoding `--vectors`
  vectors (nearest list + PQ codes). The vectors are the embedded sentences, resampled with
  noise up to `--vectors` (the rates depend on the count and dimension, not on the text).
  Everything in float32 with TF32 off, on both sides; baseline: three k-means iterations (the median) and
  `--cpu-vectors` vectors encoded on the CPU cores with the same code.

    python -m benchmarks.gpu_embedding_kmeans --model <MiniLM folder> --sentences <parquet with a text column> --out rates.json

The model folder may hold float16 weights (smaller to move): each measurement casts the model to
the precision it names. Prints one line per figure and writes them all to `--out`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path


import numpy as np

from tests.support.torch_kmeans import encode, kmeans, nearest, pq_kmeans, sync


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="a sentence-transformers folder (all-MiniLM-L6-v2)")
    p.add_argument("--sentences", required=True, help="a Parquet file with a `text` column")
    p.add_argument("--limit", type=int, default=200_000, help="sentences embedded per GPU measurement")
    p.add_argument("--batch-sizes", default="16,256,1024", help="embedder.batch_size values tried in float16")
    p.add_argument("--rows-per-batch", type=int, default=16_384, help="runtime.embed.rows_per_batch: texts per encode call")
    p.add_argument("--cpu-sentences", type=int, default=10_000, help="sentences embedded on the CPU (baseline)")
    p.add_argument("--vectors", type=int, default=10_000_000)
    p.add_argument("--nlist", type=int, default=4096)
    p.add_argument("--pq", type=int, default=96, help="PQ sub-quantizers (8 bits each)")
    p.add_argument("--train-size", type=int, default=64 * 4096)
    p.add_argument("--niter", type=int, default=25, help="k-means iterations, coarse and PQ (FAISS: 10 for an IVF's coarse quantizer, 25 for PQ codebooks)")
    p.add_argument("--cpu-vectors", type=int, default=500_000, help="vectors encoded on the CPU (baseline)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--measure", default="embedding,ivfpq", help="which measurements, of embedding, split (tokenizer vs model), actors (1, 2, 4 sharing the GPU), ivfpq (ivfpq alone embeds --limit sentences in float32 as its base)")
    p.add_argument("--out", default="gpu_rates.json")
    return p.parse_args(argv)


def embedder(model: str, device: str, dtype: str, batch_size: int):
    import torch

    from arag.index.embedding import EmbedderSpec, SentenceEmbedder

    emb = SentenceEmbedder(EmbedderSpec(name="all-MiniLM-L6-v2", path=model, device=device, dtype=dtype, batch_size=batch_size))
    emb.model.to(getattr(torch, dtype))  # the folder's weights may be stored in another precision
    return emb


def encode_rate(emb, texts: list[str], rows_per_batch: int, device: str) -> tuple[float, np.ndarray]:
    import torch

    emb.encode_documents(texts[: min(len(texts), 2048)])  # warm-up: kernels, allocator
    sync(torch, device)
    start = time.perf_counter()
    out = [emb.encode_documents(texts[i : i + rows_per_batch]) for i in range(0, len(texts), rows_per_batch)]
    sync(torch, device)
    return len(texts) / (time.perf_counter() - start), np.concatenate(out)


def measure_embedding(args, texts: list[str]) -> dict:
    import torch

    result: dict = {"sentences": len(texts), "mean_chars": float(np.mean([len(t) for t in texts])), "float16": {}}
    vectors16 = None
    for bs in [int(b) for b in args.batch_sizes.split(",")]:
        emb = embedder(args.model, args.device, "float16", bs)
        rate, vectors = encode_rate(emb, texts, args.rows_per_batch, args.device)
        result["float16"][str(bs)] = round(rate, 1)
        print(f"embedding float16 batch_size={bs}: {rate:,.0f} sentences/s", flush=True)
        vectors16 = vectors if vectors16 is None else vectors16
        del emb
    best = max(result["float16"], key=lambda k: result["float16"][k])
    emb = embedder(args.model, args.device, "float32", int(best))
    rate32, vectors32 = encode_rate(emb, texts, args.rows_per_batch, args.device)
    del emb
    cos = np.sum(vectors16 * vectors32, axis=1)
    result["float32"] = {best: round(rate32, 1)}
    result["float16_vs_float32_cosine"] = {"min": float(cos.min()), "mean": float(cos.mean())}
    print(f"embedding float32 batch_size={best}: {rate32:,.0f} sentences/s; float16 cosine to float32 min {cos.min():.5f}", flush=True)

    prefix = texts[: args.cpu_sentences]
    gpu = embedder(args.model, args.device, "float16", int(best))
    gpu_rate, _ = encode_rate(gpu, prefix, args.rows_per_batch, args.device)
    del gpu
    cpu = embedder(args.model, "cpu", "float32", 16)
    cpu_rate, _ = encode_rate(cpu, prefix, args.rows_per_batch, "cpu")
    del cpu
    torch.cuda.empty_cache() if args.device.startswith("cuda") else None
    result["same_prefix"] = {
        "sentences": len(prefix),
        "cpu_cores": os.cpu_count(),
        "cpu_float32_batch16": round(cpu_rate, 1),
        f"gpu_float16_batch{best}": round(gpu_rate, 1),
        "ratio_gpu_over_cpu": round(gpu_rate / cpu_rate, 1),
    }
    print(f"embedding, first {len(prefix):,} sentences: CPU ({os.cpu_count()} cores, float32, batch 16) {cpu_rate:,.0f}/s, "
          f"GPU (float16, batch {best}) {gpu_rate:,.0f}/s: {gpu_rate / cpu_rate:.1f}x", flush=True)
    return result, vectors32


def measure_split(args, texts: list[str], batch_size: int = 1024) -> dict:
    """Where a float16 GPU encode spends its time: the tokenizer (CPU, the encoding process) alone,
    then the model alone over the same batches already tokenized and on the GPU."""
    import torch

    emb = embedder(args.model, args.device, "float16", batch_size)
    model = emb.model
    order = np.argsort([-len(t) for t in texts], kind="stable")  # as encode() batches them
    batches = [[texts[i] for i in order[j : j + batch_size]] for j in range(0, len(texts), batch_size)]
    start = time.perf_counter()
    features = [model.tokenize(b) for b in batches]
    tokenize_rate = len(texts) / (time.perf_counter() - start)
    features = [{k: (v.to(args.device) if hasattr(v, "to") else v) for k, v in f.items()} for f in features]
    with torch.inference_mode():
        model(features[0])
        sync(torch, args.device)
        start = time.perf_counter()
        for f in features:
            model(f)
        sync(torch, args.device)
    forward_rate = len(texts) / (time.perf_counter() - start)
    print(f"float16 batch {batch_size}: tokenizing alone {tokenize_rate:,.0f} sentences/s, the model alone {forward_rate:,.0f} sentences/s", flush=True)
    return {"batch_size": batch_size, "sentences": len(texts), "tokenize_per_s": round(tokenize_rate), "model_per_s": round(forward_rate),
            "tokenizers_parallelism": os.environ.get("TOKENIZERS_PARALLELISM")}


def _actor_encode(model: str, device: str, texts: list[str], rows_per_batch: int, ready, start, done) -> None:
    """One embedding actor's share: load and warm up, say so, wait for the others, encode, report."""
    import torch

    emb = embedder(model, device, "float16", 1024)
    emb.encode_documents(texts[:1024])
    sync(torch, device)
    ready.put(1)
    start.wait()
    began = time.perf_counter()
    for i in range(0, len(texts), rows_per_batch):
        emb.encode_documents(texts[i : i + rows_per_batch])
    sync(torch, device)
    done.put(time.perf_counter() - began)


def measure_actors(args, texts: list[str], counts=(1, 2, 4)) -> dict:
    """Embedding actors sharing one GPU (`runtime.embed.num_gpus` = 1 / actors): each a process with
    its own model and tokenizer, all loaded before any starts, encoding an equal share of the
    sentences at once; the rate is all the sentences over the slowest actor's time."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    out = {}
    for n in counts:
        ready, start, done = ctx.Queue(), ctx.Event(), ctx.Queue()
        share = len(texts) // n
        procs = [ctx.Process(target=_actor_encode, args=(args.model, args.device, texts[i * share : (i + 1) * share], args.rows_per_batch, ready, start, done)) for i in range(n)]
        for p in procs:
            p.start()
        for _ in procs:
            ready.get(timeout=600)
        start.set()
        seconds = [done.get(timeout=600) for _ in procs]
        for p in procs:
            p.join()
        out[str(n)] = round(share * n / max(seconds), 1)
        print(f"{n} embedding actor(s) on one GPU, float16 batch 1024: {out[str(n)]:,.0f} sentences/s", flush=True)
    return {"sentences": len(texts), "sentences_per_s_by_actors": out}


def synthetic_vectors(torch, base, count: int, device: str, seed: int = 7):
    """`count` unit vectors near the embedded sentences (resampled with noise), built in slices."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    out = torch.empty(count, base.shape[1], dtype=torch.float32, device=device)
    step = 1_000_000
    for i in range(0, count, step):
        n = min(step, count - i)
        rows = base[torch.randint(base.shape[0], (n,), generator=g).to(base.device)]
        noisy = rows + 0.05 * torch.randn(n, base.shape[1], generator=g).to(device)
        out[i : i + n] = noisy / noisy.norm(dim=1, keepdim=True)
    return out


def measure_ivfpq(args, vectors32: np.ndarray) -> dict:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    base = torch.from_numpy(vectors32).to(args.device)
    x = synthetic_vectors(torch, base, args.vectors, args.device)
    train = x[: args.train_size]
    sync(torch, args.device)
    start = time.perf_counter()
    centroids, per_iter = kmeans(torch, train, args.nlist, args.niter)
    books = pq_kmeans(torch, train - centroids[nearest(torch, train, centroids)], args.pq, args.niter)
    sync(torch, args.device)
    train_s = time.perf_counter() - start
    start = time.perf_counter()
    lists, codes = encode(torch, x, centroids, books)
    sync(torch, args.device)
    add_s = time.perf_counter() - start
    print(f"IVF{args.nlist},PQ{args.pq} on {args.device}: training on {args.train_size:,} vectors {train_s:.1f} s "
          f"({per_iter * 1000:.0f} ms per coarse iteration); encoding {args.vectors:,} vectors {add_s:.1f} s "
          f"({args.vectors / add_s:,.0f}/s)", flush=True)
    del x, lists, codes

    # Baseline: the same code on this machine's CPU cores, float32.
    torch.set_num_threads(os.cpu_count() or 1)
    cpu_train = train.cpu()
    _, cpu_per_iter = kmeans(torch, cpu_train, args.nlist, 3)
    cpu_x = synthetic_vectors(torch, base.cpu(), args.cpu_vectors, "cpu", seed=8)
    start = time.perf_counter()
    encode(torch, cpu_x, centroids.cpu(), books.cpu())
    cpu_add_rate = args.cpu_vectors / (time.perf_counter() - start)
    gpu_add_rate = args.vectors / add_s
    print(f"CPU ({os.cpu_count()} cores, same code): {cpu_per_iter * 1000:.0f} ms per coarse iteration "
          f"({cpu_per_iter / per_iter:.0f}x the GPU's), encoding {cpu_add_rate:,.0f} vectors/s ({gpu_add_rate / cpu_add_rate:.0f}x slower)", flush=True)
    return {
        "factory": f"IVF{args.nlist},PQ{args.pq}",
        "train_size": args.train_size,
        "niter": args.niter,
        "vectors": args.vectors,
        "gpu_train_s": round(train_s, 2),
        "gpu_coarse_iteration_ms": round(per_iter * 1000, 1),
        "gpu_encode_s": round(add_s, 2),
        "gpu_encode_vectors_per_s": round(gpu_add_rate),
        "cpu_cores": os.cpu_count(),
        "cpu_coarse_iteration_ms": round(cpu_per_iter * 1000, 1),
        "cpu_encode_vectors_per_s": round(cpu_add_rate),
        "ratio_coarse_iteration_cpu_over_gpu": round(cpu_per_iter / per_iter, 1),
        "ratio_encode_gpu_over_cpu": round(gpu_add_rate / cpu_add_rate, 1),
    }


def main(argv=None) -> int:
    args = parse_args(argv)
    import pyarrow.parquet as pq
    import torch

    texts = pq.read_table(args.sentences, columns=["text"]).column("text").to_pylist()[: args.limit]
    device_name = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else platform.processor() or "cpu"
    print(f"device: {device_name}; torch {torch.__version__}; {len(texts):,} sentences", flush=True)
    measure = set(args.measure.split(","))
    embedding = vectors32 = ivfpq = split = actors = None
    if "actors" in measure:
        actors = measure_actors(args, texts)
    if "split" in measure:
        split = measure_split(args, texts)
    if "embedding" in measure:
        embedding, vectors32 = measure_embedding(args, texts)
    if "ivfpq" in measure:
        if vectors32 is None:
            vectors32 = encode_rate(embedder(args.model, args.device, "float32", 1024), texts, args.rows_per_batch, args.device)[1]
        ivfpq = measure_ivfpq(args, vectors32)
    out = {"device": device_name, "torch": torch.__version__, "cpu_cores": os.cpu_count(), "embedding": embedding, "split": split, "actors": actors, "ivfpq": ivfpq}
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
