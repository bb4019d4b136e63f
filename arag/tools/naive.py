"""naive_embedding_search (A-RAG Naive): whole chunks ranked by their best sentence's cosine to the query.

The top_k chunks are the first top_k distinct chunks met walking sentences from most to least
similar, so it fetches 3·top_k sentences and doubles that until top_k chunks are found (or none are
left); on exact (Flat) shards this equals brute force. Ties as in semantic_search.
"""

from __future__ import annotations

from typing import Any

from arag.tools.base import ToolHost, ToolOptions, ToolResult, ToolSpec, get_top_k, require_vectors, READ
from arag.tools.render import search_result, similarity_text
from arag.tools.semantic import PARAMETERS, SENTENCES_PER_RESULT, WARM_UP, group_by_chunk, hits_for

NAME = "naive_embedding_search"

DESCRIPTION = (
    "Retrieve the corpus chunks most similar in meaning to a natural-language query and read their "
    "full text. A chunk's similarity is that of its sentence closest to the query. Write the query as "
    "a short, self-contained question or statement about one fact; for a multi-hop question, retrieve "
    "one hop at a time, and search again with a reformulated query if the chunks do not contain the "
    "answer."
)


def top_chunks(ctx: ToolHost, query: str, top_k: int):
    qvec = ctx.encode_query(query)
    total = ctx.store.num_sentences
    n = SENTENCES_PER_RESULT * top_k
    while True:
        scores, sids = ctx.vectors.search(qvec, n)
        groups = group_by_chunk(ctx, scores, sids)
        if len(groups) >= top_k or n >= total or len(sids) < n:
            return groups[:top_k]
        n = min(2 * n, total)


def run(ctx: ToolHost, args: dict[str, Any], options: ToolOptions) -> ToolResult:
    details: dict[str, Any] = {}
    query = args["query"]
    top_k = get_top_k(args, details)
    require_vectors(ctx, NAME)
    hits = hits_for(ctx, top_chunks(ctx, query, top_k), full_text=True)
    return search_result(NAME, similarity_text(query, hits, True, details, options.result_format), hits, True, details)


SPEC = ToolSpec(name=NAME, description=DESCRIPTION, parameters=PARAMETERS, fn=run, evidence=READ, encodes_queries=True, warm_up=WARM_UP, result_settings=("result_titles",))  # whole chunks
