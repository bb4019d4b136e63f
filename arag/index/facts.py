"""What an index is, for the protocol card (arag.evaluation.protocol), as its manifest records it;
a tool server answers the same facts for the index it serves (GET /index)."""

from __future__ import annotations

from typing import Any, Mapping


def manifest_facts(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """Embedder, chunking and, where recorded, the splitter and the embedder's query instruction and precision."""
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
