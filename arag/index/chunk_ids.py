"""What the chunk ids of an index look like, told to the model from the index itself: the texts the
model reads say `{chunk_id_format}` and `{chunk_id_example}` (a real id of the opened index). Why:
prompts that said "<document>#<n>" over a packed index, whose ids are "<part>:<window>", had a small
model ask chunk_read for ids that do not exist most of the time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

FORMAT_SLOT = "{chunk_id_format}"
EXAMPLE_SLOT = "{chunk_id_example}"


@dataclass(frozen=True)
class ChunkIdFormat:
    """form: e.g. "<part>:<window>"; example: a real id of the index (the form itself when it has no chunk)."""

    form: str
    example: str

    def fill(self, text: str) -> str:
        return text.replace(FORMAT_SLOT, self.form).replace(EXAMPLE_SLOT, self.example)

    def fill_all(self, value: Any) -> Any:
        """`fill` on every string inside a JSON-like value (a tool's parameter schema); a copy."""
        if isinstance(value, str):
            return self.fill(value)
        if isinstance(value, dict):
            return {k: self.fill_all(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.fill_all(v) for v in value]
        return value

    def to_json(self) -> dict[str, str]:
        return {"form": self.form, "example": self.example}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ChunkIdFormat":
        return cls(form=str(data["form"]), example=str(data["example"]))


def chunk_id_format(mode: str, parts: Sequence[Any], manifest: Path) -> ChunkIdFormat:
    """The form of an index's chunk ids and its first non-empty part's middle id; `manifest` names it in errors."""
    import pyarrow.parquet as pq

    from arag.index.parts import CHUNK_ID_FORMS

    if mode not in CHUNK_ID_FORMS:
        raise ValueError(f"{manifest}: chunking mode {mode!r} has no chunk id form; known: {', '.join(CHUNK_ID_FORMS)}")
    form = CHUNK_ID_FORMS[mode]
    part = next((p for p in parts if p.num_chunks), None)
    if part is None:
        return ChunkIdFormat(form, form)
    row = part.num_chunks // 2
    chunks = pq.ParquetFile(part.chunks)
    for group in range(chunks.num_row_groups):  # read only the row group holding that row
        rows = chunks.metadata.row_group(group).num_rows
        if row < rows:
            return ChunkIdFormat(form, str(chunks.read_row_group(group, columns=["chunk_id"]).column("chunk_id")[row].as_py()))
        row -= rows
    raise ValueError(f"{part.chunks}: holds fewer than the {part.num_chunks} chunks the manifest names")
