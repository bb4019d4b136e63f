"""FAISS's IVF-PQ training and adding, written in torch: k-means for the coarse quantizer, 8-bit PQ
codebooks (all sub-quantizers trained at once), and encoding (nearest list + PQ codes).

Shared by benchmarks/gpu_embedding_kmeans.py (which times them on a GPU and on the CPU cores) and
tests/index/test_gpu_benchmark_kmeans.py (which checks them on the CPU, tiny). `torch` is passed in, so
importing this module does not import torch.
"""

from __future__ import annotations

import time

import numpy as np


def sync(torch, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def nearest(torch, x, centroids, chunk: int = 262_144):
    """Index of each row's nearest centroid (L2), in chunks: argmax of 2 x.c - |c|^2."""
    c_norm = (centroids * centroids).sum(1)
    out = torch.empty(x.shape[0], dtype=torch.int64, device=x.device)
    for i in range(0, x.shape[0], chunk):
        out[i : i + chunk] = (2 * x[i : i + chunk] @ centroids.T - c_norm).argmax(1)
    return out


def kmeans(torch, x, k: int, niter: int, seed: int = 1234):
    """Lloyd iterations from k random points; an empty cluster takes a perturbed copy of the largest
    one's centroid (FAISS splits the largest cluster the same way). Returns centroids, s/iteration."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    centroids = x[torch.randperm(x.shape[0], generator=g)[:k].to(x.device)].clone()
    times = []
    for _ in range(niter):
        start = time.perf_counter()
        assign = nearest(torch, x, centroids)
        sums = torch.zeros_like(centroids).index_add_(0, assign, x)
        counts = torch.bincount(assign, minlength=k).to(x.dtype)
        empty = counts == 0
        centroids = sums / counts.clamp(min=1).unsqueeze(1)
        if bool(empty.any()):
            largest = int(counts.argmax())
            n = int(empty.sum())
            centroids[empty] = centroids[largest] * (1 + 1e-3 * torch.randn(n, x.shape[1], device=x.device, generator=None))
        sync(torch, str(x.device))
        times.append(time.perf_counter() - start)
    return centroids, float(np.median(times))  # the median leaves out the first call's warm-up


def pq_kmeans(torch, residuals, m: int, niter: int, seed: int = 99):
    """m codebooks of 256 centroids at once: (m, n, dsub) batched Lloyd iterations."""
    n, d = residuals.shape
    sub = residuals.reshape(n, m, d // m).permute(1, 0, 2).contiguous()  # (m, n, dsub)
    g = torch.Generator(device="cpu").manual_seed(seed)
    books = sub[:, torch.randperm(n, generator=g)[:256].to(sub.device)].clone()  # (m, 256, dsub)
    for _ in range(niter):
        codes = pq_codes(torch, sub, books)
        sums = torch.zeros_like(books).scatter_add_(1, codes.unsqueeze(2).expand(-1, -1, d // m), sub)
        counts = torch.zeros(m, 256, device=sub.device, dtype=sub.dtype).scatter_add_(1, codes, torch.ones_like(codes, dtype=sub.dtype))
        books = torch.where(counts.unsqueeze(2) > 0, sums / counts.clamp(min=1).unsqueeze(2), books)
    return books


def pq_codes(torch, sub, books):
    """Nearest codeword per sub-vector: (m, n, dsub) x (m, 256, dsub) -> (m, n)."""
    b_norm = (books * books).sum(2).unsqueeze(1)  # (m, 1, 256)
    return (2 * torch.bmm(sub, books.transpose(1, 2)) - b_norm).argmax(2)


def encode(torch, x, centroids, books, chunk: int = 65_536):
    """IVF list and PQ codes of every row (what adding to the trained index computes)."""
    m = books.shape[0]
    lists = torch.empty(x.shape[0], dtype=torch.int64, device=x.device)
    codes = torch.empty(x.shape[0], m, dtype=torch.uint8, device=x.device)
    for i in range(0, x.shape[0], chunk):
        part = x[i : i + chunk]
        lists[i : i + chunk] = nearest(torch, part, centroids)
        residual = part - centroids[lists[i : i + chunk]]
        sub = residual.reshape(part.shape[0], m, -1).permute(1, 0, 2).contiguous()
        codes[i : i + chunk] = pq_codes(torch, sub, books).T.to(torch.uint8)
    return lists, codes
