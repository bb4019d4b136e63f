"""chunk_read (A-RAG): the full text of chunks by id, with each chunk's previous and next chunk.

A chunk already read in the episode (ReadTracker) answers a short note and counts 0 tokens; repeated ids
are read once; unknown ids are named and the known ones still returned. Neighbours: position ∓ 1 in its
document (per_document), the previous/next window of its part (packed). A call with no new text fails
as `unknown_ids` when it named an id that does not exist, else `already_read` (arag.tools.failures).
"""

from __future__ import annotations

from typing import Any

from arag.index.parts import PACKED
from arag.index.tokens import RETRIEVED_TOKENS_TOKENIZER
from arag import small_sorted
from arag.tools.base import MAX_CHUNK_ID_CHARS, MAX_CHUNK_IDS, Hit, ToolHost, ToolOptions, ToolResult, ToolSpec, READ
from arag.tools.failures import ALREADY_READ, FAILURE, UNKNOWN_IDS
from arag.tools.render import chunk_read_text, content_tokens

NAME = "chunk_read"

DESCRIPTION = (
    "Read the complete text of one or more chunks, by the chunk ids shown in search results. Chunk "
    "ids have the form \"{chunk_id_format}\", for example \"{chunk_id_example}\". Search results only "
    "show snippets, which often leave out the fact you need or its context: read the chunks a search "
    "pointed to before you answer from them. Each chunk comes with the ids of the previous and next "
    "chunk, so you can read on when a passage continues. Chunks you already read in this "
    "conversation are not repeated. Read only the chunks you need: each one adds to the conversation."
)

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "chunk_ids": {
            "type": "array",
            "items": {"type": "string", "maxLength": MAX_CHUNK_ID_CHARS},
            "minItems": 1,
            "maxItems": MAX_CHUNK_IDS,
            "description": "Ids of the chunks to read, as shown in search results, for example [\"{chunk_id_example}\"].",
        }
    },
    "required": ["chunk_ids"],
    "additionalProperties": False,
}

_COLUMNS = ["chunk_id", "doc_id", "title", "position", "text"]


def stored_token_counts(ctx: ToolHost) -> bool:
    """Whether the index's `n_tokens` (counted with the tokenizer its manifest names: cl100k_base today)
    is the retrieved-token count; reading it saves about half of a chunk_read's time."""
    return (ctx.store.index.manifest.get("chunking") or {}).get("tokenizer") == RETRIEVED_TOKENS_TOKENIZER


def lookup_ids(ctx: ToolHost, chunk_ids: list[str]) -> dict[str, int]:
    """ord of each known chunk id (hashed id lookup in each part's cache)."""
    return {c: ords[0] for c, ords in ctx.store.find_chunks("chunk_id", chunk_ids).items()}


def chunk_titles(ctx: ToolHost, chunk_ids: list[str]) -> dict[str, str]:
    """{chunk id: title} of the given ids that exist and have a title (evaluation's evidence recall)."""
    found = lookup_ids(ctx, chunk_ids)
    rows = ctx.store.chunk_rows(list(found.values()), ["title"])
    return {c: t for c, t in zip(found, rows["title"]) if t is not None}


def neighbours(ctx: ToolHost, ords: list[int], doc_ids: list[str], positions: list[int]) -> list[tuple[str | None, str | None]]:
    """(previous id, next id) of each chunk: its document's chunks at position ∓ 1 (packed: its part's windows).
    The pipeline writes a document's chunks consecutively, so rows ord∓1 are read first; a document whose
    neighbour is not among them is looked up by doc_id ((doc_id, position) is unique, as chunk ids are)."""
    store = ctx.store
    if store.index.chunking_mode == PACKED:
        return window_neighbours(ctx, ords)
    wanted = [((doc, pos - 1) if pos > 0 else None, (doc, pos + 1)) for doc, pos in zip(doc_ids, positions)]
    ids = ids_by_place(ctx, sorted({o + d for o in ords for d in (-1, 1) if 0 <= o + d < store.num_chunks}))
    unseen = sorted({key[0] for pair in wanted for key in pair if key is not None and key not in ids})
    if unseen:
        ids.update(ids_by_place(ctx, sorted({o for found in store.find_chunks("doc_id", unseen).values() for o in found})))
    return [(ids.get(before), ids.get(after)) for before, after in wanted]  # no neighbour (None) is no key of ids


def ids_by_place(ctx: ToolHost, ords: list[int]) -> dict[tuple[str, int], str]:
    """{(doc_id, position): chunk_id} of the chunks at `ords`."""
    rows = ctx.store.chunk_rows(ords, ["doc_id", "position", "chunk_id"])
    return dict(zip(zip(rows["doc_id"], rows["position"]), rows["chunk_id"]))


def window_neighbours(ctx: ToolHost, ords: list[int]) -> list[tuple[str | None, str | None]]:
    """(previous id, next id) of each packed window: rows ord ∓ 1 of its part (written in order)."""
    offsets = ctx.store.chunk_offsets
    parts = (small_sorted.positions(offsets, ords, side="right") - 1).tolist()
    adjacent = [(o - 1 if o > offsets[w] else None, o + 1 if o + 1 < offsets[w + 1] else None) for o, w in zip(ords, parts)]
    probe = sorted({o for pair in adjacent for o in pair if o is not None})
    ids = dict(zip(probe, ctx.store.chunk_rows(probe, ["chunk_id"])["chunk_id"]))
    return [(ids.get(p), ids.get(n)) for p, n in adjacent]  # no neighbour (None) is no key of ids: it stays None


def run(ctx: ToolHost, args: dict[str, Any], options: ToolOptions) -> ToolResult:
    requested = list(dict.fromkeys(args["chunk_ids"]))  # read each id once, in the order asked
    found = lookup_ids(ctx, requested)
    known = [c for c in requested if c in found]
    unknown = [c for c in requested if c not in found]
    stored_counts = stored_token_counts(ctx)
    ords = [found[c] for c in known]
    rows = ctx.store.chunk_rows(ords, _COLUMNS + (["n_tokens"] if stored_counts else []))
    links = neighbours(ctx, ords, rows["doc_id"], rows["position"])
    tracker = options.tracker
    hits: list[Hit] = []
    for i, cid in enumerate(known):
        already = tracker is not None and tracker.seen(cid)
        hits.append(Hit(chunk_id=cid, snippets=[] if already else [rows["text"][i]], title=rows["title"][i], doc_id=rows["doc_id"][i],
                        prev_id=links[i][0], next_id=links[i][1], already_read=already))
        if tracker is not None:
            tracker.mark(cid)  # a chunk read before stays where it is in the reading order
    texts = {hit.chunk_id: hit.snippets[0] for hit in hits if not hit.already_read}
    text = chunk_read_text(hits, texts, unknown, "part" if ctx.store.index.chunking_mode == PACKED else "document", options.result_format)
    details: dict[str, Any] = {"unknown_ids": unknown} if unknown else {}
    if not texts:
        details[FAILURE] = UNKNOWN_IDS if unknown else ALREADY_READ
    tokens = sum(n for cid, n in zip(known, rows["n_tokens"]) if cid in texts) if stored_counts else content_tokens(texts.values())
    return ToolResult(tool=NAME, text=text, results=hits, retrieved_tokens=tokens, details=details)


SPEC = ToolSpec(name=NAME, description=DESCRIPTION, parameters=PARAMETERS, fn=run, evidence=READ, tracks_reads=True, shown_ids_argument="chunk_ids",
                result_settings=("result_titles",))
