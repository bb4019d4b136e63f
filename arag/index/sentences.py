"""Rule-based sentence segmentation that keeps each sentence's exact span in the source text."""

from __future__ import annotations

from dataclasses import dataclass

import sentencex

# sentencex mixes byte and character offsets around multi-byte white space (a no-break space among
# dots, as in "M\xa0.\xa0.\xa0.", panics inside the library: GraphRAG-Bench's novels have it), so it
# segments a copy where every non-ASCII white space character is a plain space. The copy has the
# same characters at the same offsets otherwise, so its spans are the original's.
_WIDE_SPACES = {c: " " for c in range(0x80, 0x3001) if chr(c).isspace()}


@dataclass(frozen=True, slots=True)
class Span:
    start: int
    end: int  # exclusive; text[start:end] is the sentence without surrounding white space


def sentence_spans(text: str, language: str = "en") -> list[Span]:
    """Trimmed sentence spans of `text` (sentencex's pieces tile the text); line breaks always end a sentence."""
    spans: list[Span] = []
    pos = 0
    plain = text.translate(_WIDE_SPACES) if not text.isascii() else text
    for piece in sentencex.segment(language, plain):
        start = max(plain.find(piece, pos), pos)  # the pieces tile the text: found at `pos` or after white space
        end = start + len(piece)
        pos = end
        for line in text[start:end].split("\n"):
            a, b = trimmed(text, start, start + len(line))
            if b > a:
                spans.append(Span(a, b))
            start += len(line) + 1
    return spans


def trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end
