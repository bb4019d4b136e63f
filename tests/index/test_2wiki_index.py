"""The 2WikiMultiHopQA corpus indexed by the README's first command (packed chunking by default, or
index.chunking=per_document): every passage is a document and is covered, and the manifest, the chunk
and sentence Parquet files and the FAISS shards agree with each other row for row.

Slow in spirit (it reads a real index); skipped without one. CI builds it and requires this file
(ARAG_REQUIRE_TESTS in .ci/run). The index is looked up at $ARAG_2WIKI_INDEX, else indexes/2wiki in the checkout (tests/support/paths.py).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import faiss
import pytest

from arag.index.store import open_index
from tests.support.paths import TWOWIKI_INDEX

INDEX = TWOWIKI_INDEX

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (INDEX / "manifest.json").exists(), reason=f"no complete 2Wiki index at {INDEX} (set ARAG_2WIKI_INDEX)"),
]


def parquet(files: list[Path]) -> str:
    return "[" + ", ".join(f"'{f}'" for f in files) + "]"


def test_every_passage_is_a_document_and_counts_agree():
    index = open_index(INDEX)
    m = index.manifest
    assert m["num_documents"] == 6119 and m["num_rejected"] == 0

    con = duckdb.connect()
    chunks = parquet(index.chunk_files)
    sentences = parquet([p.sentences for p in index.parts if p.num_sentences])
    if index.chunking_mode == "packed":  # the corpus config's default: windows across passages, ids <part>:<n>
        n_chunks, n_bad_ids, over = con.execute(
            f"select count(*), count(*) filter (where chunk_id != '0:' || position), count(*) filter (where n_tokens > {m['chunking']['chunk_tokens']}) from read_parquet({chunks})"
        ).fetchone()
        # every passage is covered by some window (doc_id lists the passages a window covers)
        n_docs = con.execute(f"select count(distinct d) from (select unnest(string_split(doc_id, chr(10))) as d from read_parquet({chunks}))").fetchone()[0]
        assert (n_chunks, n_docs, n_bad_ids, over) == (m["num_chunks"], m["num_documents"], 0, 0)
        assert m["num_parts"] == 1 and n_chunks < n_docs / 5  # ~1,000-token windows of ~90-token passages
    else:
        n_chunks, n_docs, n_bad_positions = con.execute(
            f"select count(*), count(distinct doc_id), count(*) filter (where chunk_id != doc_id || '#' || position) from read_parquet({chunks})"
        ).fetchone()
        assert (n_chunks, n_docs, n_bad_positions) == (m["num_chunks"], m["num_documents"], 0)
        assert n_chunks >= n_docs  # a passage over chunk_tokens tokens spans several chunks, never the reverse

    n_sent, n_ids, orphans = con.execute(
        f"""select count(*), count(distinct sentence_id),
                   count(*) filter (where chunk_id not in (select chunk_id from read_parquet({chunks})))
            from read_parquet({sentences})"""
    ).fetchone()
    assert n_sent == n_ids == m["num_sentences"] and orphans == 0
    sentenceless = con.execute(
        f"select count(*) from read_parquet({chunks}) c where not exists (select 1 from read_parquet({sentences}) s where s.chunk_id = c.chunk_id)"
    ).fetchone()[0]
    assert sentenceless == 0

    vectors = 0
    shard_sizes: dict[str, int] = {}  # read each shard once; the manifest check below reuses its size
    for part in index.parts:
        if part.num_sentences:
            shard = faiss.read_index(str(part.vectors))
            assert shard.ntotal == part.num_sentences and shard.d == m["embedding"]["dimension"]
            # the FAISS ids of a part's shard are exactly that part's sentence ids
            faiss_ids = sorted(faiss.vector_to_array(shard.id_map).tolist())
            parquet_ids = [r[0] for r in con.execute(f"select sentence_id from read_parquet('{part.sentences}') order by 1").fetchall()]
            assert faiss_ids == parquet_ids, part.vectors
            vectors += shard.ntotal
            shard_sizes[str(part.vectors)] = shard.ntotal
    assert vectors == n_sent

    for entry in m["files"]:  # the manifest's own row counts are the files' real row counts
        path = index.root / entry["path"]
        if entry["rows"] == 0 and not path.exists():
            continue
        if path.suffix == ".parquet":
            assert con.execute(f"select count(*) from read_parquet('{path}')").fetchone()[0] == entry["rows"], path
        elif path.suffix == ".faiss":
            assert shard_sizes[str(path)] == entry["rows"], path
