"""Evidence recall: how many of a question's supporting documents the agent got to.

Two levels, from the episode's tool calls (their result chunk ids):
  seen: the chunk appeared in any tool's results (a search snippet, a whole chunk, a chunk_read);
  read: the chunk's full text was put into the context: chunk_read, naive_embedding_search (whole
        chunks, also naive_rag's retrieval), or keyword/semantic search of a `full_text` method.
`read` is a subset of `seen`. A supporting title counts when any chunk of a document with that
title is in the set; recall = found titles / supporting titles (None when a question lists none).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from arag.agent.records import Episode

# Tools whose results always carry whole chunk texts.
FULL_TEXT_TOOLS = frozenset({"chunk_read", "naive_embedding_search", "graph_retrieval"})  # graph_retrieval: A2RAG's stages
# Tools that show whole chunks only when the method asks for full text (the no-chunk_read ablation).
SNIPPET_TOOLS = frozenset({"keyword_search", "semantic_search"})

# chunk ids -> {chunk id: title} for the ids that exist (the tool context's index).
TitleLookup = Callable[[list[str]], dict[str, str]]


@dataclass(frozen=True)
class EvidenceRecall:
    n_supporting: int
    found_seen: int
    found_read: int

    @property
    def recall_seen(self) -> float | None:
        return self.found_seen / self.n_supporting if self.n_supporting else None

    @property
    def recall_read(self) -> float | None:
        return self.found_read / self.n_supporting if self.n_supporting else None


def chunks_seen_and_read(episode: Episode) -> tuple[set[str], set[str]]:
    full_text = bool((episode.agent.get("method") or {}).get("full_text"))
    seen: set[str] = set()
    read: set[str] = set()
    for call in episode.tool_calls:
        ids = set(call.chunk_ids)
        seen |= ids
        if call.name in FULL_TEXT_TOOLS or (full_text and call.name in SNIPPET_TOOLS):
            read |= ids
    return seen, read


def evidence_recall(episode: Episode, supporting_titles: Iterable[str], titles_of: TitleLookup | None) -> EvidenceRecall:
    wanted = {t.strip() for t in supporting_titles if t and t.strip()}
    if not wanted:
        return EvidenceRecall(0, 0, 0)
    seen, read = chunks_seen_and_read(episode)
    titles = titles_of(sorted(seen)) if (seen and titles_of is not None) else {}
    seen_titles = {titles[c].strip() for c in seen if c in titles}
    read_titles = {titles[c].strip() for c in read if c in titles}
    return EvidenceRecall(len(wanted), len(wanted & seen_titles), len(wanted & read_titles))
