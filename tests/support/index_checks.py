"""Checks on an index directory shared by the build, durability and kill tests."""

from __future__ import annotations

import json
from pathlib import Path


def commit_records(root: Path) -> dict[str, dict[str, int]]:
    """Every commit record of an index (part records, vectors records, the manifest) with the
    files it names and their recorded sizes."""
    named: dict[str, dict[str, int]] = {}
    for path in sorted((root / "parts").glob("*.json")):
        record = json.loads(path.read_text())
        if path.name.endswith(".vectors.json"):
            named[path.name] = {record["path"]: record["bytes"]}
        else:
            named[path.name] = dict(record["files"])
    manifest = root / "manifest.json"
    if manifest.exists():
        named["manifest.json"] = {f["path"]: f["bytes"] for f in json.loads(manifest.read_text())["files"]}
    return named


def files_missing_or_short(root: Path) -> list[str]:
    """'record: file (why)' for each file a commit record names that is missing or shorter than recorded."""
    bad = []
    for record, files in commit_records(root).items():
        for rel, size in files.items():
            path = root / rel
            if not path.is_file():
                bad.append(f"{record}: {rel} (missing)")
            elif path.stat().st_size < size:
                bad.append(f"{record}: {rel} ({path.stat().st_size} < {size} bytes)")
    return bad
