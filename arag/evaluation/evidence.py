"""Evidence recall: the supporting documents the agent saw and read, by what each tool or method
record declares (docs/evaluation.md, "Metrics"). Recall@k counts passages, as the A2RAG paper does,
whatever the chunking: a packed window of ten passages is ten ranks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

from arag.agent.episode import Episode
from arag.index.packing import COVERED_SEPARATOR
from arag.methods import evidence_of, shows_full_text
from arag.tools.base import NOT_EVIDENCE

TitleLookup = Callable[[list[str]], dict[str, str]]
TITLE_SEPARATOR = COVERED_SEPARATOR
# The ranks Recall@k is reported at (row columns evidence_recall_at_<k>).
RECALL_KS = (2, 5)
# The ranks citation recall is reported at (row columns citation_recall_at_<k>; the paper's R@1).
CITATION_KS = (1, 3)


def titles_covered(title: str | Sequence[str] | None) -> list[str]:
    if title is None:
        return []
    parts = title.split(TITLE_SEPARATOR) if isinstance(title, str) else list(title)
    return [t.strip() for t in parts if t and t.strip()]


def ranked_passages(ranked_titles: Sequence[str | Sequence[str] | None]) -> list[str]:
    """The passages (titles) the retrieved chunks cover, in rank order, each at its first place."""
    return list(dict.fromkeys(title for entry in ranked_titles for title in titles_covered(entry)))


def recall_at_k(ranked_titles: Sequence[str | Sequence[str] | None], supporting_titles: Iterable[str], k: int) -> float | None:
    """Share of the supporting titles among the first `k` passages retrieved; None without any."""
    if k < 1:
        raise ValueError(f"recall_at_k needs k >= 1, got {k}")
    wanted = {t.strip() for t in supporting_titles if t and t.strip()}
    return len(wanted & set(ranked_passages(ranked_titles)[:k])) / len(wanted) if wanted else None


def ranked_chunks(episode: Episode) -> list[str]:
    """Chunk ids in the order they first appeared in the episode's tool results."""
    calls = sorted(episode.tool_calls, key=lambda c: c.step)
    return list(dict.fromkeys(chunk_id for call in calls if evidence_of(call.name) != NOT_EVIDENCE for chunk_id in call.chunk_ids))


@dataclass(frozen=True)
class EvidenceRecall:
    n_supporting: int
    found_seen: int
    found_read: int
    at_k: dict[int, float | None] | None = None  # Recall@k over the passages retrieved, in retrieval order
    chunk_titles: dict[str, str] = field(default_factory=dict)  # the title field of each seen chunk looked up


def gold_chunks(chunk_titles: Mapping[str, str | None], supporting_titles: Iterable[str]) -> dict[str, list[str]]:
    wanted = {t.strip() for t in supporting_titles if t and t.strip()}
    marked = {c: [t for t in titles_covered(title) if t in wanted] for c, title in chunk_titles.items()}
    return {c: found for c, found in marked.items() if found}


def seen_and_read(calls: Iterable[tuple[str, Iterable[str]]], full_text: bool) -> tuple[set[str], set[str]]:
    """The chunk ids seen and read in full, from (record name, result chunk ids) per call."""
    shown = [(name, set(chunk_ids)) for name, chunk_ids in calls if evidence_of(name) != NOT_EVIDENCE]
    return set().union(*(ids for _, ids in shown)), set().union(*(ids for name, ids in shown if shows_full_text(name, full_text)))


def method_shows_full_text(agent: Mapping | None) -> bool:
    return bool(((agent or {}).get("method") or {}).get("full_text"))


def found_titles(seen: Iterable[str], read: Iterable[str], titles: Mapping[str, str | None], supporting_titles: Iterable[str]) -> tuple[int, int]:
    wanted = {t.strip() for t in supporting_titles if t and t.strip()}
    seen_titles = {t for c in seen for t in titles_covered(titles.get(c))}
    read_titles = {t for c in read for t in titles_covered(titles.get(c))}
    return len(wanted & seen_titles), len(wanted & read_titles)


def chunks_seen_and_read(episode: Episode) -> tuple[set[str], set[str]]:
    return seen_and_read(((c.name, c.chunk_ids) for c in episode.tool_calls), method_shows_full_text(episode.agent))


def citation_recall(episode: Episode, supporting_titles: Iterable[str]) -> dict[int, float | None]:
    """Recall@k of the documents an answer cites, ranked; None for methods that do not cite."""
    if not (episode.agent.get("method") or {}).get("cites"):
        return {k: None for k in CITATION_KS}
    docs: dict[str, str | None] = {}
    for c in episode.citations:
        docs.setdefault(c.get("doc_id") or c.get("ref_id"), c.get("title"))
    ranked = list(docs.values())
    return {k: recall_at_k(ranked, supporting_titles, k) for k in CITATION_KS}


def evidence_recall(episode: Episode, supporting_titles: Iterable[str], titles_of: TitleLookup | None) -> EvidenceRecall:
    wanted = {t.strip() for t in supporting_titles if t and t.strip()}
    if not wanted:
        return EvidenceRecall(0, 0, 0, {k: None for k in RECALL_KS})
    seen, read = chunks_seen_and_read(episode)
    titles = titles_of(sorted(seen)) if (seen and titles_of is not None) else {}
    found_seen, found_read = found_titles(seen, read, titles, wanted)
    ranked = [titles.get(c) for c in ranked_chunks(episode)]
    at_k = {k: recall_at_k(ranked, wanted, k) for k in RECALL_KS}
    return EvidenceRecall(len(wanted), found_seen, found_read, at_k, titles)
