"""search (AgenticRAG): several reformulations at once, each a hybrid retrieval aggregated to documents.

Per query: the keyword ranking (A-RAG keyword_search scoring, the query's content words as keywords)
and the semantic ranking (A-RAG semantic_search: sentences grouped into chunks) each rank chunks; a
document takes the rank of its best chunk in each list, and its score is reciprocal-rank fusion
Σ 1/(RRF_K + rank) over both lists and over every query of the call. The top `search_results`
documents (a method setting, paper: 10) get reference ids `turn{t}search{n}` (t: the episode's
search call, n: the rank), a snippet (the best chunk's matching sentences), the title, the
document id and its length in lines. Each document appears once per call, however many queries
found it.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from arag.tools.base import ToolHost, MAX_KEYWORD_CHARS, MAX_KEYWORDS, MAX_QUERY_CHARS, Hit, ToolArgumentError, ToolOptions, ToolResult, ToolSpec
from arag.tools.documents import DocumentRef, document_line_counts, get_string_list, session_of
from arag.tools.keyword import keyword_scores, matching_sentences
from arag.tools.render import content_tokens, snippet_block
from arag.tools.semantic import SENTENCES_PER_RESULT, group_by_chunk


NAME = "search"
# Reciprocal-rank fusion constant (the usual 60): damps the weight of the very first ranks.
RRF_K = 60
# Chunks each ranking contributes per query, as a multiple of the results asked for.
CANDIDATES_PER_RESULT = 2
SNIPPET_SENTENCES = 3
WORD = re.compile(r"\w[\w'\-]*", re.UNICODE)
# Words too common to be keywords of a query (they match almost every chunk).
STOPWORDS = frozenset(
    "the a an and or of to in on at by for with from as is was were are be been being who whom whose what which when where why how "
    "did does do that this these those it its his her their there than then into about after before during also not no yes".split()
)

DESCRIPTION = (
    "Search the collection for documents. Give up to 5 different phrasings of what you look for in one "
    "call (names, a short statement, a question about one fact); each runs both exact keyword matching "
    "and meaning-based matching, and the documents found are merged. Every result has a reference id "
    "(e.g. turn1search2), its title, its length in lines and a snippet. The snippet is only a preview: "
    "use find to look for words or ideas inside a document, or open to read its lines."
)

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "queries": {
            "type": "array",
            "items": {"type": "string"},
            "minItems": 1,
            "maxItems": 5,
            "description": "One to five reformulations of what to look for.",
        }
    },
    "required": ["queries"],
    "additionalProperties": False,
}


def query_keywords(query: str) -> list[str]:
    """The query's content words, in order, once each: the keywords of its keyword ranking."""
    words = [w for w in WORD.findall(query.lower()) if len(w) > 2 and w not in STOPWORDS]
    return [w[:MAX_KEYWORD_CHARS] for w in dict.fromkeys(words)][:MAX_KEYWORDS]


def ranked_chunks(ctx: ToolHost, query: str, n: int) -> list[list[tuple[int, list[str] | None]]]:
    """The keyword and the semantic ranking of chunks: (ord, matched sentences or None) best first."""
    rankings: list[list[tuple[int, list[str] | None]]] = []
    keywords = query_keywords(query)
    if keywords:
        rankings.append([(o, None) for o, _ in keyword_scores(ctx, keywords, n)])
    scores, sids = ctx.search_sentences(ctx.encode_query(query), SENTENCES_PER_RESULT * n)
    groups = group_by_chunk(ctx, scores, sids)[:n]
    texts = iter(ctx.store.sentences_at(np.concatenate([rows for _, _, rows in groups])) if groups else [])
    rankings.append([(o, [next(texts) for _ in rows]) for o, _, rows in groups])
    return rankings


def run(ctx: ToolHost, args: dict[str, Any], options: ToolOptions) -> ToolResult:
    session = session_of(options)
    limit = session.settings.max_queries
    value = args.get("queries")
    if isinstance(value, list) and len(value) > limit:
        raise ToolArgumentError(f"too many queries ({len(value)}); give at most {limit} reformulations per search")
    queries = list(dict.fromkeys(q.strip() for q in get_string_list(args, "queries", max_items=limit, max_chars=MAX_QUERY_CHARS, example='"who directed Phoolwari"')))
    n = session.settings.search_results
    fused: dict[str, float] = {}
    best: dict[str, tuple[float, int, str, list[str] | None]] = {}  # doc → (contribution, ord, query, sentences)
    for query in queries:
        for ranking in ranked_chunks(ctx, query, CANDIDATES_PER_RESULT * n):
            if not ranking:
                continue
            docs = ctx.store.chunk_rows([o for o, _ in ranking], ["doc_id"])["doc_id"]
            seen: set[str] = set()
            for rank, ((ord_, sentences), doc) in enumerate(zip(ranking, docs), 1):
                if doc in seen:
                    continue
                seen.add(doc)
                contribution = 1.0 / (RRF_K + rank)
                fused[doc] = fused.get(doc, 0.0) + contribution
                if doc not in best or contribution > best[doc][0] or (contribution == best[doc][0] and best[doc][3] is None and sentences):
                    best[doc] = (contribution, ord_, query, sentences)
    top = sorted(fused, key=lambda d: (-fused[d], best[d][1]))[:n]
    turn = session.next_turn()
    hits = result_hits(ctx, top, fused, best)
    lengths = document_line_counts(ctx, top)
    refs = []
    for rank, hit in enumerate(hits, 1):
        ref = DocumentRef(f"turn{turn}search{rank}", hit.doc_id or "", hit.title, lengths.get(hit.doc_id or "", 0))
        session.refs[ref.ref_id] = ref
        refs.append(ref)
    return ToolResult(
        tool=NAME,
        text=search_text(queries, refs, hits),
        results=hits,
        retrieved_tokens=content_tokens(s for h in hits for s in h.snippets),
        details={"ref_ids": [r.ref_id for r in refs], "documents": [r.doc_id for r in refs]},
    )


def result_hits(ctx: ToolHost, top: list[str], fused: dict[str, float], best: dict) -> list[Hit]:
    if not top:
        return []
    rows = ctx.store.chunk_rows([best[d][1] for d in top], ["chunk_id", "title", "s_start", "s_count", "text"])
    hits = []
    for i, doc in enumerate(top):
        _, _, query, sentences = best[doc]
        if sentences is None:  # found by keywords: the chunk's sentences holding one
            all_sentences = ctx.store.sentence_texts(rows["s_start"][i], rows["s_count"][i]) or [rows["text"][i]]
            sentences = matching_sentences(all_sentences, query_keywords(query))
        hits.append(Hit(chunk_id=rows["chunk_id"][i], score=fused[doc], snippets=sentences[:SNIPPET_SENTENCES], title=rows["title"][i], doc_id=doc))
    return hits


def search_text(queries: list[str], refs: list[DocumentRef], hits: list[Hit]) -> str:
    asked = json.dumps([q if len(q) <= 200 else q[:200] + "…" for q in queries], ensure_ascii=False)
    if not hits:
        return f"search: no document found for {asked}."
    blocks = [f"search: {len(hits)} document{'s' if len(hits) != 1 else ''} for {asked}:"]
    for ref, hit in zip(refs, hits):
        title = f" | title: {hit.title}" if hit.title else ""
        blocks.append(f"[{ref.ref_id}]{title} | document: {ref.doc_id} | {ref.n_lines} line{'s' if ref.n_lines != 1 else ''}\n{snippet_block(hit.snippets)}")
    blocks.append("Snippets are previews. Use find (words or ideas inside a document) or open (its numbered lines) with a reference id.")
    return "\n\n".join(blocks)


SPEC = ToolSpec(name=NAME, description=DESCRIPTION, parameters=PARAMETERS, fn=run)
