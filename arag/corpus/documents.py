"""The records that flow from the corpus readers into the index builder."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Document:
    doc_id: str
    title: str
    text: str
    source: str  # file the document came from, relative to the corpus root
    line: int  # 1-based line of the document's first line in `source`


@dataclass(frozen=True, slots=True)
class Reject:
    """An input record that could not become a document, kept with the reason."""

    source: str
    line: int  # 0 when the problem is not tied to a line (e.g. a truncated stream)
    reason: str
    raw: str  # the offending input, truncated

    MAX_RAW_CHARS = 1000

    @classmethod
    def of(cls, source: str, line: int, reason: str, raw: str | bytes = "") -> "Reject":
        if isinstance(raw, bytes):
            raw = raw.decode("utf-8", errors="replace")
        return cls(source, line, reason, raw[: cls.MAX_RAW_CHARS])
