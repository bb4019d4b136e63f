"""What an index is, for the protocol card (arag.evaluation.protocol): its embedder with the query
instruction and precision it encodes with, its chunking and its sentence splitter, as its manifest
records them. A tool server answers the same facts for the index it serves (GET /index,
arag.serve.tool_service), so a run against a served index records them too."""

from __future__ import annotations

from typing import Any, Mapping


def manifest_facts(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The card's facts of an index, from its manifest: embedder, chunking and, where the manifest
    records them, the sentence splitter and the embedder's query instruction and precision
    (a served index answers the same, arag.serve.tool_service)."""
    chunking = manifest.get("chunking") or {}
    embedding = manifest.get("embedding") or {}
    facts = {
        "embedder": embedding.get("model"),
        "chunking": chunking.get("mode"),
        "chunk_tokens": chunking.get("chunk_tokens"),
        "chunk_overlap": chunking.get("chunk_overlap"),
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
