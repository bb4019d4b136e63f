"""Where everything of an index lives on disk (docs/indexing.md, "Index format"), and how files are committed:
under a temporary name, fsynced, renamed into place, the folder fsynced, so a reader never sees half a
file and a commit record, written after the files it names, never outlives them in a crash."""

from __future__ import annotations

import json
import os
import uuid
from contextlib import contextmanager
from functools import partialmethod
from pathlib import Path
from typing import Any, Iterator

MANIFEST = "manifest.json"
BUILD_STATE = "build.json"
# 2: sentence rows record their source document (arag.index.parts.SOURCE_COLUMNS). Version 1 stays
# readable; only the document tools on a packed index need version 2.
FORMAT_VERSION = 2
READABLE_FORMAT_VERSIONS = (1, 2)
SUBDIRS = ("parts", "chunks", "sentences", "rejects", "vectors")
TOOLS_CACHE = "tools_cache"
# Sentence ids carry their part in the high bits: part k's rows are k<<32 | row. That makes ids
# stable without a global barrier and lets a sentence id name its file and row directly.
PART_SHIFT = 32


def sentence_id(part: int, row: int) -> int:
    return (part << PART_SHIFT) | row


def part_name(part: int) -> str:
    return f"part-{part:05d}"


class IndexLayout:
    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    @property
    def manifest(self) -> Path:
        return self.root / MANIFEST

    @property
    def build_state(self) -> Path:
        return self.root / BUILD_STATE

    def _part_file(self, folder: str, suffix: str, part: int) -> Path:
        return self.root / folder / f"{part_name(part)}{suffix}"

    # Each part's files, e.g. layout.chunks(part).
    part_record = partialmethod(_part_file, "parts", ".json")
    vectors_record = partialmethod(_part_file, "parts", ".vectors.json")
    chunks = partialmethod(_part_file, "chunks", ".parquet")
    sentences = partialmethod(_part_file, "sentences", ".parquet")
    rejects = partialmethod(_part_file, "rejects", ".parquet")
    vectors = partialmethod(_part_file, "vectors", ".faiss")

    def make_dirs(self) -> None:
        for sub in SUBDIRS:
            (self.root / sub).mkdir(parents=True, exist_ok=True)

    def remove_temporaries(self) -> None:
        for sub in SUBDIRS:
            for tmp in (self.root / sub).glob(".tmp-*"):
                tmp.unlink(missing_ok=True)


@contextmanager
def atomic_path(target: Path) -> Iterator[Path]:
    """A temporary path beside `target` that is renamed onto it when the block succeeds."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".tmp-{uuid.uuid4().hex}{target.suffix}"
    # Made with the umask's permissions, not mkstemp's 0600: index files are meant to be shared.
    os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
    try:
        yield tmp
        fsync(tmp)  # the bytes are on disk before the name points at them
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync(target.parent)  # and the new name is on disk before anything names it


def fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def file_sizes(root: Path, paths: list[Path]) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in paths}


def missing_or_short(root: Path, sizes: dict[str, int]) -> list[str]:
    """The files of a commit record that are missing or not of their recorded size."""
    return [rel for rel, size in sizes.items() if not (root / rel).is_file() or (root / rel).stat().st_size != size]


def write_json_atomic(target: Path, data: Any) -> None:
    with atomic_path(target) as tmp:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))
