"""Open a finished index for reading. An index without a manifest is incomplete and never opened."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from arag.index.embedding import EmbedderSpec
from arag.index.layout import READABLE_FORMAT_VERSIONS, IndexLayout, read_json

if TYPE_CHECKING:
    from arag.index.chunk_ids import ChunkIdFormat


class IndexNotFoundError(FileNotFoundError):
    pass


class IncompleteIndexError(RuntimeError):
    pass


@dataclass(frozen=True)
class PartFiles:
    part: int
    chunks: Path
    sentences: Path
    vectors: Path | None  # None in a text_only index
    num_chunks: int
    num_sentences: int


class Index:
    """Read-only view of a complete index directory: its manifest and per-part files."""

    def __init__(self, root: str | Path):
        self.layout = IndexLayout(root)
        self.root = self.layout.root
        if not self.root.is_dir():
            raise IndexNotFoundError(f"no index directory at {self.root}")
        if not self.layout.manifest.exists():
            hint = " (a build is in progress or was interrupted; rerun pipelines.index)" if self.layout.build_state.exists() else ""
            raise IncompleteIndexError(f"{self.root} has no manifest.json: not a complete index{hint}")
        self.manifest: dict[str, Any] = read_json(self.layout.manifest)
        version = self.manifest.get("format_version")
        if version not in READABLE_FORMAT_VERSIONS:
            raise IncompleteIndexError(f"{self.layout.manifest}: format_version {version}, this arag reads {', '.join(map(str, READABLE_FORMAT_VERSIONS))}")

    @cached_property
    def parts(self) -> list[PartFiles]:
        return [
            PartFiles(
                part=p["part"],
                chunks=self.root / p["chunks"],
                sentences=self.root / p["sentences"],
                vectors=self.root / p["vectors"] if p.get("vectors") else None,
                num_chunks=p["num_chunks"],
                num_sentences=p["num_sentences"],
            )
            for p in self.manifest["parts"]
        ]

    @property
    def chunk_files(self) -> list[Path]:
        return [p.chunks for p in self.parts if p.num_chunks]

    @property
    def vector_files(self) -> list[Path]:
        return [p.vectors for p in self.parts if p.num_sentences and p.vectors is not None]

    @property
    def vectors_mode(self) -> str:
        """"embedded" (sentence vectors in every part) or "text_only" (none: no semantic search)."""
        return str(self.manifest.get("vectors", "embedded"))

    @property
    def has_vectors(self) -> bool:
        return self.vectors_mode == "embedded"

    @property
    def chunking_mode(self) -> str:
        """arag.index.parts.CHUNKING_MODES; per_document for indexes that predate the setting."""
        return (self.manifest.get("chunking") or {}).get("mode", "per_document")

    @cached_property
    def chunk_ids(self) -> "ChunkIdFormat":
        """The form of this index's chunk ids and a real one, for the texts the model reads."""
        from arag.index.chunk_ids import chunk_id_format

        return chunk_id_format(self.chunking_mode, self.parts, self.layout.manifest)

    @property
    def embedder_spec(self) -> EmbedderSpec:
        return EmbedderSpec(**self.manifest["embedding"]["spec"])

    @property
    def dimension(self) -> int:
        return int(self.manifest["embedding"]["dimension"])

    def __repr__(self) -> str:
        m = self.manifest
        return f"Index({str(self.root)!r}, chunks={m['num_chunks']}, sentences={m['num_sentences']})"


def open_index(root: str | Path) -> Index:
    return Index(root)
