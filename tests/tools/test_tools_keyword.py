"""keyword_search against the reference definition (a Python loop over every chunk)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arag.index.tokens import count_retrieved_tokens
from arag.index.keyword.ngrams import Postings, PostingsWriter, is_word_char, keyword_trigrams
from tests.support import tools_reference as reference

KEYWORD_SETS = [
    ["Lothair II"],
    ["lothair ii", "Teutberga"],
    ["aa"],  # overlapping occurrences: count is non-overlapping, left to right
    ["aaa", "a"],
    ["AAA"],
    ["İ"],  # Python lowers İ to 'i̇' (two code points); DuckDB's lower() would not
    ["i̇"],
    ["istanbul"],
    ["İSTANBUL"],
    ["i"],
    ["ς"],  # final sigma: only where Python's lower() produces it
    ["σ"],
    ["οδος"],
    ["ΟΔΟΣ"],
    ["σοφος"],
    ["ß"],
    ["ss"],
    ["strasse"],
    ["ﬁ"],
    ["fi"],
    ["🚀"],
    ["🚀🚀"],
    ["café"],
    ["CAFÉ"],
    ["%"],
    ["_"],
    ["a_b"],
    ["\\"],
    ["a\\b"],
    ["'"],
    ['"'],
    ["'; DROP TABLE chunks; --"],
    ["DROP TABLE chunks;"],
    ["O'Brien"],
    ["Zyzzyva"],  # only in a title: titles are not searched
    ["tie"],  # tie: index order decides
    ["tie", "tie"],  # repeated keyword counts twice
    ["e"],
    [" a", "a "],  # spaces inside a keyword are significant
    [".", ","],
    ["U.S.", "a b"],  # no word trigram: scored on every chunk
    ["II.", "i. t"],  # partly: narrowed by their word trigrams alone
    ["no such keyword anywhere"],
    ["the", "a", "e", "i", "o", "u"],
]


def chunk_ids_scores(index, pairs):
    return [(index.chunk_ids[o], s) for o, s in pairs]


@pytest.mark.parametrize("keywords", KEYWORD_SETS, ids=lambda k: repr(k)[:40])
@pytest.mark.parametrize("which", ["trigram", "scan"])
def test_matches_reference(edge_index, edge_ctx, edge_ctx_scan, keywords, which):
    ctx = edge_ctx if which == "trigram" else edge_ctx_scan
    for top_k in (1, 3, 20):
        expected = chunk_ids_scores(edge_index, reference.keyword_scores(edge_index.chunk_texts, keywords, top_k))
        result = ctx.call("keyword_search", {"keywords": keywords, "top_k": top_k})
        assert result.error is None, result.text
        assert [(h.chunk_id, int(h.score)) for h in result.results] == expected


def test_specific_scores(edge_ctx):
    # "aaaa aaa." has 2 + 1 non-overlapping "aa"; "AAA at the end." and "aardvark" have 1; score = count * len("aa").
    res = edge_ctx.call("keyword_search", {"keywords": ["aa"]})
    assert [(h.chunk_id, h.score) for h in res.results] == [("1#0", 6.0), ("1#2", 2.0), ("6#0", 2.0)]
    # A tie between two chunks of the same score: index order.
    res = edge_ctx.call("keyword_search", {"keywords": ["tie"]})
    assert [h.chunk_id for h in res.results] == ["5#0", "5#1"]
    # Literal percent sign, not a LIKE wildcard.
    res = edge_ctx.call("keyword_search", {"keywords": ["%"]})
    assert [(h.chunk_id, h.score) for h in res.results] == [("4#0", 2.0)]
    # Title-only words never match.
    assert edge_ctx.call("keyword_search", {"keywords": ["Zyzzyva"]}).results == []
    # İ lowers to i + combining dot (Python): it matches 'İ' and 'i̇' but not a plain 'i'.
    res = edge_ctx.call("keyword_search", {"keywords": ["İ"]})
    assert {h.chunk_id for h in res.results} == {"2#0", "2#1"}


def test_snippets_are_matching_sentences(edge_ctx):
    res = edge_ctx.call("keyword_search", {"keywords": ["lotharingia", "II"]})
    by_id = {h.chunk_id: h for h in res.results}
    assert by_id["0#0"].snippets == ["She was a queen of Lotharingia."]
    assert by_id["0#1"].snippets == ["Lothair II repudiated her.", "The marriage of Lothair II failed."]
    assert "... She was a queen of Lotharingia. ..." in res.text
    assert res.retrieved_tokens == count_retrieved_tokens("\n".join(s for h in res.results for s in h.snippets))
    assert res.text.count("Chunk ID:") == len(res.results)


def test_match_across_sentence_break_still_has_a_snippet(edge_ctx):
    res = edge_ctx.call("keyword_search", {"keywords": ["november 875. she"]})
    assert [h.chunk_id for h in res.results] == ["0#0"]
    assert res.results[0].snippets == ["Teutberga died 11 November 875.", "She was a queen of Lotharingia."]


def test_full_text_option(edge_ctx, edge_index):
    res = edge_ctx.call("keyword_search", {"keywords": ["lothair"]}, full_text=True)
    assert res.results[0].snippets == [edge_index.chunk_texts[edge_index.chunk_ids.index("0#1")]]
    assert "Snippets show" not in res.text
    assert res.retrieved_tokens == count_retrieved_tokens(res.results[0].snippets[0])


def test_top_k_cap_and_default(edge_ctx):
    res = edge_ctx.call("keyword_search", {"keywords": ["e"], "top_k": 500})
    assert res.error is None and res.details["top_k_capped_from"] == 500 and "capped at 20" in res.text
    assert len(edge_ctx.call("keyword_search", {"keywords": ["e"]}).results) == 5
    assert len(edge_ctx.call("keyword_search", {"keywords": ["e"], "top_k": 2.0}).results) == 2


def test_no_match_text(edge_ctx):
    res = edge_ctx.call("keyword_search", {"keywords": ["qqqqq"]})
    assert res.error is None and res.results == [] and res.retrieved_tokens == 0
    assert res.text == "No results found for keywords: ['qqqqq']"


@pytest.mark.parametrize(
    "args, fragment",
    [
        ({}, "missing required argument"),
        ({"keywords": "Paris"}, "list of strings"),
        ({"keywords": []}, "empty"),
        ({"keywords": ["  "]}, "blank"),
        ({"keywords": [""]}, "blank"),
        ({"keywords": [3]}, "must be a string"),
        ({"keywords": [None]}, "must be a string"),
        ({"keywords": ["x"], "top_k": 0}, "at least 1"),
        ({"keywords": ["x"], "top_k": -3}, "at least 1"),
        ({"keywords": ["x"], "top_k": "5"}, "integer"),
        ({"keywords": ["x"], "top_k": True}, "integer"),
        ({"keywords": ["x"], "top_k": 2.5}, "whole number"),
        ({"keywords": ["x"], "top_k": float("nan")}, "whole number"),
        ({"keywords": ["x" * 1_000_000]}, "characters long"),
        ({"keywords": ["x"] * 100}, "too many"),
        ({"keywords": ["\ud800"]}, "surrogate"),
        ({"keywords": ["a\x00b"]}, "NUL"),
        ({"keywords": ["x"], "query": "y"}, "unexpected argument"),
    ],
)
def test_bad_arguments(edge_ctx, args, fragment):
    res = edge_ctx.call("keyword_search", args)
    assert res.error is not None and fragment in res.error, res.error
    assert res.text.startswith("Error in keyword_search:") and res.results == [] and res.retrieved_tokens == 0


def test_json_string_arguments(edge_ctx):
    assert edge_ctx.call("keyword_search", '{"keywords": ["tie"], "top_k": 1}').results[0].chunk_id == "5#0"
    assert "not valid JSON" in edge_ctx.call("keyword_search", '{"keywords": [').error


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    keywords=st.lists(
        st.one_of(
            st.text(alphabet=st.sampled_from("aAiIİıσςΣßẞsS%_'\\\"ﬁ🚀é. -lothrTE"), min_size=1, max_size=6),
            st.sampled_from(["Lothair", "ss", "İs", "ΟΣ", "a_b", "100%", "tie t", "é c"]),
        ).filter(lambda k: k.strip()),
        min_size=1,
        max_size=4,
    ),
    top_k=st.integers(1, 20),
)
def test_random_keywords_match_reference(edge_index, edge_ctx, edge_ctx_scan, keywords, top_k):
    expected = chunk_ids_scores(edge_index, reference.keyword_scores(edge_index.chunk_texts, keywords, top_k))
    for ctx in (edge_ctx, edge_ctx_scan):
        res = ctx.call("keyword_search", {"keywords": keywords, "top_k": top_k})
        assert res.error is None, res.text
        assert [(h.chunk_id, int(h.score)) for h in res.results] == expected


@settings(max_examples=100, deadline=None)
@given(texts=st.lists(st.text(max_size=40), min_size=1, max_size=8), data=st.data())
def test_trigram_candidates_are_a_superset(tmp_path_factory, texts, data):
    """Any chunk containing the keyword is a candidate, and with no early stop exactly the
    chunks holding all its trigrams are (trigram codes are exact, not hashed)."""
    texts = [t.encode("utf-8", "replace").decode("utf-8").lower() for t in texts]
    i = data.draw(st.integers(0, len(texts) - 1))
    t = texts[i]
    if len(t) < 3:
        return
    a = data.draw(st.integers(0, len(t) - 3))
    b = data.draw(st.integers(a + 3, len(t)))
    keyword = t[a:b]
    codes = keyword_trigrams(keyword)
    grams = {keyword[j : j + 3] for j in range(len(keyword) - 2)}
    grams = {g for g in grams if all(is_word_char(c) for c in g)}  # only word trigrams are indexed
    if codes is None:  # no word trigram: every chunk is a candidate
        assert not grams
        return
    d = tmp_path_factory.mktemp("tri")
    writer = PostingsWriter()
    writer.add(texts[:3], 0)
    writer.add(texts[3:], 3)  # batches continue the row numbers
    writer.write(d)
    cands = set(Postings(d).candidates(codes, enough=0))
    assert {j for j, x in enumerate(texts) if keyword in x} <= cands
    assert cands == {j for j, x in enumerate(texts) if all(g in x for g in grams)}


def test_only_word_trigrams_are_indexed(tmp_path):
    """Trigrams with a space, punctuation or a symbol get no posting list; letters, marks (a
    Devanagari vowel sign, a combining dot) and digits in any script do."""
    writer = PostingsWriter()
    writer.add(["the cat, 1505", "हिन्दी", "i̇st", "a.b.c $5+"], 0)
    writer.write(tmp_path)
    postings = Postings(tmp_path)
    kept = {"".join(chr((int(k) >> s) & 0x1FFFFF) for s in (42, 21, 0)) for k in postings.keys}
    assert kept == {"the", "cat", "150", "505", "हिन", "िन्", "न्द", "्दी", "i̇s", "̇st"}
    assert keyword_trigrams("a b") is None and keyword_trigrams("u.s.") is None  # scored on every chunk
    assert list(postings.candidates(keyword_trigrams("e cat"))) == [0]  # narrowed by "cat" alone


def test_trigrams_never_cross_chunk_boundaries(tmp_path):
    writer = PostingsWriter()
    writer.add(["ab", "cd", "xyz"], 0)  # "b\x00c" and "bcd"-like joins must not be trigrams
    writer.write(tmp_path)
    postings = Postings(tmp_path)
    assert len(postings.keys) == 1
    assert list(postings.candidates(keyword_trigrams("xyz"))) == [2]
    assert list(postings.candidates(keyword_trigrams("bcd"))) == []


def test_dense_trigrams_have_no_bitmap_and_mean_every_unit(tmp_path):
    texts = ["the cat", "the dog", "the owl", "a zebra"]  # "the" in 3 of 4 rows: dense at 0.5
    writer = PostingsWriter(dense_fraction=0.5, dense_min_units=1, budget=1e9)  # the frequency rule alone
    writer.add(texts, 0)
    writer.write(tmp_path)
    postings = Postings(tmp_path)
    assert writer.dense >= 1 and len(postings.keys) > writer.dense
    assert postings.candidates(keyword_trigrams("the")) is None  # every unit may match
    assert list(postings.candidates(keyword_trigrams("the cat"))) == [0]  # the sparse trigrams still narrow
    assert list(postings.candidates(keyword_trigrams("zeb"))) == [3]
    assert list(postings.candidates(keyword_trigrams("thx"))) == []


def test_postings_budget_drops_the_most_frequent_trigrams_first(tmp_path):
    rng = np.random.default_rng(0)
    words = ["the", "and", "of", "station", "river", "zebra", "quark", "lothair", "teutberga", "xylophone"]
    p = np.array([40, 30, 30, 5, 5, 2, 2, 1, 1, 1], dtype=float)
    texts = [" ".join(rng.choice(words, size=12, p=p / p.sum())) for _ in range(5000)]
    free = PostingsWriter(dense_fraction=2.0, dense_min_units=1, budget=1e9)
    free.add(texts, 0)
    free.write(tmp_path)
    assert free.dense == 0
    capped = PostingsWriter(dense_fraction=2.0, dense_min_units=1, budget=0.5 * free.bytes / free.text_bytes)
    capped.add(texts, 0)
    (tmp_path / "capped").mkdir()
    capped.write(tmp_path / "capped")
    assert 0 < capped.dense < len(capped.bitmaps) and capped.bytes <= 0.5 * free.bytes
    postings = Postings(tmp_path / "capped")
    kept = {int(k) for k, a, b in zip(postings.keys, postings.offsets[:-1], postings.offsets[1:]) if b > a}
    counts = {int(k): len(capped.bitmaps[int(k)]) for k in postings.keys}
    assert max(counts[k] for k in kept) <= min(c for k, c in counts.items() if k not in kept)  # frequent ones went first
    for kw in ["the", "zebra", "lothair", "teutberga x", "station river", "xylo"]:
        found = postings.candidates(keyword_trigrams(kw))
        matches = {j for j, t in enumerate(texts) if kw in t}
        assert found is None or matches <= set(found)  # still a superset
    assert list(postings.candidates(keyword_trigrams("xylophone"))) == [j for j, t in enumerate(texts) if "xylophone" in t]


def test_a_part_smaller_than_dense_min_units_keeps_every_bitmap(tmp_path):
    writer = PostingsWriter(dense_min_units=4096, budget=0.0)
    writer.add(["the cat", "the dog"], 0)
    writer.write(tmp_path)
    assert writer.dense == 0 and list(Postings(tmp_path).candidates(keyword_trigrams("the"))) == [0, 1]


def test_keyword_search_is_exact_when_every_trigram_is_dense(edge_index, monkeypatch, tmp_path):
    from arag.index.store import open_index
    from arag.index.keyword import ngrams
    from arag.tools.index_cache import ChunkStore

    monkeypatch.setattr(ngrams, "DENSE_MIN_UNITS", 1)
    monkeypatch.setattr(ngrams, "DENSE_FRACTION", 0.0)  # every trigram dense: no narrowing at all
    index = open_index(edge_index.path)
    dense = ChunkStore.open(index, cache_dir=tmp_path)
    assert all(p.meta["dense_trigrams"] == len(p.postings.keys) for p in dense.parts if p.num_chunks)
    plain = ChunkStore.open(index)
    for kws in (["Lothair II"], ["aa", "tie"], ["e"], ["queen", "road"], ["nothing-like-this"]):
        assert dense.keyword_top(kws, 20) == plain.keyword_top(kws, 20, narrow=False)


def test_keyword_search_is_exact_under_a_tight_postings_budget(edge_index, monkeypatch, tmp_path):
    from arag.index.store import open_index
    from arag.index.keyword import ngrams
    from arag.tools.index_cache import ChunkStore

    monkeypatch.setattr(ngrams, "DENSE_MIN_UNITS", 1)
    monkeypatch.setattr(ngrams, "DENSE_FRACTION", 2.0)  # the budget rule alone
    monkeypatch.setattr(ngrams, "POSTINGS_BUDGET", 0.05)
    index = open_index(edge_index.path)
    capped = ChunkStore.open(index, cache_dir=tmp_path)
    assert any(0 < p.meta["dense_trigrams"] < len(p.postings.keys) for p in capped.parts if p.num_chunks)
    for p in capped.parts:
        assert p.meta["postings_bytes"] <= 0.05 * sum(len(t.encode()) for t in p.table.column("text").to_pylist())
    plain = ChunkStore.open(index)
    for kws in KEYWORD_SETS:
        assert capped.keyword_top(kws, 20) == plain.keyword_top(kws, 20, narrow=False), kws


@pytest.mark.parametrize("reads, gap, block", [("pread", 4096, 16384), ("pread", 0, 16384), ("pread", 4096, 2), ("mmap", 4096, 16384), ("mmap", 0, 3)])
def test_candidate_texts_read_with_pread_or_in_place_score_the_same(edge_index, monkeypatch, reads, gap, block):
    from arag.index.store import open_index
    from arag.index.keyword import part_cache
    from arag.tools.index_cache import ChunkStore

    monkeypatch.setattr(part_cache, "READ_GAP", gap)  # 0: a read per candidate run of adjacent rows
    monkeypatch.setattr(part_cache, "SCORE_ROWS", block)  # candidates scored a few at a time
    store = ChunkStore.open(open_index(edge_index.path))
    assert any(len(p.python_lower) for p in store.parts)  # rows scored with Python's lower() are among them
    for p in store.parts:
        p.text_reads = reads
    for kws in KEYWORD_SETS:
        expected = chunk_ids_scores(edge_index, reference.keyword_scores(edge_index.chunk_texts, kws, 20))
        assert chunk_ids_scores(edge_index, store.keyword_top(kws, 20)) == expected, kws
        assert chunk_ids_scores(edge_index, store.keyword_top(kws, 20, narrow=False)) == expected, kws


def test_candidate_reads_never_run_across_record_batches(edge_index, monkeypatch, tmp_path):
    """A cache written in record batches of 2 rows: candidate runs stop at every batch's end (the
    other columns' bytes lie between two batches' texts), with or without a read gap."""
    from arag.index.store import open_index
    from arag.index.keyword import part_cache
    from arag.tools.index_cache import ChunkStore

    monkeypatch.setattr(part_cache, "READ_BATCH", 2)
    store = ChunkStore.open(open_index(edge_index.path), cache_dir=tmp_path)
    assert any(p.table.column("text").num_chunks > 2 for p in store.parts)
    for gap in (0, 1 << 30):
        monkeypatch.setattr(part_cache, "READ_GAP", gap)
        for kws in KEYWORD_SETS:
            expected = chunk_ids_scores(edge_index, reference.keyword_scores(edge_index.chunk_texts, kws, 20))
            assert chunk_ids_scores(edge_index, store.keyword_top(kws, 20, narrow=False)) == expected, kws


def test_remembered_keyword_counts_give_the_same_top_chunks(edge_index):
    """Every keyword's counts remembered (no candidate minimum): each set asked twice, the second
    time from memory, equals the reference; a keyword given twice still counts twice."""
    from arag.index.store import open_index
    from arag.index.keyword.counts import KeywordCounts
    from arag.tools.index_cache import ChunkStore

    store = ChunkStore.open(open_index(edge_index.path))
    store.keyword_counts = KeywordCounts(min_candidates=0)
    sets = KEYWORD_SETS + [["Lothair II", "lothair ii", "LOTHAIR II"]]
    for _ in range(2):
        for kws in sets:
            expected = chunk_ids_scores(edge_index, reference.keyword_scores(edge_index.chunk_texts, kws, 20))
            assert chunk_ids_scores(edge_index, store.keyword_top(kws, 20)) == expected, kws
    stats = store.keyword_counts.stats()
    assert stats["hits"] >= len({k.lower() for kws in sets for k in kws}) and stats["keywords"] > 0


def test_keyword_counts_keep_only_costly_keywords_within_the_budget():
    from arag.index.keyword.counts import KeywordCounts

    def vec(n):
        return np.arange(n, dtype=np.int64), np.ones(n, dtype=np.int32)

    memory = KeywordCounts(budget_bytes=3 * 12 * 100, min_candidates=50)
    memory.put("cheap", *vec(100), candidates=49)  # counted again each time: not kept
    assert memory.get("cheap") is None
    for k in ("a", "b", "c"):
        memory.put(k, *vec(100), candidates=500)
    assert memory.get("a") is not None  # 'a' is now the most recently used
    memory.put("d", *vec(100), candidates=500)  # over budget: the least recently used ('b') goes
    assert memory.get("b") is None and all(memory.get(k) is not None for k in ("a", "c", "d"))
    assert memory.bytes == 3 * 1200 and len(memory) == 3
    memory.put("huge", *vec(1000), candidates=5000)  # larger than the whole budget: not kept, nothing evicted
    assert memory.get("huge") is None and len(memory) == 3
    ords, counts = memory.get("a")
    with pytest.raises(ValueError):
        counts[0] = 7  # shared between calls: read-only
