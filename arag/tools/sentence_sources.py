"""Each sentence's source document (id, title, ordinal there), read from the sentences Parquet.

On a packed index only the sentence rows say which document a sentence belongs to
(arag.index.parts.SOURCE_COLUMNS). The part caches do not hold them: they are read here one row group
(8,192 rows) at a time, the last groups kept, so memory stays bounded whatever the corpus size.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import pyarrow.parquet as pq

from arag.index.parts import SOURCE_COLUMNS
from arag.small_sorted import distinct, positions

# Row groups kept decoded (each ~8,192 rows of three short columns).
CACHED_GROUPS = 64


def by_range(bounds: np.ndarray, rows: np.ndarray | Sequence[int]) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """`rows` grouped by the range [bounds[w], bounds[w + 1]) they fall in: (w, their places in `rows`,
    the rows counted from bounds[w]). Bounds: the parts' (or row groups') first rows, then the total."""
    rows = np.asarray(rows, dtype=np.int64)
    which = positions(bounds, rows, side="right") - 1
    for w in distinct(which):
        at = np.flatnonzero(which == w)
        yield w, at, rows[at] - bounds[w]


class MissingSentenceSourcesError(RuntimeError):
    """The index's sentence rows do not record their source documents (built before format 2)."""


@dataclass(frozen=True)
class Sources:
    """Source of each asked-for sentence row, in the order asked."""

    doc_ids: list[str]
    titles: list[str | None]
    ordinals: np.ndarray  # int64


class SentenceSources:
    """Source document of global sentence rows (arag.tools.index_cache row numbering) of one index."""

    def __init__(self, store: Any):  # an arag.tools.index_cache.ChunkStore (which imports this module)
        self.store = store
        self.files: list[Path] = [p.sentences for p in store.index.parts]  # in the store's part order
        self._starts = lru_cache(maxsize=None)(self._read_starts)
        self._group = lru_cache(maxsize=CACHED_GROUPS)(self._read_group)
        # Every part with sentences has the source columns, else a clear error naming the index.
        for w, path in enumerate(self.files):
            if self.store.parts[w].num_sentences == 0:
                continue
            missing = [c for c in SOURCE_COLUMNS if c not in pq.read_schema(path).names]
            if missing:
                root = self.store.index.root
                raise MissingSentenceSourcesError(
                    f"rebuild the index {root}: it predates sentence sources (index format 2), so the document tools cannot tell which "
                    f"document a sentence of a packed window comes from ({path.name} has no {', '.join(missing)}); "
                    f"rerun python -m pipelines.index with index.path={root} and the same corpus (the format changed, so it rebuilds)"
                )

    def of_rows(self, rows: np.ndarray | Sequence[int]) -> Sources:
        doc_ids: list = [None] * len(rows)
        titles: list = [None] * len(rows)
        ordinals = np.empty(len(rows), dtype=np.int64)
        for w, at, local in by_range(self.store.sentence_offsets, rows):
            for g, in_group, group_rows in by_range(self._starts(w), local):
                ids, names, ords = self._group(w, g)
                for i, r in zip(at[in_group].tolist(), group_rows.tolist()):
                    doc_ids[i], titles[i], ordinals[i] = ids[r], names[r], ords[r]
        return Sources(doc_ids, titles, ordinals)

    def _read_starts(self, w: int) -> np.ndarray:
        meta = pq.ParquetFile(self.files[w]).metadata
        return np.cumsum([0] + [meta.row_group(g).num_rows for g in range(meta.num_row_groups)], dtype=np.int64)

    def _read_group(self, w: int, g: int) -> tuple[list, list, np.ndarray]:
        table = pq.ParquetFile(self.files[w]).read_row_group(g, columns=list(SOURCE_COLUMNS))
        return table.column("doc_id").to_pylist(), table.column("doc_title").to_pylist(), table.column("doc_sentence").to_numpy().astype(np.int64)
