"""What an index is, for the protocol card (arag.evaluation.protocol), as its manifest records it;
a tool server answers the same facts for the index it serves (GET /index)."""

from __future__ import annotations

from typing import Any, Mapping

from arag.index.ann import DEFAULT_PROBE_SLICES, search_settings


def manifest_facts(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """Embedder, chunking, vector search and, where recorded, the splitter and the embedder's query instruction and precision."""
    chunking = manifest.get("chunking") or {}
    embedding = manifest.get("embedding") or {}
    facts = {
        "embedder": embedding.get("model"),
        "chunking": chunking.get("mode"),
        "chunk_tokens": chunking.get("chunk_tokens"),
        "chunk_overlap": chunking.get("chunk_overlap"),
        "vector_search": vector_search_fact(manifest),
    }
    if chunking.get("splitter"):
        facts["splitter"] = chunking["splitter"]
    spec = embedding.get("spec")
    if isinstance(spec, Mapping):
        facts.update(embedder_facts(spec))
    return facts


def embedder_facts(spec: Mapping[str, Any]) -> dict[str, Any]:
    """An embedder's query instruction (its own text, or the model's named prompt) and precision."""
    prompt = spec.get("query_prompt") or (f"the model's {spec['query_prompt_name']!r} prompt" if spec.get("query_prompt_name") else None)
    return {"query_instruction": prompt, "dtype": spec.get("dtype") or "float32"}


SEARCH_KEYS = ("nprobe", "rerank", "probe_slices")
EACH_SHARDS_OWN = "each shard's own"


def _searched(manifest: Mapping[str, Any], given: tuple[int | None, ...]) -> tuple[dict[str, Any], str, dict[str, int], dict[str, int]]:
    """(the ANN entry, the shards' factory, the ANN's own search settings, those searched with: `given`
    (nprobe, rerank, probe_slices) where set, else its own)."""
    entry, shards = manifest.get("ann") or {}, (manifest.get("faiss") or {}).get("factory", "Flat")
    own = dict(zip(SEARCH_KEYS, (*search_settings(entry), DEFAULT_PROBE_SLICES))) if entry.get("factory") else {}
    return entry, shards, own, {k: v or own.get(k) for k, v in zip(SEARCH_KEYS, given)}


def vector_search_fact(manifest: Mapping[str, Any], nprobe: int | None = None, rerank: int | None = None, probe_slices: int | None = None) -> str:
    """How semantic_search scores a query against the sentences, given the tools' overrides: "exact" (every
    sentence's cosine, A-RAG §3.2) or "approximate: ..." naming the ANN, its search settings and the
    recall@10 its build measured (arag.index.ann_recall)."""
    entry, shards, own, used = _searched(manifest, (nprobe, rerank, probe_slices))
    if not own:
        return "exact" if shards == "Flat" else f"approximate: per-part {shards} shards, nprobe {nprobe or EACH_SHARDS_OWN}"
    recall = entry.get("recall") or {}
    measured = (f"recall@10 {recall['recall_at_10']} against exact search (target {recall.get('target')}) measured by the build at nprobe {own['nprobe']}, re-rank {own['rerank']}"
                if recall.get("recall_at_10") is not None else "no recall measured (built before recall targets)")
    return f"approximate: {entry['factory']}, nprobe {used['nprobe']}, re-rank {used['rerank']} per result, {used['probe_slices']} probe slices; {measured}"


def search_overrides(manifest: Mapping[str, Any], nprobe: int | None = None, rerank: int | None = None, probe_slices: int | None = None) -> dict[str, int]:
    """The tools' search settings that differ from what the index searches with by default: they change
    semantic_search's answers, so a run against a tool server that sets them is another run."""
    _, shards, own, used = _searched(manifest, (nprobe, rerank, probe_slices))
    if not own:  # exact shards ignore them; per-part IVF shards probe nprobe lists
        return {"nprobe": nprobe} if nprobe and shards != "Flat" else {}
    return {k: v for k, v in used.items() if v != own[k]}
