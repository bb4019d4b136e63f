"""The 6-gram slices: a superset filter whatever the collisions, built only where trigrams are weak."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arag.tools import gram_slices, part_cache
from arag.tools.gram_slices import GramSlices, GramSlicesWriter, has_weak_trigrams, keyword_buckets

from benchmarks.tools_reference import keyword_scores as reference_scores

SYLLABLES = ["ka", "lo", "mi", "ta", "ru", "ne", "so", "vi"]


def made_up_texts(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    words = ["".join(rng.choice(SYLLABLES, size=int(rng.integers(1, 4)))) for _ in range(300)]
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


def test_weak_trigrams_are_told_apart_from_prose():
    assert has_weak_trigrams(np.array([900, 800, 700, 600]), rows=1000)  # every trigram common
    assert not has_weak_trigrams(np.array([900] + [5] * 5000), rows=1000)  # most postings rare
    assert not has_weak_trigrams(np.array([], dtype=np.int64), rows=0)


@pytest.fixture()
def made_up_index(tmp_path_factory):
    from conftest import Doc, make_index

    texts = made_up_texts(400, seed=1)
    docs = [Doc(doc_id=str(i), title=f"Doc {i}", chunks=[[t]]) for i, t in enumerate(texts)]
    return make_index(tmp_path_factory.mktemp("madeup") / "index", docs)


def test_a_part_with_weak_trigrams_gets_slices_and_scores_exactly(made_up_index, monkeypatch, tmp_path):
    from arag.index.store import open_index
    from arag.tools.store import ChunkStore

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


def test_prose_gets_no_slices(edge_index, monkeypatch, tmp_path):
    from arag.index.store import open_index
    from arag.tools.store import ChunkStore

    monkeypatch.setattr(part_cache, "SLICES_MIN_ROWS", 1)
    monkeypatch.setattr(gram_slices, "WEAK_TRIGRAM_DF", 0.9)
    store = ChunkStore.open(open_index(edge_index.path), cache_dir=tmp_path)
    assert all(p.slices is None and not p.meta["gram_slices"] for p in store.parts)
