"""Content digests of input parts: every input byte goes through xxh3-128 exactly once, fed by the
readers as they read, so a build pays no extra pass (docs/indexing.md, "Index format" (Content identity)).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import xxhash

HASH_NAME = "xxh3_128"
_BLOCK = 1 << 20


@dataclass(frozen=True)
class PartDigest:
    bytes: int
    digest: str


class InputDigest:
    def __init__(self) -> None:
        self._hash = xxhash.xxh3_128()
        self.bytes = 0

    def update(self, data: bytes) -> None:
        self._hash.update(data)
        self.bytes += len(data)

    def result(self) -> PartDigest:
        return PartDigest(self.bytes, self._hash.hexdigest())


class HashingFile(io.RawIOBase):
    """A read-only binary file that adds every byte read from it to a digest, in order; `drain`
    hashes whatever the reader left unread, so the digest always covers the whole file."""

    def __init__(self, raw: io.BufferedIOBase, digest: InputDigest):
        self.raw, self.digest = raw, digest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.raw.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        self.digest.update(data)
        return n

    def drain(self) -> None:
        while self.read(_BLOCK):
            pass

    def close(self) -> None:
        self.raw.close()
        super().close()


def hash_range(path: Path, start: int, end: int, digest: InputDigest) -> None:
    with open(path, "rb") as f:
        f.seek(start)
        remaining = end - start
        while remaining > 0 and (block := f.read(min(remaining, _BLOCK))):
            digest.update(block)
            remaining -= len(block)


def parquet_ranges(path: Path, row_group: int) -> list[tuple[int, int]]:
    """The byte ranges a Parquet row group part depends on: its slice of the file (from its first
    page to the next row group's, the first part from byte 0, the last to the end) and the footer."""
    size = path.stat().st_size
    meta = pq.ParquetFile(path).metadata
    starts = [_row_group_start(meta.row_group(g)) for g in range(meta.num_row_groups)]
    with open(path, "rb") as f:
        f.seek(size - 8)
        footer_start = size - 8 - int.from_bytes(f.read(4), "little")
    if any(b <= a for a, b in zip(starts, starts[1:])) or (starts and starts[-1] >= footer_start):
        return [(0, size)]  # an unusual layout: depend on the whole file rather than guess
    bounds = [0, *starts[1:], footer_start]
    ranges = [(bounds[row_group], bounds[row_group + 1])]
    return ranges + [(footer_start, size)]


def _row_group_start(rg) -> int:
    columns = [rg.column(c) for c in range(rg.num_columns)]
    dictionaries = [c.dictionary_page_offset for c in columns if c.has_dictionary_page and c.dictionary_page_offset]
    return min([c.data_page_offset for c in columns] + dictionaries)


def corpus_digest(parts: list[tuple[str, int, int, str]]) -> str:
    """One digest of the whole corpus from (file, start, end, part digest) in plan order."""
    digest = xxhash.xxh3_128()
    for file, start, end, part in parts:
        digest.update(f"{file}\0{start}\0{end}\0{part}\n".encode())
    return digest.hexdigest()
