"""keyword_search (A-RAG): chunks ranked by score(T) = Σ_i count(lower(k_i), lower(T)) · len(k_i).

count: non-overlapping occurrences (`str.count`), no word boundaries, the chunk's text only; a keyword
given twice counts twice; chunks scoring 0 are left out; ties by index order (`ord`), smaller first.
Snippets: the first `snippets_per_chunk` sentences holding a keyword. Counted from the part caches'
words and candidates (docs/tools.md, "Tools cache"); `accelerate=False` scores every chunk, same result.
"""

from __future__ import annotations

from typing import Any

from arag.tools.base import MAX_KEYWORD_CHARS, MAX_KEYWORDS, Hit, ToolHost, ToolOptions, ToolResult, ToolSpec, get_top_k, SNIPPET
from arag.tools.render import keyword_text, search_result

NAME = "keyword_search"

DESCRIPTION = (
    "Exact-match search: find chunks of the corpus that contain your keywords literally. Each keyword "
    "is matched as a case-insensitive substring of the chunk text (no stemming, no synonyms, no word "
    "boundaries: 'Paris' also matches 'Parisian'). A chunk scores the number of times each keyword "
    "occurs times the keyword's length, summed over keywords, so longer, rarer keywords weigh more. "
    "Returns the best chunks with only the sentences that contain a keyword: these snippets are "
    "previews, not the whole chunk, so read a promising chunk with chunk_read before relying on it.\n"
    "Keep every keyword short: one to three words, such as a name, a place, a title, a date, a number "
    "or a technical term that should appear verbatim in the source. Give several separate keywords "
    "(e.g. [\"Marie Curie\", \"Warsaw\"]) rather than a sentence; a whole question as one keyword "
    "almost never matches. Add spelling variants as extra keywords. Avoid common words ('the', 'was', "
    "'film'), which match almost everything. When you do not know the exact wording, or keywords find "
    "nothing useful, use semantic_search instead."
)

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "keywords": {
            "type": "array",
            "items": {"type": "string", "maxLength": MAX_KEYWORD_CHARS},
            "minItems": 1,
            "maxItems": MAX_KEYWORDS,
            "description": "Keywords to match literally (case-insensitive substrings of the chunk text), each one to three words.",
        },
        "top_k": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5, "description": "How many chunks to return (at most 20)."},
    },
    "required": ["keywords"],
    "additionalProperties": False,
}


def matching_sentences(sentences: list[str], lowered_keywords: list[str]) -> list[str]:
    """Sentences containing a keyword; if a match only spans a sentence break, the adjacent pair."""
    hits = [s for s, low in zip(sentences, map(str.lower, sentences)) if any(k in low for k in lowered_keywords)]  # each lowered once
    if hits or not sentences:
        return hits
    for a, b in zip(sentences, sentences[1:]):
        if any(k in f"{a} {b}".lower() or k in f"{a}\n{b}".lower() for k in lowered_keywords):
            return [a, b]
    return sentences[:1]


def run(ctx: ToolHost, args: dict[str, Any], options: ToolOptions) -> ToolResult:
    details: dict[str, Any] = {}
    keywords = args["keywords"]
    top_k = get_top_k(args, details)
    scored = ctx.store.keyword_top(keywords, top_k, narrow=ctx.accelerate)
    ords = [o for o, _ in scored]
    rows = ctx.store.chunk_rows(ords, ["chunk_id", "title", "doc_id"] + (["text"] if options.full_text else ["s_start", "s_count"]))
    if options.full_text:
        snippets = [[t] for t in rows["text"]]
    else:  # every hit's sentences in one read, then matched per hit
        counts = [max(int(n), 0) for n in rows["s_count"]]
        texts = iter(ctx.store.sentences_at([r for a, n in zip(rows["s_start"], counts) for r in range(a, a + n)]))
        lowered = [k.lower() for k in keywords]
        snippets = [options.result_format.cap(matching_sentences([next(texts) for _ in range(n)], lowered)) for n in counts]
    hits = [Hit(chunk_id=rows["chunk_id"][i], score=float(score), snippets=snippets[i], title=rows["title"][i], doc_id=rows["doc_id"][i])
            for i, (_, score) in enumerate(scored)]
    text = keyword_text(keywords, hits, options.full_text, details, options.result_format)
    return search_result(NAME, text, hits, options.full_text, details)


SPEC = ToolSpec(name=NAME, description=DESCRIPTION, parameters=PARAMETERS, fn=run, evidence=SNIPPET, result_settings=("snippets_per_chunk", "result_titles"))  # matched sentences (whole chunks for a full_text method)
