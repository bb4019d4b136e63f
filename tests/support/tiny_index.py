"""Fixtures for the tools: small indexes in the pipeline's format, and a fake encoder.

`make_index` writes chunks/sentences Parquet with the pipeline's schemas, one FAISS shard per part
and the manifest with the pipeline's own writer (tests/support/synthetic_index.commit_parts), so the
tools are tested on what `pipelines.index` writes, without running the Ray pipeline; only the
chunking is given by the test instead of computed.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import faiss
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from arag.index.embedding import EmbedderSpec
from arag.index.layout import IndexLayout, sentence_id
from arag.index.parts import CHUNK_SCHEMA, SENTENCE_SCHEMA, SOURCE_COLUMNS
from arag.index.tokens import count_tokens
from tests.support.synthetic_index import commit_parts, part_record, write_rejects

DIM = 32


def fake_encode(texts: list[str], dim: int = DIM) -> np.ndarray:
    """Deterministic unit vectors: hashed character trigrams, so similar strings are close."""
    out = np.zeros((len(texts), dim), dtype=np.float32)
    for i, t in enumerate(texts):
        t = f"  {t.lower()}  "
        for j in range(len(t) - 2):
            h = int.from_bytes(hashlib.blake2b(t[j : j + 3].encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")
            out[i, h % dim] += 1.0 if (h >> 32) & 1 else -1.0
        # A small text-specific offset keeps distinct texts from tying exactly.
        rng = np.random.default_rng(int.from_bytes(hashlib.blake2b(t.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little"))
        out[i] += 0.01 * rng.standard_normal(dim)
        out[i] /= np.linalg.norm(out[i]) or 1.0
    return out


@dataclass
class Doc:
    doc_id: str
    title: str
    chunks: list[list[str]]  # sentences of each chunk; chunk text = sentences joined by a space
    part: int = 0


@dataclass
class BuiltIndex:
    path: Path
    chunk_ids: list[str]  # index order
    chunk_texts: list[str]
    sentence_ids: np.ndarray
    sentence_texts: list[str]
    sentence_chunk: dict[int, int]  # sentence id -> chunk ordinal
    vectors: np.ndarray  # rows aligned with sentence_ids


def make_index(
    root: Path,
    docs: Sequence[Doc],
    encoder: Callable[[list[str]], np.ndarray] = fake_encode,
    factory: str = "Flat",
    embedder_spec: dict | None = None,
    sep: str = " ",
    sentence_sources: bool = True,
) -> BuiltIndex:
    """Write a complete index of `docs` (grouped by their `part`) under `root`.

    sentence_sources=False writes sentence rows without their source columns, as indexes of format
    version 1 hold them."""
    layout = IndexLayout(root)
    layout.make_dirs()
    corpus_file = root / "docs.jsonl"  # what the index says it was made from
    corpus_file.write_text("".join(json.dumps({"id": d.doc_id, "title": d.title, "text": sep.join(sep.join(c) for c in d.chunks)}, ensure_ascii=False) + "\n" for d in docs))
    parts = sorted({d.part for d in docs})
    records, all_ids, all_texts, all_sids, all_stexts, all_vecs = [], [], [], [], [], []
    sentence_chunk: dict[int, int] = {}
    dimension = None
    for p in parts:
        crow, srow = {k: [] for k in CHUNK_SCHEMA.names}, {k: [] for k in SENTENCE_SCHEMA.names}
        for d in (d for d in docs if d.part == p):
            ordinal = 0
            for pos, sentences in enumerate(d.chunks):
                cid = f"{d.doc_id}#{pos}"
                text = sep.join(sentences)
                for k, v in zip(CHUNK_SCHEMA.names, (cid, d.doc_id, d.title, pos, text, count_tokens(text))):  # n_tokens as the chunker writes it
                    crow[k].append(v)
                for s in sentences:
                    sid = sentence_id(p, len(srow["sentence_id"]))
                    srow["sentence_id"].append(sid)
                    srow["chunk_id"].append(cid)
                    srow["text"].append(s)
                    srow["doc_id"].append(d.doc_id)
                    srow["doc_title"].append(d.title)
                    srow["doc_sentence"].append(ordinal)
                    ordinal += 1
                    sentence_chunk[sid] = len(all_ids)
                all_ids.append(cid)
                all_texts.append(text)
        pq.write_table(pa.table(crow, schema=CHUNK_SCHEMA), layout.chunks(p), row_group_size=3)
        sentences = pa.table(srow, schema=SENTENCE_SCHEMA)
        if not sentence_sources:
            sentences = sentences.drop_columns(list(SOURCE_COLUMNS))
        pq.write_table(sentences, layout.sentences(p), row_group_size=4)
        write_rejects(layout, p)
        sids = np.asarray(srow["sentence_id"], dtype=np.int64)
        if len(sids):
            vecs = np.ascontiguousarray(encoder(srow["text"]), dtype=np.float32)
            dimension = vecs.shape[1]
            if factory == "Flat":
                shard = faiss.IndexIDMap2(faiss.IndexFlatIP(dimension))
            else:
                shard = faiss.index_factory(dimension, factory, faiss.METRIC_INNER_PRODUCT)
                shard.train(vecs)
            shard.add_with_ids(vecs, sids)
            faiss.write_index(shard, str(layout.vectors(p)))
            all_vecs.append(vecs)
        all_sids.append(sids)
        all_stexts += srow["text"]
        records.append(part_record(p, corpus_file, sum(1 for d in docs if d.part == p), len(crow["chunk_id"]), len(sids)))
    spec = EmbedderSpec(**(embedder_spec or {"name": "fake-trigram-hash"}))
    # The index setting is Flat either way: a per-part IVF shard is what indexes built before the
    # global ANN hold, which the tools still search (index.faiss_factory=IVF... is refused now).
    commit_parts(root, corpus_file, records, dimension=int(dimension or DIM), embedder=spec)
    vectors = np.concatenate(all_vecs) if all_vecs else np.zeros((0, DIM), np.float32)
    return BuiltIndex(root, all_ids, all_texts, np.concatenate(all_sids), all_stexts, sentence_chunk, vectors)


def make_packed_index(root: Path, documents: list[dict], chunk_tokens: int, chunk_overlap: int, sentence_sources: bool = True,
                      embedder_spec: dict | None = None) -> Path:
    """Write a complete packed index (`index.chunking=packed`) of `documents` ({"doc_id", "title",
    "text"}) under `root`: the pipeline's own part builder (arag.index.parts.build_part, the real
    window packer) writes the Parquet files, fake_encode the vectors. sentence_sources=False drops
    the sentence rows' source columns, as a packed index built before format 2 lacks them;
    `embedder_spec`: the embedder its manifest names (default: the fake encoder's name)."""
    from arag.corpus.readers import CorpusSpec, plan_parts
    from arag.index.parts import ChunkingSettings, build_part
    from arag.index.vectors import build_shard, write_shard

    layout = IndexLayout(root)
    layout.make_dirs()
    corpus_file = root / "docs.jsonl"
    corpus_file.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in documents))
    spec = CorpusSpec("packed-fixture", "jsonl", str(corpus_file))
    chunking = ChunkingSettings(mode="packed", chunk_tokens=chunk_tokens, chunk_overlap=chunk_overlap)
    records = [build_part(spec, part, chunking, layout) for part in plan_parts(spec)]
    for r in records:
        table = pq.read_table(layout.sentences(r.part))
        if not sentence_sources:
            pq.write_table(table.drop_columns(list(SOURCE_COLUMNS)), layout.sentences(r.part))
        vectors = fake_encode(table.column("text").to_pylist())
        write_shard(build_shard(vectors, table.column("sentence_id").to_numpy()), layout.vectors(r.part))
    commit_parts(root, corpus_file, records, dimension=DIM, embedder=EmbedderSpec(**(embedder_spec or {"name": "fake-trigram-hash"})), chunking=chunking)
    return root


# Edge cases of keyword matching: overlapping occurrences, unicode case folding, titles that are
# not in the text, ties, chunks at document edges, SQL-looking characters.
EDGE_DOCS = [
    Doc("0", "Teutberga", [["Teutberga died 11 November 875.", "She was a queen of Lotharingia."], ["Lothair II repudiated her.", "The marriage of Lothair II failed."]]),
    Doc("1", "Aaa", [["aaaa aaa.", "Banana bandana."], ["Nothing here at all."], ["AAA at the end."]]),
    Doc("2", "Istanbul", [["İstanbul is large.", "ISTANBUL and istanbul."], ["The river İ and i̇ are different."]]),
    Doc("3", "Greek", [["ΟΔΟΣ means road.", "Οδός in Greek; ΣΟΦΟΣ too."], ["Straße and STRASSE and strasse."]]),
    Doc("4", "Percent", [["100% sure, 50 % maybe.", "a_b and a-b and a\\b."], ["It's O'Brien's 'quoted' text; DROP TABLE chunks;"]]),
    Doc("5", "Tie", [["tie tie.", "other."], ["tie tie.", "another."]], part=1),
    Doc("6", "Only title word Zyzzyva", [["This chunk never names its title.", "It says aardvark."]], part=1),
    Doc("7", "Empty part doc", [["Ελληνικά: ΣΊΣΥΦΟΣ.", "ﬁne ligature and FINE."]], part=3),
    Doc("8", "Emoji", [["Rocket 🚀 launch 🚀🚀.", "Café CAFÉ café."]], part=3),
]


@pytest.fixture(scope="session")
def edge_index(tmp_path_factory) -> BuiltIndex:
    return make_index(tmp_path_factory.mktemp("edge") / "index", EDGE_DOCS)


@pytest.fixture(scope="session")
def edge_ctx(edge_index):
    from arag.tools import ToolContext

    with ToolContext(edge_index.path, encoder=fake_encode) as ctx:
        yield ctx


@pytest.fixture(scope="session")
def edge_ctx_scan(edge_index, tmp_path_factory):
    """The same index searched by a full DuckDB scan (no trigram index)."""
    from arag.tools import ToolContext

    with ToolContext(edge_index.path, encoder=fake_encode, accelerate=False, cache_dir=tmp_path_factory.mktemp("scan-cache")) as ctx:
        yield ctx
