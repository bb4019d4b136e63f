"""Caches of models derived from a local model folder (the OpenVINO conversion, the static distillation)."""

from __future__ import annotations

import hashlib
import json
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


def cache_entry(kind: str, model_path: str, **material) -> Path:
    """The cache folder of what was derived from `model_path` with `material` (settings, library
    versions), keyed by those and the model folder's files: a change to any gives another folder."""
    root = Path(model_path).resolve()
    files = sorted((str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file())
    material.update(model=str(root), files=files)
    key = hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:16]
    return cache_root(kind) / f"{Path(model_path).name}-{key}"


def publish_folder(final: Path, write, marker: str, what: str) -> None:
    """`write(folder)` fills a fresh folder beside `final`, then renamed to it (atomic). An entry with
    `marker` is another process's and kept; one without is stale and replaced. An unwritable cache is
    logged, not raised: the caller holds what it built."""
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    except OSError as exc:
        log.info("%s %s not writable (%s); using what was built in memory", what, final.parent, exc)
        return
    try:
        write(tmp)
        if (final / marker).exists():  # another process finished first: keep theirs
            return
        if final.exists():  # a stale, incomplete entry: make way
            shutil.rmtree(final, ignore_errors=True)
        os.rename(tmp, final)
    except OSError as exc:  # lost a race, or the disk is full: what is in memory is fine
        log.info("%s %s not written (%s)", what, final, exc)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # gone once renamed
