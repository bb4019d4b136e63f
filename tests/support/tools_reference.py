"""Straightforward reference implementations of the tools' definitions, for tests and benchmarks.

They favour obviousness over speed: a Python loop over every chunk for keywords (the way the
original A-RAG scripts do it) and a dense matrix product over every sentence vector for semantic
search. Ties use the same rules as the tools: index order for chunks, sentence id for sentences.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np


def keyword_scores(texts: Iterable[str], keywords: list[str], top_k: int, lowered_texts: bool = False) -> list[tuple[int, int]]:
    """(chunk ordinal, score) of the top_k chunks; score = Σ text.lower().count(k.lower()) · len(k).

    lowered_texts: the texts are already lowered (as a search over a prepared corpus would keep them).
    """
    lowered = [(k.lower(), len(k)) for k in keywords]
    scored = []
    for i, text in enumerate(texts):
        t = text if lowered_texts else text.lower()
        score = sum(t.count(k) * n for k, n in lowered)
        if score > 0:
            scored.append((-score, i))
    scored.sort()
    return [(i, -s) for s, i in scored[:top_k]]


def sentence_ranking(vectors: np.ndarray, ids: np.ndarray, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All sentences by cosine (unit vectors: inner product), best first, ties by smaller id."""
    scores = vectors @ query.reshape(-1)
    order = np.lexsort((ids, -scores))
    return scores[order], ids[order]


def semantic_chunks(vectors: np.ndarray, ids: np.ndarray, chunk_of: dict[int, int], query: np.ndarray, top_k: int) -> list[tuple[int, float, list[int]]]:
    """A-RAG semantic search by brute force: (chunk ordinal, best score, sentence ids in order)."""
    scores, sids = sentence_ranking(vectors, ids, query)
    scores, sids = scores[: 3 * top_k], sids[: 3 * top_k]
    groups: dict[int, list[int]] = {}
    best: dict[int, float] = {}
    for s, sid in zip(scores.tolist(), sids.tolist()):
        c = chunk_of[sid]
        groups.setdefault(c, []).append(sid)
        best[c] = max(best.get(c, -np.inf), s)
    order = sorted(groups, key=lambda c: (-best[c], c))[:top_k]
    return [(c, best[c], sorted(groups[c])) for c in order]


def naive_chunks(vectors: np.ndarray, ids: np.ndarray, chunk_of: dict[int, int], query: np.ndarray, top_k: int) -> list[tuple[int, float]]:
    """Chunks by max sentence similarity over all their sentences: (chunk ordinal, score)."""
    scores = vectors @ query.reshape(-1)
    best: dict[int, float] = {}
    for s, sid in zip(scores.tolist(), ids.tolist()):
        c = chunk_of[sid]
        best[c] = max(best.get(c, -np.inf), s)
    order = sorted(best, key=lambda c: (-best[c], c))[:top_k]
    return [(c, best[c]) for c in order]
