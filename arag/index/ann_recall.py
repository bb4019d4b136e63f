"""The recall an index's ANN keeps (`index.ann_recall`): measured at build time on held-out queries,
with the cheapest search settings that reach it (docs/indexing.md, "Index format", Recall target).

Re-ranking is exact, so recall at every re-rank depth comes from one search per `nprobe`. Estimated
cost, not measured time, picks the setting, so the choice does not depend on the machine's load.
No Ray here: arag.runtime.ann_job runs these functions as tasks where the vectors are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from arag.index import ann
from arag.index.layout import PART_SHIFT

RECALL_K = 10
DEFAULT_TARGET = 0.99
QUERY_SAMPLE = 1000
QUERY_SEED = 1  # not the training sample's seed: the queries are not the k-means sample
# Candidates re-ranked per result asked for; the searcher re-ranks at least ann.MIN_CANDIDATES.
RERANK_GRID = (16, 32, 64, 128, 256)
# Cost per query: codes scanned x code size x ns per code byte, plus candidates x ns per re-ranked row
# (one pread and its inner product): the medians `python -m benchmarks.fastscan_cost --rounds 7` printed
# on one core of the quiet 2-core development machine (IVF256 over 200k 256-d static vectors, PQ64 and
# PQ64x4fs on the same centroids, 256 results a query; rows re-ranked from a warm page cache).
SCAN_NS_PER_CODE_BYTE = 0.35
FASTSCAN_NS_PER_CODE_BYTE = 0.13
RERANK_NS_PER_ROW = 1120.0
EXACT_BLOCK_ROWS = 16_384
MISSING = np.iinfo(np.int64).max


class AnnRecallError(ValueError):
    pass


def check_recall_target(value: Any) -> float:
    """`value` as a float if it is a valid `index.ann_recall` (0 < target ≤ 1)."""
    try:
        target = float(value)
    except (TypeError, ValueError):
        target = math.nan
    if isinstance(value, bool) or not 0.0 < target <= 1.0:
        raise AnnRecallError(f"index.ann_recall={value!r} is not valid: a recall@{RECALL_K} target above 0 and at most 1, such as 0.99")
    return target


@dataclass(frozen=True)
class QuerySample:
    """Query vectors (Q, d) and the sentence each one is (-1 for a question: no sentence to leave out)."""

    vectors: np.ndarray
    self_ids: np.ndarray
    sentences: int
    questions: int


def sample_queries(flat_shards: dict[int, Path], part_rows: dict[int, int], size: int = QUERY_SAMPLE, seed: int = QUERY_SEED, questions: np.ndarray | None = None) -> QuerySample:
    """`size` stored sentence vectors drawn uniformly across the parts, and `questions` (already encoded)."""
    chosen = ann.sample_rows(part_rows, size, seed)
    vectors = [np.asarray(ann.map_flat_shard(flat_shards[p])[rows]) for p, rows in sorted(chosen.items())]
    ids = [(np.int64(p) << PART_SHIFT) | rows.astype(np.int64) for p, rows in sorted(chosen.items())]
    sentences = sum(len(r) for r in ids)
    if questions is not None and len(questions):
        vectors.append(np.asarray(questions, np.float32))
        ids.append(np.full(len(questions), -1, np.int64))
    return QuerySample(
        np.ascontiguousarray(np.concatenate(vectors) if vectors else np.zeros((0, 0)), dtype=np.float32),
        np.concatenate(ids) if ids else np.zeros(0, np.int64),
        sentences,
        0 if questions is None else len(questions),
    )


def exact_neighbours(flat_shard: Path, part: int, sample: QuerySample, k: int = RECALL_K) -> tuple[np.ndarray, np.ndarray]:
    """Each query's exact top `k` in one part, its own sentence left out (-inf / -1 where fewer)."""
    queries = sample.vectors
    best_s = np.full((len(queries), k), -np.inf, np.float32)
    best_i = np.full((len(queries), k), -1, np.int64)
    vectors = ann.map_flat_shard(flat_shard)
    for start in range(0, len(vectors), EXACT_BLOCK_ROWS):
        block = np.asarray(vectors[start : start + EXACT_BLOCK_ROWS])
        scores = queries @ block.T
        ids = (np.int64(part) << PART_SHIFT) | np.arange(start, start + len(block), dtype=np.int64)
        scores[sample.self_ids[:, None] == ids[None, :]] = -np.inf
        take = min(k, len(block))
        top = np.argpartition(-scores, take - 1, axis=1)[:, :take]
        best_s, best_i = _keep_best(np.hstack([best_s, np.take_along_axis(scores, top, 1)]), np.hstack([best_i, ids[top]]), k)
    return best_s, best_i


def merge_neighbours(per_part: list[tuple[np.ndarray, np.ndarray]], k: int = RECALL_K) -> np.ndarray:
    """The exact top-`k` sentence ids of every query over all parts (ties: smaller id)."""
    return _keep_best(np.hstack([s for s, _ in per_part]), np.hstack([i for _, i in per_part]), k)[1]


def _keep_best(scores: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the `k` best (score desc, then smaller id; missing entries, id -1, last)."""
    order = np.lexsort((np.where(ids < 0, np.iinfo(np.int64).max, ids), -scores), axis=1)[:, :k]
    return np.take_along_axis(scores, order, 1), np.take_along_axis(ids, order, 1)


def nprobe_grid(nlist: int) -> list[int]:
    return [2**i for i in range(int(math.log2(nlist)) + 1)] + ([] if nlist & (nlist - 1) == 0 else [nlist])


def candidates(rerank: int, n: int = RECALL_K) -> int:
    """Candidates the searcher re-ranks for `n` results at re-rank depth `rerank` (ann.AnnSearcher)."""
    return max(rerank * n, ann.MIN_CANDIDATES)


def scan_ns_per_code_byte(index: faiss.Index) -> float:
    return FASTSCAN_NS_PER_CODE_BYTE if isinstance(faiss.downcast_index(faiss.extract_index_ivf(index)), faiss.IndexIVFFastScan) else SCAN_NS_PER_CODE_BYTE


def cost_ns(codes_scanned: float, code_size: int, rerank: int, ns_per_code_byte: float = SCAN_NS_PER_CODE_BYTE) -> float:
    return codes_scanned * code_size * ns_per_code_byte + candidates(rerank) * RERANK_NS_PER_ROW


def measure(index: faiss.Index, sample: QuerySample, truth: np.ndarray, target: float, threads: int = 1) -> dict[str, Any]:
    """Recall@10 of `index` against the exact `truth` over the grid, and the cheapest setting reaching
    `target` (None if none does); nprobe grows until no larger one can be cheaper than the best found."""
    ivf = faiss.extract_index_ivf(index)
    sizes = np.asarray([ivf.invlists.list_size(i) for i in range(ivf.nlist)], np.int64)
    probes = nprobe_grid(ivf.nlist)
    _, lists = ivf.quantizer.search(sample.vectors, probes[-1])
    code_size = int(ivf.code_size)
    per_byte = scan_ns_per_code_byte(index)
    valid = truth >= 0
    # Each source of queries must reach the target on its own: questions are usually harder than
    # sentences, and 1,000 easy sentences would hide them in one mean.
    sources = {name: rows for name, rows in (("sentences", sample.self_ids >= 0), ("questions", sample.self_ids < 0)) if rows.any()}
    deepest = min(int(index.ntotal), candidates(RERANK_GRID[-1]) + 1)  # +1: the query's own sentence
    faiss.omp_set_num_threads(threads)
    grid: list[dict[str, Any]] = []
    best: dict[str, Any] | None = None
    for nprobe in probes:
        codes = float(sizes[lists[:, :nprobe]].sum(axis=1).mean())
        if best is not None and cost_ns(codes, code_size, RERANK_GRID[0], per_byte) >= best["cost_ns"]:
            break
        _, found = index.search(sample.vectors, deepest, params=faiss.SearchParametersIVF(nprobe=nprobe))
        ranks = _ranks(found, sample.self_ids, truth)
        for rerank in RERANK_GRID:
            hit = (ranks < candidates(rerank)) & valid
            by_source = {name: float(hit[rows].sum() / max(1, valid[rows].sum())) for name, rows in sources.items()}
            row = {"nprobe": nprobe, "rerank": rerank, "recall": round(min(by_source.values()), 4), "codes_scanned": round(codes), "cost_ns": round(cost_ns(codes, code_size, rerank, per_byte))}
            if len(by_source) > 1:
                row["by_source"] = {name: round(r, 4) for name, r in by_source.items()}
            grid.append(row)
            if row["recall"] >= target and (best is None or row["cost_ns"] < best["cost_ns"]):
                best = row
            if candidates(rerank) >= index.ntotal:
                break
    return {"best": best, "grid": grid, "code_size": code_size, "scan_ns_per_code_byte": per_byte}


def _ranks(found: np.ndarray, self_ids: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Each true neighbour's position in the PQ order, the query's own sentence removed (MISSING: not found)."""
    depth = found.shape[1]
    ranks = np.full(truth.shape, MISSING, np.int64)
    own = np.where((found == self_ids[:, None]).any(1), (found == self_ids[:, None]).argmax(1), depth)
    for start in range(0, len(found), 256):  # (queries, depth, k) booleans, a block of queries at a time
        eq = found[start : start + 256, :, None] == truth[start : start + 256, None, :]
        hit, pos = eq.any(1), eq.argmax(1)
        pos = pos - (own[start : start + 256, None] < pos)
        ranks[start : start + 256] = np.where(hit, pos, MISSING)
    return ranks


def sample_record(sentences: int, questions: int, seed: int = QUERY_SEED, questions_file: str | None = None, questions_digest: str | None = None) -> dict[str, Any]:
    record: dict[str, Any] = {"size": sentences + questions, "sentences": sentences, "seed": seed, "source": "stored sentence vectors drawn across all parts, each left out of its own search"}
    if questions:
        record.update(questions=questions, questions_file=questions_file, questions_sha256=questions_digest)
        record["source"] += f"; the first {questions} questions of {questions_file}, encoded as queries with the index's model"
    return record


def recall_record(target: float, measured: dict[str, Any], sample: dict[str, Any]) -> dict[str, Any]:
    """The manifest's `ann.recall` entry of an IVF index whose target was met."""
    best = measured["best"]
    return {
        "target": target,
        "recall_at_10": best["recall"],
        **({"by_source": best["by_source"]} if "by_source" in best else {}),
        "k": RECALL_K,
        "against": "exact inner-product search over every stored vector",
        "queries": sample,
        "cost_model": {"scan_ns_per_code_byte": measured["scan_ns_per_code_byte"], "rerank_ns_per_row": RERANK_NS_PER_ROW, "code_size": measured["code_size"]},
        "grid": measured["grid"],
    }


def search_record(best: dict[str, Any]) -> dict[str, Any]:
    """The manifest's `ann.search` entry: the settings semantic_search uses."""
    return {"nprobe": best["nprobe"], "rerank": best["rerank"], "candidates_for_10": candidates(best["rerank"]), "codes_scanned": best["codes_scanned"]}


def exact_record(target: float) -> dict[str, Any]:
    """An exact (flat) index's `ann.recall`: nothing approximate to measure."""
    return {"target": target, "recall_at_10": 1.0, "k": RECALL_K, "against": "exact search is the search"}


def unmet_error(target: float, factory: str, measured: dict[str, Any], tried: list[str]) -> AnnRecallError:
    top = max(measured["grid"], key=lambda r: r["recall"], default=None)
    reached = f"the best setting reached recall@{RECALL_K} {top['recall']:.4f} (nprobe {top['nprobe']}, rerank {top['rerank']})" if top else "nothing was measured"
    return AnnRecallError(
        f"index.ann_recall={target}: the ANN cannot reach it ({', '.join(tried or [factory])}; {reached}): "
        "lower index.ann_recall, choose a larger code in index.ann (e.g. more PQ bytes, SQ8 or Flat) or index.ann=flat"
    )
