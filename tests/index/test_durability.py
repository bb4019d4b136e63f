"""Every index file reaches the disk before the name that points at it, and that name before the
commit record that names it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from arag.corpus.readers import CorpusSpec, plan_parts
from arag.index import layout as layout_module
from arag.index.layout import IndexLayout, atomic_path, write_json_atomic
from arag.index.parts import ChunkingSettings, build_part
from tests.conftest import write_jsonl


@pytest.fixture
def disk_events(monkeypatch) -> list[tuple[str, str]]:
    """('fsync', path) and ('rename', target) in the order they happen."""
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return real_fsync(fd)

    def replace(src, dst):
        events.append(("rename", str(dst)))
        return real_replace(src, dst)

    monkeypatch.setattr(layout_module.os, "fsync", fsync)
    monkeypatch.setattr(layout_module.os, "replace", replace)
    return events


def test_atomic_path_fsyncs_the_file_before_the_rename_and_the_folder_after(tmp_path, disk_events):
    target = tmp_path / "sub" / "data.bin"
    with atomic_path(target) as tmp:
        tmp.write_bytes(b"x" * 1000)
        written = str(tmp)
    assert disk_events == [("fsync", written), ("rename", str(target)), ("fsync", str(target.parent))]
    assert target.read_bytes() == b"x" * 1000


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_committed_files_get_the_umasks_permissions_not_private_ones(tmp_path, umask):
    previous = os.umask(umask)
    try:
        with atomic_path(tmp_path / "data.bin") as tmp:
            tmp.write_bytes(b"x")
    finally:
        os.umask(previous)
    assert (tmp_path / "data.bin").stat().st_mode & 0o777 == 0o666 & ~umask


def test_a_failed_block_leaves_no_file_and_syncs_nothing(tmp_path, disk_events):
    target = tmp_path / "data.bin"
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_bytes(b"half")
            raise RuntimeError("killed")
    assert not target.exists() and not list(tmp_path.iterdir()) and disk_events == []


def test_a_part_record_comes_after_its_files_are_durable(tmp_path, disk_events):
    corpus = write_jsonl(tmp_path / "c" / "c.jsonl", [{"doc_id": str(i), "text": f"Sentence {i}. Another one."} for i in range(20)])
    spec = CorpusSpec("t", "jsonl", str(corpus))
    layout = IndexLayout(tmp_path / "idx")
    layout.make_dirs()
    record = build_part(spec, plan_parts(spec)[0], ChunkingSettings(), layout)
    renames = [target for kind, target in disk_events if kind == "rename"]
    record_path = str(layout.part_record(0))
    assert renames[-1] == record_path  # the record is renamed into place last
    for rel, size in record.files.items():
        path = layout.root / rel
        assert path.stat().st_size == size > 0
        at = renames.index(str(path))
        # the file's folder is synced after its rename and before the record is written
        assert ("fsync", str(path.parent)) in disk_events[disk_events.index(("rename", str(path))) :]
        assert at < renames.index(record_path)
    assert disk_events[-1] == ("fsync", str(layout.part_record(0).parent))


def test_json_records_are_fsynced(tmp_path, disk_events):
    write_json_atomic(tmp_path / "r.json", {"a": 1})
    assert [kind for kind, _ in disk_events] == ["fsync", "rename", "fsync"]
