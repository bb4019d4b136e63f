"""Which build an index folder holds, as one string: the same settings over the same corpus files give
the same fingerprint wherever the index folder lies. The corpus is named by its resolved path (and its
files' names and sizes, arag.index.build.IndexSettings.identity), so the same files copied to
another path are another build. Evaluation runs key on it (a rebuilt index with other
settings is another run) and the tool server reports it (a client checks it serves the same index)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path


def index_build_fingerprint(index_path: str | Path) -> str:
    """The index's own fingerprint (manifest.json), else a hash of the manifest: a rebuilt index
    with other settings is another run; the same index moved elsewhere is the same run."""
    manifest_path = Path(index_path) / "manifest.json"
    data = manifest_path.read_bytes()
    try:
        fp = json.loads(data).get("fingerprint")
    except ValueError:
        fp = None
    return str(fp) if fp else "manifest-" + hashlib.sha256(data).hexdigest()[:16]
