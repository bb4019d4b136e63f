"""Which index a folder holds, as one string: the fingerprint evaluation runs key on and the tool
server reports (a client checks it serves the same index).

It covers the build settings that decide the output (arag.index.build.IndexSettings.identity:
chunking, embedder, ANN, the corpus format and its files' names and sizes) and the digest of the
whole input content (every byte, arag.corpus.digest), so an edit that keeps every file's size still
gives another fingerprint. Nothing in it is a path: the same index moved or copied to another
folder, or built from the same files copied elsewhere, has the same fingerprint."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


def index_fingerprint(settings_identity: dict[str, Any], content: dict[str, Any], vectors: str) -> str:
    """The fingerprint of an index built with these settings from input content with this digest
    ({"hash", "digest"}); `vectors` is the manifest's kind of index (embedded or text_only)."""
    blob = json.dumps({"settings": settings_identity, "content": content, "vectors": vectors}, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def index_build_fingerprint(index_path: str | Path, manifest: dict[str, Any] | None = None) -> str:
    """The index's own fingerprint (manifest.json), else a hash of the manifest: a rebuilt index
    with other settings or content is another run; the same index moved elsewhere is the same run.
    `manifest`: the manifest as already read (e.g. by open_index); the file is then read again only
    for an index without a fingerprint, whose bytes are hashed."""
    fp = manifest.get("fingerprint") if isinstance(manifest, dict) else None
    if not fp:
        data = (Path(index_path) / "manifest.json").read_bytes()
        try:
            manifest = json.loads(data)
            fp = manifest.get("fingerprint")
        except (ValueError, AttributeError):
            manifest, fp = {}, None
        if not fp:
            return "manifest-" + hashlib.sha256(data).hexdigest()[:16]
    content = (manifest.get("inputs") or {}).get("content")
    if "build_fingerprint" not in manifest and content:
        # Written before the fingerprint covered content: its settings-only fingerprint and the
        # content digest it recorded beside it.
        return hashlib.sha256(json.dumps({"legacy": fp, "content": content}, sort_keys=True).encode()).hexdigest()[:16]
    return str(fp)
