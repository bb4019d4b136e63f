"""The static embedder (`embedder=minilm-static`): distilled locally from the bundled MiniLM on first use,
cached and reused, part of the index identity, and searched with the same model it was built with.

The fast tests distil over a vocabulary cut down to the words of the test corpus (the distillation
runs every vocabulary token through MiniLM: seconds for ~100 tokens instead of minutes for 30k);
the slow test distils the shipped configuration."""

from __future__ import annotations

import re
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from omegaconf import OmegaConf

pytest.importorskip("model2vec", reason="the static embedder needs model2vec (the cpu extra)")

from arag.config.files import conf_dir  # noqa: E402
from arag.corpus.readers import CorpusSpec  # noqa: E402
from arag.index import static_embedding  # noqa: E402
from arag.index.build import IndexSettings  # noqa: E402
from arag.index.embedding import EmbedderSpec, SentenceEmbedder  # noqa: E402
from arag.index.fingerprint import index_build_fingerprint, index_fingerprint  # noqa: E402
from arag.index.model_cache import cache_root  # noqa: E402
from arag.index.parts import ChunkingSettings  # noqa: E402
from arag.index.static_embedding import StaticSpec  # noqa: E402
from arag.runtime.index_job import build_index  # noqa: E402
from arag.strict_settings import UnknownSettingError  # noqa: E402
from tests.conftest import SAMPLE_PASSAGES, write_jsonl  # noqa: E402

QUERIES = {  # a query and the passage it is about
    "When did Teutberga die?": "0",
    "the king from 855 until his death": "1",
    "Who directed the film Phoolwari?": "3",
    "Who composed the music of Aas Ka Panchhi?": "4",
}


def embedder_config(name: str) -> EmbedderSpec:
    return EmbedderSpec.from_config(OmegaConf.to_container(OmegaConf.load(conf_dir() / "embedder" / f"{name}.yaml"), resolve=True))


def corpus_only_pattern() -> str:
    """A token_remove_pattern that keeps only the word pieces of the test texts (and the special tokens)."""
    from transformers import AutoTokenizer

    spec = embedder_config("minilm-static")
    tokenizer = AutoTokenizer.from_pretrained(spec.resolve_path())
    texts = [f"{p['title']}\n{p['text']}" for p in SAMPLE_PASSAGES] + list(QUERIES)
    keep = {t for text in texts for t in tokenizer.tokenize(text)} | set(tokenizer.all_special_tokens)
    return "^(?!(?:" + "|".join(map(re.escape, sorted(keep))) + ")$)"


@pytest.fixture(scope="module")
def small_spec() -> EmbedderSpec:
    base = embedder_config("minilm-static")
    # No SIF weighting: it estimates token frequency from vocabulary rank (Zipf), meaningless over
    # the ~90 tokens kept here.
    small = replace(base.static, pca_dims=32, sif_coefficient=None, token_remove_pattern=corpus_only_pattern())
    return replace(base, name="minilm-static-test", static=small)


def test_the_static_config_is_its_own_index_identity(passages_corpus):
    minilm, static = embedder_config("minilm"), embedder_config("minilm-static")
    assert static.static.library_version == static_embedding.installed_version()  # filled in from the installed model2vec
    assert static.identity()["static"]["pca_dims"] == 256 and "static" not in minilm.identity()
    corpus = CorpusSpec("t", "jsonl", str(passages_corpus))

    def fingerprint(spec: EmbedderSpec) -> str:
        return IndexSettings(corpus=corpus, embedder=spec, chunking=ChunkingSettings()).fingerprint()

    prints = {fingerprint(minilm), fingerprint(static), fingerprint(replace(static, static=replace(static.static, pca_dims=128))),
              fingerprint(replace(static, static=replace(static.static, library_version="0.9.0")))}
    assert len(prints) == 4
    # Run-time settings do not count.
    assert fingerprint(replace(static, batch_size=7, threads=1)) == fingerprint(static)
    # The manifest's spec (asdict) reads back to the same spec.
    from dataclasses import asdict

    assert EmbedderSpec(**asdict(static)) == static


def test_bad_static_settings_are_one_line_errors():
    cfg = OmegaConf.to_container(OmegaConf.load(conf_dir() / "embedder" / "minilm-static.yaml"), resolve=True)
    with pytest.raises(UnknownSettingError, match=r"embedder\.static\.pca_dim .*did you mean embedder\.static\.pca_dims"):
        EmbedderSpec.from_config({**cfg, "static": {**cfg["static"], "pca_dim": 64}})
    with pytest.raises(ValueError, match="quantize_to"):
        EmbedderSpec.from_config({**cfg, "static": {**cfg["static"], "quantize_to": "int4"}})
    with pytest.raises(ValueError, match="no query prompts"):
        EmbedderSpec.from_config({**cfg, "query_prompt": "query: "})


def test_distilled_once_then_read_from_the_cache(small_spec, tmp_path, monkeypatch):
    monkeypatch.setenv("ARAG_CACHE_DIR", str(tmp_path))
    first = SentenceEmbedder(small_spec)
    entries = [p for p in cache_root("static").iterdir() if not p.name.startswith(".")]
    assert len(entries) == 1 and (entries[0] / static_embedding.MARKER).exists()  # published whole, no temporary left
    assert not [p for p in cache_root("static").iterdir() if p.name.startswith(".")]

    def no_distillation(*args):
        raise AssertionError("distilled again although the cache holds the model")

    monkeypatch.setattr(static_embedding, "_distil", no_distillation)
    second = SentenceEmbedder(small_spec)
    texts = [f"{p['title']}\n{p['text']}" for p in SAMPLE_PASSAGES]
    docs = second.encode_documents(texts)
    assert second.backend == "static" and second.dimension == 32 and docs.dtype == np.float32
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    assert np.allclose(docs, first.encode_documents(texts))
    # Queries: the same model; each query's vector is the one it gets alone.
    queries = second.encode_queries(list(QUERIES))
    assert np.allclose(queries[1], second.encode_queries([list(QUERIES)[1]])[0])
    best = [SAMPLE_PASSAGES[i]["doc_id"] for i in np.argmax(queries @ docs.T, axis=1)]
    assert best == list(QUERIES.values())
    # Other settings are another cache entry; a model2vec other than the index's is refused.
    with pytest.raises(RuntimeError, match=r"distilled with model2vec 0\.0\.1, but .* is installed"):
        SentenceEmbedder(replace(small_spec, static=replace(small_spec.static, library_version="0.0.1")))


def ray_cache_root(ray_local) -> Path:
    """Where the Ray workers (the build's embedding actors) keep the static models."""
    return Path(ray_local.get(ray_local.remote(lambda: str(cache_root("static"))).remote()))


def build_and_check(spec: EmbedderSpec, corpus: Path, root: Path):
    settings = IndexSettings(corpus=CorpusSpec("t", "jsonl", str(corpus), prepend_title=True), embedder=spec, chunking=ChunkingSettings())
    build_index(settings, str(root), progress=False, ray_init=lambda: None)
    from arag.tools import ToolContext

    with ToolContext(root) as ctx:
        assert ctx.index.dimension == spec.static.pca_dims
        for query, doc_id in QUERIES.items():  # each query's passage comes first
            hit = ctx.call("semantic_search", {"query": query, "top_k": 1}).results[0]
            assert hit.doc_id == doc_id, (query, hit)
    return settings


def test_an_index_built_with_the_static_model_searches_with_it(small_spec, ray_local, tmp_path, monkeypatch):
    """Two builds through the pipeline; the embedding actors read the model from the cache that the
    first use filled. Proof that they did not distil again: the cached vectors are reversed (a fresh
    distillation would give them in their own order), and both builds stored the reversed ones."""
    from safetensors.numpy import load_file, save_file

    from arag.index.store import open_index
    from arag.index.vectors import stored_vectors

    cache = ray_cache_root(ray_local)
    monkeypatch.setenv("ARAG_CACHE_DIR", str(cache.parent.parent))  # this process shares the actors' cache
    assert cache_root("static") == cache
    SentenceEmbedder(small_spec)  # distils (or finds) the model
    entry = static_embedding.cache_entry(small_spec.resolve_path(), small_spec.static)
    try:
        tensors = load_file(str(entry / "model.safetensors"))
        tensors["embeddings"] = np.ascontiguousarray(tensors["embeddings"][:, ::-1])
        save_file(tensors, str(entry / "model.safetensors"))
        reversed_model = SentenceEmbedder(small_spec)
        corpus = write_jsonl(tmp_path / "corpus.jsonl", SAMPLE_PASSAGES)
        for n, root in enumerate((tmp_path / "first", tmp_path / "second")):
            settings = build_and_check(small_spec, corpus, root)
            index = open_index(root)
            sentences = pq.read_table([str(p.sentences) for p in index.parts if p.num_sentences], columns=["sentence_id", "text"])
            stored = stored_vectors(index.vector_files, sentences["sentence_id"].to_pylist())
            assert np.allclose(stored, reversed_model.encode_documents(sentences["text"].to_pylist()), atol=1e-5), f"build {n + 1} distilled again"
        # The same corpus embedded with MiniLM is another index.
        manifest = open_index(root).manifest
        minilm = IndexSettings(corpus=settings.corpus, embedder=embedder_config("minilm"), chunking=settings.chunking)
        content, vectors = manifest["inputs"]["content"], manifest["vectors"]
        assert index_build_fingerprint(root) == index_fingerprint(settings.identity(), content, vectors)
        assert index_build_fingerprint(root) != index_fingerprint(minilm.identity(), content, vectors)
        assert manifest["build_fingerprint"] == settings.fingerprint() != minilm.fingerprint()
        assert open_index(root).embedder_spec == small_spec  # the manifest names the static model and its settings
    finally:
        shutil.rmtree(entry, ignore_errors=True)


@pytest.mark.slow
def test_the_shipped_static_embedder_distils_and_retrieves(tmp_path, monkeypatch):
    """conf/embedder/minilm-static.yaml as shipped: the full MiniLM vocabulary (minutes on 2 cores,
    once per machine), offline."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    spec = embedder_config("minilm-static")
    embedder = SentenceEmbedder(spec)
    texts = [f"{p['title']}\n{p['text']}" for p in SAMPLE_PASSAGES]
    docs, queries = embedder.encode_documents(texts), embedder.encode_queries(list(QUERIES))
    assert docs.shape == (len(texts), 256)
    best = [SAMPLE_PASSAGES[i]["doc_id"] for i in np.argmax(queries @ docs.T, axis=1)]
    assert best == list(QUERIES.values())
