"""The per-document summaries A2RAG's gate compares a question with (the paper's Sec. III-B1: "for
each document we precompute a short summary during indexing"; Gate(q) = 1{max_j cos(q, s_j) ≥ τ_g}).
The paper does not say how they are written: an LLM summary of the first chunk is our reading
(docs/agents.md, "The graph job")."""

from __future__ import annotations

from typing import Any, Mapping

from arag.graph.extract import ChatModelTask, ExtractionReject, parse_json_reply, unfenced

SUMMARY_MODES = ("llm", "extractive")
EXTRACTIVE_LABEL = "extractive"
# Our wording: a short, self-contained summary that names what the document is about, so that an
# in-scope question lands close to it in embedding space.
SUMMARY_PROMPT = (
    "Summarise the document in one or two sentences for a search index: name the person, place, work "
    "or thing it is about and the main facts it gives. Reply with JSON only: {\"summary\": \"...\"}."
)
SUMMARY_SCHEMA = {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]}
SUMMARY_MAX_CHARS = 600


def summary_mode(summaries: str | None, extractor_cfg: Mapping[str, Any]) -> str:
    """`graph.summaries`, or when it is null: llm with a model configured, else extractive."""
    mode = summaries if summaries is not None else ("llm" if extractor_cfg.get("model") else EXTRACTIVE_LABEL)
    if mode not in SUMMARY_MODES:
        raise ValueError(f"graph.summaries must be {' or '.join(SUMMARY_MODES)} (or null), got {mode!r}")
    if mode == "llm" and not extractor_cfg.get("model"):
        raise ValueError("graph.summaries=llm needs graph.extractor.model (a model config, e.g. model@graph.extractor.model=llamacpp_qwen2.5_coder_1.5b)")
    return mode


class LLMSummariser(ChatModelTask):
    def __init__(self, model: Mapping[str, Any], backend: Any = None):
        super().__init__(model, SUMMARY_PROMPT, max_tokens=256, backend=backend)

    def summarise(self, title: str, text: str) -> str:
        return parse_summary(self.reply(f"Document (title: {title}):\n{text}", SUMMARY_SCHEMA), json_reply=self.json_protocol)


def parse_summary(raw: str, json_reply: bool = True) -> str:
    """The summary of a JSON reply (with `json_reply=False` plain text too); else `ExtractionReject`."""
    text = unfenced(raw)
    if json_reply or text.startswith("{"):
        data = parse_json_reply(raw, "summary: ")
        text = str(data.get("summary") or "").strip() if isinstance(data, dict) else ""
        if not text:
            raise ExtractionReject("summary: reply has no summary", raw)
    if not text:
        raise ExtractionReject("summary: empty reply", raw)
    return " ".join(text.split())[:SUMMARY_MAX_CHARS]
