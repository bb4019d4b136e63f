"""Build bookkeeping that needs no executor: settings identity, resume decisions, the manifest.

On a rerun: same settings and a manifest → nothing to do once every part's input still hashes the
same; same settings, no manifest → resume; other settings or `overwrite` → start afresh. Content is
not in the build identity (hashing every byte is a read of the corpus, which phase 1 does anyway).
Docs: docs/indexing.md, "Index format" (Content identity).
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import duckdb
import xxhash

from arag import __version__
from arag.corpus.digest import HASH_NAME, corpus_digest
from arag.corpus.readers import CorpusSpec, InputPart, is_compressed, list_input_files
from arag.index.ann import check_ann_setting
from arag.index.ann_recall import DEFAULT_TARGET, check_recall_target
from arag.index.embedding import EmbedderSpec
from arag.index.fingerprint import index_fingerprint
from arag.index.layout import BUILD_STATE, FORMAT_VERSION, MANIFEST, SUBDIRS, TOOLS_CACHE, IndexLayout, read_json, write_json_atomic
from arag.index.part_vectors import committed_vectors, read_vectors_record
from arag.index.parts import ChunkingSettings, PartRecord, discard_part
from arag.index.tokens import TOKENIZER_NAME

log = logging.getLogger("arag.index")


@dataclass(frozen=True)
class IndexSettings:
    corpus: CorpusSpec
    embedder: EmbedderSpec
    chunking: ChunkingSettings = field(default_factory=ChunkingSettings)
    faiss_factory: str = "Flat"
    ann: str = "auto"  # see arag.index.ann: auto, flat, ivfpq or an IVF factory string
    ann_recall: float = DEFAULT_TARGET  # recall@10 the ANN must keep (arag.index.ann_recall)
    ann_questions: str | None = None  # a questions file whose questions join the recall measurement

    def __post_init__(self) -> None:
        check_ann_setting(self.ann)
        object.__setattr__(self, "ann_recall", check_recall_target(self.ann_recall))
        if self.faiss_factory != "Flat":
            raise ValueError(
                f"index.faiss_factory={self.faiss_factory!r}: per-part shards are always exact (Flat) now; "
                "choose the ANN over all shards with index.ann (auto, flat, ivfpq or e.g. 'IVF4096,PQ48')"
            )

    def identity(self) -> dict[str, Any]:
        corpus = asdict(self.corpus)
        del corpus["path"]  # where the files lie is no part of what they hold (names, sizes and digests are)
        if not uses_part_size(self.corpus):
            del corpus["part_size_mb"]  # it only cuts plain JSON Lines files into parts
        return {
            "format_version": FORMAT_VERSION,
            "corpus": corpus,
            "inputs": input_signature(self.corpus),
            "chunking": {**self.chunking.identity(), "tokenizer": TOKENIZER_NAME, "splitter": "sentencex"},
            "embedder": self.embedder.identity(),
            "faiss_factory": self.faiss_factory,
            "ann": self.ann,
            # Only when not the default: indexes built before recall targets keep their fingerprint.
            **({"ann_recall": self.ann_recall} if self.ann_recall != DEFAULT_TARGET else {}),
            **({"ann_questions": self.ann_questions} if self.ann_questions else {}),
        }

    def fingerprint(self) -> str:
        blob = json.dumps(self.identity(), sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


def uses_part_size(corpus: CorpusSpec) -> bool:
    """Whether `corpus.part_size_mb` decides the plan: only for plain JSON Lines files."""
    return corpus.format == "jsonl" and any(not is_compressed(f) for f in list_input_files(corpus)[1])


def input_signature(corpus: CorpusSpec) -> dict[str, Any]:
    """Number, total size and a digest of the input files' names and sizes (no modification times:
    a corpus copied to another disk keeps its index)."""
    root, files = list_input_files(corpus)
    sizes = [path.stat().st_size for path in files]
    listing = "".join(f"{path.relative_to(root)}\0{size}\n" for path, size in zip(files, sizes))
    return {"files": len(files), "bytes": sum(sizes), "listing": xxhash.xxh3_128_hexdigest(listing.encode())[:16]}


class BuildAction(Enum):
    UP_TO_DATE = "up-to-date"
    RESUME = "resume"
    FRESH = "fresh"


class IndexDirectoryError(RuntimeError):
    pass


def prepare_directory(layout: IndexLayout, settings: IndexSettings, overwrite: bool = False) -> BuildAction:
    """Decide what a build must do in `layout.root` and leave the directory ready for it."""
    root = layout.root
    if root.exists() and any(root.iterdir()):
        if not (layout.manifest.exists() or layout.build_state.exists()):
            raise IndexDirectoryError(
                f"{root} is not empty and holds no arag index (no {MANIFEST} or {BUILD_STATE}); "
                "choose another index.path or empty it first"
            )
        previous = read_json(layout.manifest if layout.manifest.exists() else layout.build_state)
        if previous.get("build_fingerprint") == settings.fingerprint() and not overwrite:
            if layout.manifest.exists():
                return BuildAction.UP_TO_DATE
            layout.remove_temporaries()
            return BuildAction.RESUME
        if overwrite:
            log.info("index.overwrite=true: removing the index in %s and building it again", root)
        else:
            changed = _changed_settings(previous.get("settings", {}), settings.identity())
            log.info("settings changed since this index was built (%s): removing it and building again", ", ".join(changed) or "format")
        _remove_index_files(layout)
    layout.make_dirs()
    _write_build_state(layout, settings)
    return BuildAction.FRESH


def reopen_for_rebuild(layout: IndexLayout, settings: IndexSettings, stale_parts: list[int]) -> None:
    """Make a complete index a build in progress again (the manifest goes first) and discard `stale_parts`."""
    layout.manifest.unlink(missing_ok=True)
    _write_build_state(layout, settings)
    for part in stale_parts:
        discard_part(layout, part)


def _write_build_state(layout: IndexLayout, settings: IndexSettings) -> None:
    write_json_atomic(
        layout.build_state,
        {"build_fingerprint": settings.fingerprint(), "settings": settings.identity(), "started_at": time.time(), "arag_version": __version__},
    )


def _changed_settings(before: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """Dotted names of the identity entries that differ, e.g. ['inputs.digest', 'chunking.chunk_tokens']."""
    changed: list[str] = []
    for key in sorted(set(before) | set(now)):
        old, new = before.get(key), now.get(key)
        if isinstance(old, dict) and isinstance(new, dict):
            changed += [f"{key}.{sub}" for sub in _changed_settings(old, new)]
        elif json.dumps(old, sort_keys=True, default=str) != json.dumps(new, sort_keys=True, default=str):
            changed.append(key)
    return changed


def _remove_index_files(layout: IndexLayout) -> None:
    # The manifest goes first: from that moment the directory no longer looks complete.
    layout.manifest.unlink(missing_ok=True)
    for sub in (*SUBDIRS, TOOLS_CACHE):
        shutil.rmtree(layout.root / sub, ignore_errors=True)
    layout.build_state.unlink(missing_ok=True)


# DuckDB's memory for the duplicate check: beyond it the grouping spills to disk inside the index
# folder, so the check's memory stays flat however many chunks the corpus has.
DUPLICATE_CHECK_MEMORY = "512MB"


def find_duplicate_chunk_ids(layout: IndexLayout, records: list[PartRecord], limit: int = 5, memory_limit: str = DUPLICATE_CHECK_MEMORY) -> list[tuple[str, int]]:
    """Up to `limit` chunk ids occurring more than once, with their counts, grouped by DuckDB."""
    files = [str(layout.chunks(r.part)) for r in records if r.num_chunks]
    if not files:
        return []
    with tempfile.TemporaryDirectory(prefix=".tmp-duplicates-", dir=layout.root, ignore_cleanup_errors=True) as spill:
        with duckdb.connect(config={"memory_limit": memory_limit, "temp_directory": spill, "preserve_insertion_order": False}) as con:
            query = "select chunk_id, count(*) from read_parquet(?) group by chunk_id having count(*) > 1 order by chunk_id limit ?"
            return con.execute(query, [files, limit]).fetchall()


# The manifest's "vectors" (docs/indexing.md, "Index format"); manifests without the key are "embedded".
EMBEDDED = "embedded"
TEXT_ONLY = "text_only"
VECTOR_MODES = (EMBEDDED, TEXT_ONLY)


def assemble_manifest(layout: IndexLayout, settings: IndexSettings, plan: list[InputPart], records: list[PartRecord], dimension: int,
                      elapsed_s: float, ann: dict[str, Any] | None = None, vectors: str = EMBEDDED) -> dict[str, Any]:
    if vectors not in VECTOR_MODES:
        raise ValueError(f"vectors must be one of {', '.join(VECTOR_MODES)}, got {vectors!r}")
    text_only = vectors == TEXT_ONLY
    if text_only and (dimension or ann):
        raise ValueError("a text_only index has no vectors: dimension must be 0 and there is no ANN")
    by_part = {r.part: r for r in records}
    missing = [p.part for p in plan if p.part not in by_part]
    if missing:
        raise IndexDirectoryError(f"parts {missing[:5]} have no commit record; cannot write the manifest")
    unembedded = [] if text_only else [r.part for r in records if r.num_sentences and committed_vectors(layout, r) is None]
    if unembedded:
        raise IndexDirectoryError(f"parts {unembedded[:5]} have no complete vectors record; cannot write the manifest")
    parts, files = [], []
    root = layout.root
    for p in plan:
        r = by_part[p.part]
        entry = {
            "part": p.part,
            "input": p.file,
            "chunks": str(layout.chunks(p.part).relative_to(root)),
            "sentences": str(layout.sentences(p.part).relative_to(root)),
            "rejects": str(layout.rejects(p.part).relative_to(root)),
            "vectors": None if text_only else str(layout.vectors(p.part).relative_to(root)),
            "faiss_factory": settings.faiss_factory,
            "num_documents": r.num_documents,
            "num_chunks": r.num_chunks,
            "num_sentences": r.num_sentences,
            "num_rejected": r.num_rejected,
            "source": r.source,
        }
        for kind, rows in (("chunks", r.num_chunks), ("sentences", r.num_sentences), ("rejects", r.num_rejected)):
            files.append({"path": entry[kind], "rows": rows, "bytes": r.files[entry[kind]]})
        if r.num_sentences and not text_only:
            v = read_vectors_record(layout, r.part)
            files.append({"path": v.path, "rows": v.rows, "bytes": v.bytes})
        parts.append(entry)
    if ann and ann.get("trained"):  # the ANN phase's files, each fsynced before its record
        for path, rows in [(ann["trained"], 0), *((p["file"], p["rows"]) for p in ann.get("parts", []))]:
            files.append({"path": path, "rows": rows, "bytes": (root / path).stat().st_size})
    identity = settings.identity()
    content = {"hash": HASH_NAME, "digest": corpus_digest([(p.file, p.start, p.end, by_part[p.part].input_digest) for p in plan])}
    return {
        "format_version": FORMAT_VERSION,
        "arag_version": __version__,
        "fingerprint": index_fingerprint(identity, content, vectors),
        "build_fingerprint": settings.fingerprint(),
        "corpus": {**identity["corpus"], "path": str(Path(settings.corpus.path).resolve())},
        "inputs": {**identity["inputs"], "content": content},
        "chunking": identity["chunking"],
        "vectors": vectors,
        "embedding": {"model": settings.embedder.name, "dimension": dimension, "normalized": True, "spec": asdict(settings.embedder)},
        "faiss": {"factory": settings.faiss_factory, "metric": "inner_product", "ids": "sentence_id"},
        "ann": ann or {"kind": "flat", "setting": settings.ann},
        "num_documents": sum(r.num_documents for r in records),
        "num_chunks": sum(r.num_chunks for r in records),
        "num_sentences": sum(r.num_sentences for r in records),
        "num_rejected": sum(r.num_rejected for r in records),
        "num_parts": len(plan),
        "parts": parts,
        "files": files,
        "elapsed_s": round(elapsed_s, 3),
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def commit_manifest(layout: IndexLayout, manifest: dict[str, Any]) -> None:
    write_json_atomic(layout.manifest, manifest)
    layout.build_state.unlink(missing_ok=True)


def sample_rejects(layout: IndexLayout, manifest: dict[str, Any], limit: int = 5) -> list[tuple[str, int, str]]:
    files = [str(layout.root / p["rejects"]) for p in manifest["parts"] if p["num_rejected"]]
    if not files:
        return []
    with duckdb.connect() as con:
        return con.execute("select source, line, reason from read_parquet(?) limit ?", [files, limit]).fetchall()
