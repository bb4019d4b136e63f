"""Which index a folder holds, as one string that evaluation runs key on and the tool server reports:
the build settings and the input content's digest, no path (docs/indexing.md, "Index format")."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


def index_fingerprint(settings_identity: dict[str, Any], content: dict[str, Any], vectors: str) -> str:
    """`content`: {"hash", "digest"}; `vectors`: the manifest's kind of index (embedded or text_only)."""
    blob = json.dumps({"settings": settings_identity, "content": content, "vectors": vectors}, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def index_build_fingerprint(index_path: str | Path, manifest: dict[str, Any] | None = None) -> str:
    """The index's own fingerprint, else a hash of the manifest's bytes; `manifest`: as already read, if it was."""
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
        # Written before the fingerprint covered content: its settings-only fingerprint and the content digest it recorded beside it.
        return hashlib.sha256(json.dumps({"legacy": fp, "content": content}, sort_keys=True).encode()).hexdigest()[:16]
    return str(fp)
