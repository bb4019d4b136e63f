"""Caches of models derived from a local model folder (the OpenVINO conversion, the static
embedder's distillation): what says an entry still fits its model, and the atomic write of an
entry. A leaf module, so the embedders that use it do not import each other."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

log = logging.getLogger("arag.embedding")


def cache_root(kind: str) -> Path:
    """``$ARAG_CACHE_DIR/embedders/<kind>`` (default ``~/.cache/arag/embedders/<kind>``)."""
    env = os.environ.get("ARAG_CACHE_DIR")
    return (Path(env) if env else Path.home() / ".cache" / "arag") / "embedders" / kind


def model_files(model_path: str) -> list[tuple[str, int, int]]:
    """(relative path, size, mtime) of every file in a model folder: what says a cached
    conversion or distillation still fits the model."""
    root = Path(model_path).resolve()
    return sorted((str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file())


def publish_folder(final: Path, write, marker: str, what: str) -> bool:
    """Writes a cache entry: `write(folder)` fills a fresh folder beside `final`, which is then
    renamed to `final` (atomic: readers see a complete entry or none). Where another process
    finished first (`final/marker` exists), its entry is kept; an entry without it is stale and
    replaced. An unwritable cache is logged, not raised: the caller still holds what it built in
    memory. True when this call's folder became `final`."""
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    except OSError as exc:
        log.info("%s %s not writable (%s); using what was built in memory", what, final.parent, exc)
        return False
    try:
        write(tmp)
        if (final / marker).exists():  # another process finished first: keep theirs
            shutil.rmtree(tmp, ignore_errors=True)
            return False
        if final.exists():  # a stale, incomplete entry: make way
            shutil.rmtree(final, ignore_errors=True)
        os.rename(tmp, final)
        return True
    except OSError as exc:  # lost a race, or the disk is full: what is in memory is fine
        shutil.rmtree(tmp, ignore_errors=True)
        log.info("%s %s not written (%s)", what, final, exc)
        return False
