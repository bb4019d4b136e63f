"""A committed part's input check (plain Python, no Ray): the file's size and mtime recorded when the
part was read are trusted, bytes are hashed again only when they differ or when asked."""

from __future__ import annotations

import os

import pytest

import arag.index.parts as parts
from arag.corpus.readers import CorpusSpec, plan_parts
from arag.index.layout import IndexLayout
from arag.index.parts import ChunkingSettings, build_or_keep_part, verify_part
from tests.conftest import write_jsonl


@pytest.fixture
def committed(tmp_path):
    corpus = write_jsonl(tmp_path / "c" / "c.jsonl", [{"doc_id": f"d{i}", "text": f"Fact number {i} is here."} for i in range(50)])
    spec = CorpusSpec("t", "jsonl", str(corpus))
    layout = IndexLayout(tmp_path / "idx")
    layout.make_dirs()
    (part,) = plan_parts(spec)
    record, built = build_or_keep_part(spec, part, ChunkingSettings(), layout)
    assert built
    return corpus, spec, layout, part, record


def test_the_record_keeps_the_input_files_size_and_mtime(committed):
    corpus, _, _, _, record = committed
    stat = corpus.stat()
    assert (record.source["file_size"], record.source["file_mtime_ns"]) == (stat.st_size, stat.st_mtime_ns)


def test_an_untouched_input_is_trusted_without_hashing(committed, monkeypatch):
    _, spec, layout, part, record = committed
    hashed = []
    real = parts.part_digest
    monkeypatch.setattr(parts, "part_digest", lambda *a: hashed.append(a) or real(*a))
    assert verify_part(spec, part, record) and hashed == []
    again, built = build_or_keep_part(spec, part, ChunkingSettings(), layout)
    assert not built and again == record and hashed == []  # kept as committed
    assert verify_part(spec, part, record, rehash=True) and len(hashed) == 1  # asked: hashed


def test_same_size_edits(committed):
    corpus, spec, _, part, record = committed
    original, stat = corpus.read_bytes(), corpus.stat()
    corpus.write_bytes(original.replace(b"number 7 ", b"numbex 7 "))
    os.utime(corpus, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert not verify_part(spec, part, record)  # a new mtime: hashed, and the bytes differ
    os.utime(corpus, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert verify_part(spec, part, record)  # size and mtime as recorded: trusted
    assert not verify_part(spec, part, record, rehash=True)  # unless asked to hash
    corpus.write_bytes(original)
    os.utime(corpus, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert verify_part(spec, part, record)  # touched, same bytes: hashed and found the same


def test_a_record_without_file_stats_is_hashed(committed, monkeypatch):
    _, spec, _, part, record = committed
    old = parts.PartRecord(**{**record.to_json(), "source": {k: record.source[k] for k in parts.CONTENT_KEYS}})
    hashed = []
    real = parts.part_digest
    monkeypatch.setattr(parts, "part_digest", lambda *a: hashed.append(a) or real(*a))
    assert verify_part(spec, part, old) and len(hashed) == 1
