"""search (AgenticRAG): several reformulations at once, each a hybrid retrieval aggregated to documents.

Per query, keyword and semantic rankings of chunks give each document its best chunk's rank (packed:
arag.tools.packed_documents), fused as Σ 1/(RRF_K + rank); each query keeps its `search_results` best
(paper: 10) and the call returns their union ordered by the summed score (docs/agents.md, "AgenticRAG").
"""

from __future__ import annotations

import json
import re
from typing import Any

from arag.tools.base import ToolHost, MAX_KEYWORD_CHARS, MAX_KEYWORDS, Hit, ToolOptions, ToolResult, ToolSpec, SNIPPET
import arag.tools.packed_documents as packed_documents
from arag.tools.documents import DocumentLines, DocumentRef, DocumentSession, is_packed, load_document, session_of
from arag.tools.keyword import matching_sentences
from arag.tools.render import content_tokens, snippet_block
from arag.tools.packed_documents import DocumentCandidate
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
    "and meaning-based matching and brings its own best documents, and the documents found are merged "
    "(each once). Every result has a reference id "
    "(e.g. turn1search2), its title, its line numbers (lines 0-N), a snippet and the line the snippet starts at. "
    "The snippet is only a preview: use find to look for words or ideas inside a document, or open to read its "
    "lines (from the snippet's line, say)."
)

# A reformulation is a phrase or a short question. The bound is in the schema, so a grammar-constrained
# model closes the string: the 1.5B model otherwise grew its fifth query clause by clause until the
# reply limit cut the call, and at temperature 0 wrote the same cut call at every step.
MAX_SEARCH_QUERY_CHARS = 300

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "queries": {
            "type": "array",
            "items": {"type": "string", "maxLength": MAX_SEARCH_QUERY_CHARS},
            "minItems": 1,
            "maxItems": 5,
            "description": "One to five reformulations of what to look for.",
        }
    },
    "required": ["queries"],
    "additionalProperties": False,
}


def line_range(n_lines: int) -> str:
    """A document's size as the lines open and find take ("lines 0-1489", not "1490 lines", which
    small models passed to open as a line number)."""
    return f"lines 0-{n_lines - 1}" if n_lines > 0 else "no lines"


def query_keywords(query: str) -> list[str]:
    """The query's content words, in order, once each: the keywords of its keyword ranking."""
    words = [w for w in WORD.findall(query.lower()) if len(w) > 2 and w not in STOPWORDS]
    return [w[:MAX_KEYWORD_CHARS] for w in dict.fromkeys(words)][:MAX_KEYWORDS]


def ranked_documents(ctx: ToolHost, query: str, n: int) -> list[list[DocumentCandidate]]:
    """The keyword and the semantic ranking of documents, best first, each document once per ranking
    (packed: arag.tools.packed_documents); an index without sentence vectors has the keyword one only."""
    keywords = query_keywords(query)
    scored = ctx.store.keyword_top(keywords, n, narrow=ctx.accelerate) if keywords else None
    semantic = ctx.vectors.search(ctx.encode_query(query), SENTENCES_PER_RESULT * n) if ctx.store.index.has_vectors else None
    if is_packed(ctx):
        rankings = [] if scored is None else [packed_documents.keyword_documents(ctx, scored, keywords)]
        return rankings + ([] if semantic is None else [packed_documents.semantic_documents(ctx, *semantic)[:n]])
    chunk_rankings: list[list[tuple[int, list[str] | None]]] = [] if scored is None else [[(o, None) for o, _ in scored]]
    if semantic is not None:
        groups = group_by_chunk(ctx, *semantic)[:n]
        texts = iter(ctx.store.sentences_at([r for _, _, rows in groups for r in rows.tolist()]))  # one pass per part
        chunk_rankings.append([(o, [next(texts) for _ in rows]) for o, _, rows in groups])
    out = []
    for ranking in chunk_rankings:
        docs = ctx.store.chunk_rows([o for o, _ in ranking], ["doc_id"])["doc_id"]
        firsts: dict[str, DocumentCandidate] = {}
        for (o, sentences), doc in zip(ranking, docs):
            firsts.setdefault(doc, DocumentCandidate(doc, o, None, sentences))
        out.append(list(firsts.values()))
    return out


def run(ctx: ToolHost, args: dict[str, Any], options: ToolOptions) -> ToolResult:
    session = session_of(options)
    queries = list(dict.fromkeys(q.strip() for q in args["queries"]))
    n = session.settings.search_results  # per query
    fused: dict[str, float] = {}
    best: dict[str, tuple[float, DocumentCandidate, str]] = {}  # doc → (contribution, candidate, query)
    found: dict[str, None] = {}  # the union of every query's top n
    for query in queries:
        own: dict[str, float] = {}
        for ranking in ranked_documents(ctx, query, CANDIDATES_PER_RESULT * n):
            for rank, cand in enumerate(ranking, 1):
                doc = cand.doc_id
                contribution = 1.0 / (RRF_K + rank)
                own[doc] = own.get(doc, 0.0) + contribution
                fused[doc] = fused.get(doc, 0.0) + contribution
                if doc not in best or contribution > best[doc][0] or (contribution == best[doc][0] and best[doc][1].sentences is None and cand.sentences):
                    best[doc] = (contribution, cand, query)
        found.update(dict.fromkeys(sorted(own, key=lambda d: (-own[d], best[d][1].anchor))[:n]))
    top = sorted(found, key=lambda d: (-fused[d], best[d][1].anchor))
    session.searches += 1
    turn = session.searches
    hits = result_hits(ctx, top, fused, best)
    # Each document is read once, into the session (find and open reuse it): its lines give the
    # result's line range and the line its snippet starts at.
    documents = [load_document(ctx, session, d, best[d][1].anchor) for d in top]
    refs = [DocumentRef(f"turn{turn}search{rank}", doc.doc_id, hit.title, len(doc.lines), best[doc.doc_id][1].anchor)
            for rank, (doc, hit) in enumerate(zip(documents, hits), 1)]
    session.refs.update((ref.ref_id, ref) for ref in refs)
    starts = [snippet_line(doc, hit) for doc, hit in zip(documents, hits)]
    return ToolResult(
        tool=NAME,
        text=search_text(queries, refs, hits, starts),
        results=hits,
        retrieved_tokens=content_tokens(s for h in hits for s in h.snippets),
        details={"turn": turn, "ref_ids": [r.ref_id for r in refs], "documents": [r.doc_id for r in refs], "lines": [r.n_lines for r in refs],
                 "snippet_lines": starts},
    )


def snippet_line(document: DocumentLines, hit: Hit) -> int | None:
    """The document line of the hit's first snippet sentence (None if it is not a line of its own)."""
    if not hit.snippets:
        return None
    first = hit.snippets[0].strip()
    return next((i for i, line in enumerate(document.lines) if line.strip() == first), None)


def result_hits(ctx: ToolHost, top: list[str], fused: dict[str, float], best: dict) -> list[Hit]:
    rows = ctx.store.chunk_rows([best[d][1].anchor for d in top], ["chunk_id", "title", "s_start", "s_count", "text"])
    hits = []
    for i, doc in enumerate(top):
        _, cand, query = best[doc]
        sentences = cand.sentences
        if sentences is None:  # found by keywords: the chunk's sentences holding one
            start, count = rows["s_start"][i], rows["s_count"][i]
            all_sentences = ctx.store.sentences_at(range(start, start + count)) or [rows["text"][i]]
            sentences = matching_sentences(all_sentences, query_keywords(query))
        # A packed window lists every document it covers: the title is the document's own.
        title = cand.title if is_packed(ctx) else rows["title"][i]
        hits.append(Hit(chunk_id=rows["chunk_id"][i], score=fused[doc], snippets=sentences[:SNIPPET_SENTENCES], title=title, doc_id=doc))
    return hits


def search_text(queries: list[str], refs: list[DocumentRef], hits: list[Hit], starts: list[int | None]) -> str:
    asked = json.dumps([q if len(q) <= 200 else q[:200] + "…" for q in queries], ensure_ascii=False)
    if not hits:
        return f"search: no document found for {asked}."
    blocks = [f"search: {len(hits)} document{'s' if len(hits) != 1 else ''} for {asked}:"]
    for ref, hit, start in zip(refs, hits, starts):
        title = f" | title: {hit.title}" if hit.title else ""
        at = f" | snippet at line {start}" if start is not None else ""
        blocks.append(f"[{ref.ref_id}]{title} | document: {ref.doc_id} | {line_range(ref.n_lines)}{at}\n{snippet_block(hit.snippets)}")
    blocks.append("Snippets are previews. Use find (words or ideas inside a document) or open (its numbered lines) with a reference id.")
    return "\n\n".join(blocks)


def mirror(tracker: object, result: ToolResult) -> None:
    """The search's reference ids, into the client's session (a served index answered it)."""
    if not isinstance(tracker, DocumentSession) or result.error is not None:
        return
    details = result.details
    tracker.searches = max(tracker.searches, int(details["turn"]))
    for ref_id, doc_id, n_lines, hit in zip(details["ref_ids"], details["documents"], details["lines"], result.results):
        tracker.refs[ref_id] = DocumentRef(ref_id, doc_id, hit.title, int(n_lines))


def fit_schema(fn: dict[str, Any], documents: Any) -> None:
    """`max_queries` as the schema's limit; the texts name the paper's 5, so another limit is named
    instead and the model is told what the schema allows."""
    n = documents.max_queries
    props = fn["parameters"]["properties"]
    props["queries"]["maxItems"] = n
    if n == 1:
        props["queries"]["description"] = "Exactly one query."
        fn["description"] = fn["description"].replace("Give up to 5 different phrasings of what you look for in one call", "Give one phrasing of what you look for per call")
    elif n != 5:
        props["queries"]["description"] = f"One to {n} reformulations of what to look for."
        fn["description"] = fn["description"].replace("Give up to 5 different phrasings", f"Give up to {n} different phrasings")


SPEC = ToolSpec(name=NAME, description=DESCRIPTION, parameters=PARAMETERS, fn=run, evidence=SNIPPET, unit="document", encodes_queries=True, mirror=mirror,
                ref_entries=True, fit_schema=fit_schema)  # a preview snippet per document
