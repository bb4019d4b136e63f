"""tests/support/torch_kmeans.py's FAISS-style k-means and PQ in torch (timed by
benchmarks/gpu_embedding_kmeans.py) compute what they claim
(run here on the CPU, tiny): nearest centroids are the brute-force nearest, Lloyd iterations lower
the squared error, and PQ codes pick each sub-vector's nearest codeword."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tests.support.torch_kmeans import encode, kmeans, nearest, pq_kmeans  # noqa: E402


def unit(n: int, d: int, seed: int) -> torch.Tensor:
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(seed))
    return x / x.norm(dim=1, keepdim=True)


def test_nearest_is_the_brute_force_nearest():
    x, c = unit(500, 16, 1), unit(37, 16, 2)
    assert torch.equal(nearest(torch, x, c, chunk=64), torch.cdist(x, c).argmin(1))


def test_kmeans_lowers_the_error_and_pq_codes_pick_the_nearest_codeword():
    x = unit(3000, 16, 3)
    one, _ = kmeans(torch, x, 32, 1)
    many, per_iter = kmeans(torch, x, 32, 8)
    error = lambda c: float(((x - c[nearest(torch, x, c)]) ** 2).sum())  # noqa: E731
    assert error(many) < error(one) and per_iter > 0
    books = pq_kmeans(torch, x - many[nearest(torch, x, many)], 4, 3)
    assert books.shape == (4, 256, 4)
    lists, codes = encode(torch, x, many, books, chunk=700)
    assert torch.equal(lists, nearest(torch, x, many))
    residual = (x - many[lists]).reshape(len(x), 4, 4)
    for m in range(4):
        assert torch.equal(codes[:, m].long(), torch.cdist(residual[:, m], books[m]).argmin(1))
