"""The 6-gram slices: a superset filter whatever the collisions, built only where trigrams are weak."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arag.index.keyword import gram_slices, part_cache
from arag.index.keyword.gram_slices import GramSlices, GramSlicesWriter, keyword_buckets, trigrams_are_weak
from arag.index.keyword.ngrams import PostingsWriter

from tests.support.tools_reference import keyword_scores as reference_scores

SYLLABLES = ["ka", "lo", "mi", "ta", "ru", "ne", "so", "vi"]


def made_up_texts(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    words = ["".join(rng.choice(SYLLABLES, size=int(rng.integers(1, 5)))) for _ in range(3000)]
    return [" ".join(rng.choice(words, size=40)) for _ in range(n)]


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(st.text(alphabet="abc xy\x00é", max_size=30), min_size=1, max_size=6), data=st.data())
def test_slices_keep_every_chunk_containing_the_keyword(tmp_path_factory, texts, data):
    i = data.draw(st.integers(0, len(texts) - 1))
    t = texts[i]
    if len(t) < 6 or "\x00" in t:
        return
    a = data.draw(st.integers(0, len(t) - 6))
    b = data.draw(st.integers(a + 6, len(t)))
    keyword = t[a:b]
    d = tmp_path_factory.mktemp("slices")
    writer = GramSlicesWriter()
    writer.add(texts[:2], 0)
    writer.add(texts[2:], 2)
    writer.write(d)
    found = set(GramSlices(d).candidates(keyword_buckets(keyword), within=None))
    assert {j for j, x in enumerate(texts) if keyword in x} <= found


def test_slices_narrow_made_up_words_where_trigrams_cannot(tmp_path):
    texts = made_up_texts(3000)
    writer = GramSlicesWriter()
    writer.add(texts, 0)
    writer.write(tmp_path)
    slices = GramSlices(tmp_path)
    for kw in ["kalomi taru", "sovine kaka", "ruta lomi"]:
        matches = {j for j, x in enumerate(texts) if kw in x}
        found = set(slices.candidates(keyword_buckets(kw), within=None))
        assert matches <= found and len(found) < 0.2 * len(texts)
    assert keyword_buckets("short") is None  # under six code points: the slices cannot help


def prose_texts(n: int, seed: int = 0) -> list[str]:
    """Words over the whole alphabet, as in natural prose: their trigrams are specific."""
    rng = np.random.default_rng(seed)
    letters = list("abcdefghijklmnopqrstuvwxyz")
    words = ["".join(rng.choice(letters, size=int(rng.integers(3, 11)))) for _ in range(3000)]
    return [" ".join(rng.choice(words, size=40)) for _ in range(n)]


@pytest.mark.parametrize("texts, weak", [(made_up_texts(2000), True), (prose_texts(2000), False)], ids=["made-up words", "prose"])
def test_weak_trigrams_are_told_apart_from_prose(texts, weak):
    writer = PostingsWriter()
    writer.add(texts, 0)
    sample = list(range(0, len(texts), 2))
    assert trigrams_are_weak(writer.bitmaps, sample, [texts[i] for i in sample]) is weak


@pytest.fixture()
def made_up_index(tmp_path_factory):
    from conftest import Doc, make_index

    texts = made_up_texts(400, seed=1)
    docs = [Doc(doc_id=str(i), title=f"Doc {i}", chunks=[[t]]) for i, t in enumerate(texts)]
    return make_index(tmp_path_factory.mktemp("madeup") / "index", docs)


def test_a_part_with_weak_trigrams_gets_slices_and_scores_exactly(made_up_index, monkeypatch, tmp_path):
    from arag.index.store import open_index
    from arag.tools.index_cache import ChunkStore

    monkeypatch.setattr(part_cache, "SLICES_MIN_ROWS", 1)
    store = ChunkStore.open(open_index(made_up_index.path), cache_dir=tmp_path)
    assert all(p.slices is not None and p.meta["gram_slices_bytes"] > 0 for p in store.parts if p.num_chunks)
    ids, texts = made_up_index.chunk_ids, made_up_index.chunk_texts
    keyword_sets = [[texts[7][3:15]], [texts[20][:8], texts[33][10:21]], ["ka"], [texts[50][5:30], "nothing here"], ["vivivivi"]]
    assert all(any(k in t for t in texts) for kws in keyword_sets[:4] for k in kws[:1])
    for kws in keyword_sets:
        expected = [(ids[o], s) for o, s in reference_scores(made_up_index.chunk_texts, kws, 10)]
        assert [(ids[o], s) for o, s in store.keyword_top(kws, 10)] == expected, kws
        assert store.keyword_top(kws, 10) == store.keyword_top(kws, 10, narrow=False)


def test_prose_gets_no_slices(tmp_path_factory, monkeypatch, tmp_path):
    from arag.index.store import open_index
    from arag.tools.index_cache import ChunkStore
    from conftest import Doc, make_index

    monkeypatch.setattr(part_cache, "SLICES_MIN_ROWS", 1)
    docs = [Doc(doc_id=str(i), title=f"Doc {i}", chunks=[[t]]) for i, t in enumerate(prose_texts(300))]
    built = make_index(tmp_path_factory.mktemp("prose") / "index", docs)
    store = ChunkStore.open(open_index(built.path), cache_dir=tmp_path)
    assert all(p.slices is None and not p.meta["gram_slices"] for p in store.parts)
    assert not list(tmp_path.rglob("gram6_*"))
