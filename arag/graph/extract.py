"""Entity–relation extraction from chunks behind one interface (`Extractor.extract(chunk)`): the A2RAG
paper's LLM OpenIE (`LLMExtractor`) and the CPU substitute (`RuleExtractor`). The rules, and how a
reply that is not valid triples is kept: docs/agents.md, "The graph job" and "Rule extractor"."""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol

from arag.config.schemas import ExtractorConfig
from arag.index.packing import COVERED_SEPARATOR, DOCUMENT_SEPARATOR
from arag.llm.types import Message
from arag.strict_settings import check_keys, field_names

MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_DATE = re.compile(rf"\b(?:\d{{1,2}} (?:{MONTHS})(?: \d{{1,4}})?|(?:{MONTHS}) \d{{1,2}}, \d{{1,4}}|(?:{MONTHS}) \d{{3,4}})\b")
_NUMBER = re.compile(r"\b\d+(?:[.,]\d+)*\b")
_WORD = re.compile(r"[^\W\d_][\w'’.\-]*", re.UNICODE)
CONNECTORS = frozenset({"of", "the", "de", "von", "van", "der", "la", "le", "del", "du"})
STOP_STARTS = frozenset(
    "The A An He She It They We I His Her Its Their In On At By For From After Before During When While "
    "This That These Those There As With Since Although However Also But And Or Who What Which Where Why How".split()
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"“(])|\n+")
_CLAUSE_BREAK = re.compile(r"[,;:()\[\]\"“”]")
CO_OCCURS = "co_occurs_with"
MENTIONS = "mentions"


def normalise_name(text: str) -> str:
    """The key nodes are merged on: NFKC, case-folded, inner whitespace collapsed, edge punctuation off."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = re.sub(r"\s+", " ", text)
    return text.strip(" \t.,;:!?\"'“”‘’()[]{}-")


@dataclass(frozen=True)
class Chunk:
    chunk_id: str
    doc_id: str
    title: str
    text: str


@dataclass(frozen=True)
class Triple:
    head: str  # surface forms, as written
    relation: str
    tail: str


@dataclass
class Extraction:
    entities: list[str] = field(default_factory=list)
    triples: list[Triple] = field(default_factory=list)


class ExtractionReject(Exception):
    """Extraction output that could not be used; `raw` is kept in the graph's rejects."""

    def __init__(self, reason: str, raw: str = ""):
        super().__init__(reason)
        self.reason, self.raw = reason, raw[:2000]


class Extractor(Protocol):
    def identity(self) -> dict[str, Any]: ...

    def extract(self, chunk: Chunk) -> Extraction: ...


@dataclass(frozen=True)
class RuleExtractor:
    max_relation_words: int = 5
    max_entity_words: int = 8

    def identity(self) -> dict[str, Any]:
        return {"kind": "rule", "version": 2, "max_relation_words": self.max_relation_words, "max_entity_words": self.max_entity_words}

    def extract(self, chunk: Chunk) -> Extraction:
        if COVERED_SEPARATOR not in chunk.title.strip():
            return self._document(chunk.title.strip(), chunk.text)
        # A packed window (arag.index.packing): a span per document it covers; a span continued from
        # the window before starts with none of the titles, so its entities link to no title.
        titles = [t for t in chunk.title.split(COVERED_SEPARATOR) if t.strip()]
        out = Extraction()
        for span in chunk.text.split(DOCUMENT_SEPARATOR):
            got = self._document(next((t.strip() for t in titles if span.startswith(t)), ""), span)
            out.entities += got.entities
            out.triples += got.triples
        return out

    def _document(self, title: str, text: str) -> Extraction:
        out = Extraction()
        body = text[len(title):] if title and text.startswith(title) else text
        if title:
            out.entities.append(title)
        for sentence in _SENTENCE.split(body):
            spans = sentence_entities(sentence, self.max_entity_words)
            out.entities.extend(text for _, _, text in spans)
            for (s1, e1, a), (s2, _, b) in zip(spans, spans[1:]):
                if normalise_name(a) != normalise_name(b):
                    out.triples.append(Triple(a, self._relation(sentence[e1:s2]), b))
            if title:
                out.triples.extend(Triple(title, MENTIONS, text) for _, _, text in spans if normalise_name(text) != normalise_name(title))
        return out

    def _relation(self, between: str) -> str:
        words = between.split()
        if 0 < len(words) <= self.max_relation_words and not _CLAUSE_BREAK.search(between) and not any(w[0].isupper() for w in words):
            return " ".join(words).lower()
        return CO_OCCURS


def sentence_entities(sentence: str, max_words: int = 8) -> list[tuple[int, int, str]]:
    """(start, end, text) of the dates, numbers and capitalised spans of a sentence, in order."""
    taken: list[tuple[int, int, str]] = [(m.start(), m.end(), m.group()) for m in _DATE.finditer(sentence)]

    def free(s: int, e: int) -> bool:
        return all(e <= a or s >= b for a, b, _ in taken)

    spans = list(taken)
    for m in _NUMBER.finditer(sentence):
        if free(m.start(), m.end()):
            spans.append((m.start(), m.end(), m.group()))
    words = list(_WORD.finditer(sentence))
    i = 0
    while i < len(words):
        if not words[i].group()[0].isupper():
            i += 1
            continue
        j = i  # last capitalised word of the run
        k = i + 1
        while k < len(words) and k - i < max_words:
            gap = sentence[words[k - 1].end() : words[k].start()]
            if gap.strip():  # punctuation between words ends a run
                break
            w = words[k].group()
            if w[0].isupper():
                j = k
            elif w not in CONNECTORS:
                break
            k += 1
        text = sentence[words[i].start() : words[j].end()].rstrip(".")
        if not (i == j and text in STOP_STARTS) and free(words[i].start(), words[j].end()):
            spans.append((words[i].start(), words[i].start() + len(text), text))
        i = j + 1
    return sorted(spans)


# Our wording of the extraction the paper describes: triples whose ends are entities as the text names
# them (nodes, merged on their normalised name) and whose relation is a short label (an edge type).
OPENIE_PROMPT = (
    "Extract the facts of the passage as (subject, relation, object) triples for a knowledge graph. "
    "Subjects and objects are named entities, dates or numbers written as in the passage; relations "
    "are short verb phrases. Reply with JSON only: {\"triples\": [[\"subject\", \"relation\", \"object\"], ...]}."
)
TRIPLES_SCHEMA = {
    "type": "object",
    "properties": {"triples": {"type": "array", "items": {"type": "array", "items": {"type": "string"}, "minItems": 3, "maxItems": 3}}},
    "required": ["triples"],
}


class ChatModelTask:
    """A graph-build task over a chat model; the backend is built on first use, so the driver can
    read the identity without loading a model."""

    def __init__(self, model: Mapping[str, Any], prompt: str, max_tokens: int, backend: Any = None):
        self.model_cfg = dict(model)
        self.prompt = prompt
        self.max_tokens = max_tokens
        self._backend = backend
        self.json_protocol = self.model_cfg.get("protocol", "json") == "json"

    @property
    def backend(self) -> Any:
        if self._backend is None:
            from arag.llm.factory import make_backend

            self._backend = make_backend(self.model_cfg)
        return self._backend

    def identity(self, **fields: Any) -> dict[str, Any]:
        """The task as a graph's identity records it: `fields`, the prompt's digest, the model without secrets."""
        digest = hashlib.sha256(self.prompt.encode()).hexdigest()[:16]
        model = {k: v for k, v in sorted(self.model_cfg.items()) if "key" not in k and "token" not in k.replace("max_tokens", "")}
        return {"kind": "llm", "version": 1, **fields, "prompt_sha256": digest, "model": model, "max_tokens": self.max_tokens}

    def reply(self, user_text: str, schema: dict[str, Any]) -> str:
        """The model's reply to the task's prompt and `user_text` (`schema` enforced under the json protocol)."""
        request = {"response_schema": schema} if self.json_protocol else {}
        messages = [Message("system", self.prompt), Message("user", user_text)]
        return self.backend.complete(messages, max_tokens=self.max_tokens, **request).text or ""


class LLMExtractor(ChatModelTask):
    def __init__(self, model: Mapping[str, Any], prompt: str = OPENIE_PROMPT, max_tokens: int = 512, backend: Any = None):
        super().__init__(model, prompt, max_tokens, backend)

    def identity(self) -> dict[str, Any]:
        return super().identity(prompt=self.prompt)

    def extract(self, chunk: Chunk) -> Extraction:
        titles = "; ".join(t for t in chunk.title.split(COVERED_SEPARATOR) if t.strip())  # a packed window's titles, one line
        return parse_triples(self.reply(f"Passage (title: {titles}):\n{chunk.text}", TRIPLES_SCHEMA))


def unfenced(raw: str) -> str:
    text = raw.strip()
    fence = re.search(r"```(?:json)?\s*(.*?)```", text, re.S)
    return fence.group(1).strip() if fence else text


def parse_json_reply(raw: str, what: str = "") -> Any:
    """The JSON value of a model's reply, fenced or not; else `ExtractionReject` (its reason prefixed by `what`)."""
    try:
        return json.loads(unfenced(raw))
    except ValueError as exc:
        raise ExtractionReject(f"{what}reply is not JSON: {exc}", raw) from None


def parse_triples(raw: str) -> Extraction:
    data = parse_json_reply(raw)
    items = data.get("triples") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise ExtractionReject("reply has no list of triples", raw)
    out = Extraction()
    bad = 0
    for item in items:
        if isinstance(item, (list, tuple)) and len(item) == 3 and all(isinstance(x, str) and x.strip() for x in item):
            head, rel, tail = (x.strip() for x in item)
            out.triples.append(Triple(head, rel.lower(), tail))
            out.entities += [head, tail]
        else:
            bad += 1
    if bad and not out.triples:
        raise ExtractionReject(f"none of the {bad} triples has three non-empty strings", raw)
    return out


EXTRACTOR_KEYS = field_names(ExtractorConfig)  # the `graph.extractor` node's keys
RULES_LABEL = "rules"


def written_by(identity: Mapping[str, Any] | None, otherwise: str) -> str:
    """Who wrote a graph's triples or summaries: "llm:<model>" or `otherwise`."""
    if identity and identity.get("kind") == "llm":
        model = identity.get("model") or {}
        return f"llm:{model.get('model') or model.get('backend') or 'unnamed'}"
    return otherwise


def make_extractor(cfg: Mapping[str, Any]) -> Extractor:
    """From the `graph.extractor` settings; kind null: llm with a model configured, else rule."""
    check_keys("graph.extractor", cfg, EXTRACTOR_KEYS)
    kind = str(cfg["kind"]) if cfg.get("kind") is not None else ("llm" if cfg.get("model") else "rule")
    if kind == "rule":
        return RuleExtractor(int(cfg.get("max_relation_words") or 5), int(cfg.get("max_entity_words") or 8))
    if kind == "llm":
        if not cfg.get("model"):
            raise ValueError("graph.extractor.kind=llm needs graph.extractor.model (a model config, e.g. model@graph.extractor.model=llamacpp_qwen2.5_coder_1.5b)")
        return LLMExtractor(cfg["model"], cfg.get("prompt") or OPENIE_PROMPT, int(cfg.get("max_tokens") or 512))
    raise ValueError(f"unknown graph.extractor.kind {kind!r}; known: rule, llm")
