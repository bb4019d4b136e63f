"""semantic_search (A-RAG): the top 3·top_k sentences by cosine over every shard, grouped into chunks.

The query is encoded with the index's own model (and its query prompt); a chunk scores its best
sentence and shows its matched sentences in text order. Ties: equal sentence scores by smaller
sentence id, equal chunk scores by index order (smaller `ord`). On exact (Flat) shards this equals
brute-force cosine over all sentence vectors.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from arag.tools.base import MAX_QUERY_CHARS, Hit, ToolHost, ToolOptions, ToolResult, ToolSpec, get_top_k, require_vectors, SNIPPET
from arag.tools.render import search_result, similarity_text

NAME = "semantic_search"
SENTENCES_PER_RESULT = 3

DESCRIPTION = (
    "Meaning-based search: find chunks whose sentences are close in meaning to a natural-language "
    "query, using the embedding model of the index. Prefer it over keyword_search when you do not know "
    "the exact words of the source (paraphrases, descriptions, relations such as 'the director of the "
    "film that won ...'), or when keyword searches return nothing relevant. Write the query as a short, "
    "self-contained statement or question about one fact; for a multi-hop question, search one hop at "
    "a time. Returns the best chunks with their matching sentences and cosine similarity (higher is "
    "closer). The sentences are previews, not the whole chunk: read a promising chunk with chunk_read "
    "before answering from it. For exact names, dates or identifiers, keyword_search is usually more "
    "precise."
)

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "maxLength": MAX_QUERY_CHARS, "description": "What to look for, in natural language."},
        "top_k": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5, "description": "How many chunks to return (at most 20)."},
    },
    "required": ["query"],
    "additionalProperties": False,
}


# A call that loads the query encoder (a tool server's warm start).
WARM_UP = {"query": "warm start", "top_k": 1}


def group_by_chunk(ctx: ToolHost, scores: np.ndarray, sids: np.ndarray) -> list[tuple[int, float, np.ndarray]]:
    """(chunk ord, best score, sentence rows in text order) per chunk, best chunk first."""
    rows = ctx.store.sentence_rows(sids)
    ords = ctx.store.chunk_of_sentence_rows(rows)
    groups: dict[int, list[int]] = {}
    best: dict[int, float] = {}
    for o, r, s in zip(ords.tolist(), rows.tolist(), scores.tolist()):
        groups.setdefault(o, []).append(r)
        best[o] = max(best.get(o, -np.inf), s)
    order = sorted(groups, key=lambda o: (-best[o], o))
    return [(o, best[o], np.asarray(sorted(groups[o]), dtype=np.int64)) for o in order]


def run(ctx: ToolHost, args: dict[str, Any], options: ToolOptions) -> ToolResult:
    details: dict[str, Any] = {}
    query = args["query"]
    top_k = get_top_k(args, details)
    require_vectors(ctx, NAME)
    scores, sids = ctx.vectors.search(ctx.encode_query(query), SENTENCES_PER_RESULT * top_k)
    groups = group_by_chunk(ctx, scores, sids)[:top_k]
    hits = hits_for(ctx, groups, full_text=options.full_text)
    text = similarity_text(query, hits, options.full_text, details, options.result_format)
    return search_result(NAME, text, hits, options.full_text, details)


def hits_for(ctx: ToolHost, groups: list[tuple[int, float, np.ndarray]], full_text: bool) -> list[Hit]:
    rows = ctx.store.chunk_rows([o for o, _, _ in groups], ["chunk_id", "title", "doc_id"] + (["text"] if full_text else []))
    if full_text:
        snippets = [[t] for t in rows["text"]]
    else:  # every group's matched sentences in one read, then cut back into groups
        texts = iter(ctx.store.sentences_at([r for _, _, group in groups for r in group.tolist()]))
        snippets = [[next(texts) for _ in group] for _, _, group in groups]
    return [
        Hit(chunk_id=rows["chunk_id"][i], score=float(score), snippets=snippets[i], title=rows["title"][i], doc_id=rows["doc_id"][i])
        for i, (_, score, _) in enumerate(groups)
    ]


SPEC = ToolSpec(name=NAME, description=DESCRIPTION, parameters=PARAMETERS, fn=run, evidence=SNIPPET, encodes_queries=True, warm_up=WARM_UP, result_settings=("result_titles",))  # the closest sentences (whole chunks for a full_text method)
