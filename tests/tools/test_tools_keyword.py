"""keyword_search against the reference definition (a Python loop over every chunk)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arag.index.keyword import part_cache
from arag.index.keyword import words as words_module
from arag.index.keyword.counts import ENTRY_BYTES, KeywordCounts
from arag.index.keyword.words import ESCAPE, WordPostings, WordPostingsWriter, pair_edges, split_keyword
from arag.index.store import open_index
from arag.index.tokens import count_retrieved_tokens
from arag.tools.index_cache import ChunkStore
from tests.support import tools_reference as reference
from tests.support.tiny_index import Doc, make_index

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
    ["U.S.", "a b"],  # word conditions: a whole word "s", a word ending in "a" and one starting with "b"
    ["II.", "i. t"],  # a word ending in "ii"; a word ending in "i" and one starting with "t"
    ["no such keyword anywhere"],
    ["the", "a", "e", "i", "o", "u"],
]


def chunk_ids_scores(index, pairs):
    return [(index.chunk_ids[o], s) for o, s in pairs]


def postings(path, texts: list[str]) -> WordPostings:
    """The word postings of `texts` as chunks 0, 1, ..., written to `path`."""
    writer = WordPostingsWriter()
    writer.add(texts, 0)
    writer.write(path)
    return WordPostings(path, num_chunks=len(texts))


@pytest.mark.parametrize("keywords", KEYWORD_SETS, ids=lambda k: repr(k)[:40])
@pytest.mark.parametrize("which", ["words", "scan"])
def test_matches_reference(edge_index, edge_ctx, edge_ctx_scan, keywords, which):
    ctx = edge_ctx if which == "words" else edge_ctx_scan
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
        ({"keywords": ["x"], "top_k": float("-inf")}, "whole number"),
        ({"keywords": ["x"], "top_k": -2.0}, "at least 1, got -2"),
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


WORDY_TEXTS = [
    "aaaa aaa. Aa-aa a.a.a",  # overlapping runs inside and across words
    "A nest of vipers; a nest-of-nests, the honest nest of a hornet.",
    "U.S. forces; u.s.a. and US. The U.S.S.R.",
    "O'Brien met o'brien and O’Brien: 'o'",
    "İstanbul, ISTANBUL; istanbul ıstanbul. Straße STRASSE ﬁne fine",
    "ΟΔΟΣ οδος σοφος ΣΟΦΟΣ mother grandmother MOTHERHOOD stepmother's mothers",
    "1990s 1990 19901990 ½ 2½ x²y naïve naı̈ve 🚀🚀🚀 rocket🚀launch",
    "tab\tseparated\nnew line, under_score snake_case __init__ 100% a%b",
    "",
    "   ",
    "the the the THE theme other breathe",
    "You can not go. you can now see; thank-you canopy: you cannot, you  can\tno more. can no",  # phrases of common words
    "the first day, the first days; the firstday the  first. Day. breathe first daylight (the first) day",
    "I like only you. i like onlyness; alike only. i, like only: likely only",
    "can you no; no can you. first the day, day first the. only like i",  # the same words, other orders
    "0 \u212a is cold; the \u212aELVIN scale, KELVIN, kelvin. ik",  # the Kelvin sign lowers to ASCII 'k'
    "İK ik",
]

ADVERSARIAL = [
    ["aa"], ["aaa"], ["a"], ["a.a"], ["a.a.a"], ["aa a"], ["a a"], ["aa-aa"], ["-"], ["."], [" "],
    ["a nest of"], ["A Nest Of"], ["nest of"], ["t of"], ["est"], ["nest-of-nests"], [", a"], ["f v"],
    ["U.S."], ["u.s"], ["s."], [".s"], ["U.S.S.R."], ["us"],
    ["O'Brien"], ["o’brien"], ["'o'"], ["'"], ["n m"],
    ["İstanbul"], ["i̇"], ["i"], ["ı"], ["straße"], ["strasse"], ["ss"], ["ﬁ"], ["fi"],
    ["σ"], ["ς"], ["οδος"], ["σοφος"],
    ["mother"], ["Mother's"], ["mothers"], ["other"], ["her"], ["r's"], ["'s"],
    ["1990"], ["990"], ["½"], ["2½"], ["²"], ["x²y"], ["naïve"], ["ı̈"], ["🚀"], ["🚀🚀"], ["t🚀l"],
    ["\t"], ["tab\tsep"], ["_"], ["under_score"], ["__"], ["init"], ["%"], ["a%b"], ["100%"],
    ["the"], ["the the"], ["e t"], ["the", "the"], ["he", "the", "e"],
    ["vipers;"], ["; a"], ["nest-of-nests,"], ["u.s.a. and"], ["forces;"], ["(a"], ['"'], ["o'brien:"], [": 'o'"],
    ["ssr."], ["t,"], [",", ";"], ["? "], ["%b"], ["snake_case __init__"], ["_case"],
    # Phrases of common words, narrowed by adjacent word pairs: pairs across separators, partial
    # first and last words, short edges (no pair key), repeated and overlapping words.
    ["you can no"], ["You Can Not"], ["can no"], ["u can no"], ["you can n"], ["thank-you can"], ["you, can"],
    ["can\tno"], ["can  no"], ["you  can\tno more"], ["can no more"], ["no can"], ["can you no"],
    ["the first day"], ["the first"], ["first day"], ["he first da"], ["e first d"], ["first. day"], ["first  day"],
    ["first daylight"], ["the firstday"], ["(the first) day"], ["the first)"], ["first the"], ["day first the"],
    ["i like only"], ["like only"], ["e onl"], ["i, like only"], ["ike only"], ["likely only"], ["only like i"],
    ["the the"], ["the the the"], ["he the t"], ["the the the the"], ["e the"], ["the the", "the first day"],
    ["kelvin"], ["0 k"], ["\u212a"], ["the k"], ["i̇k"], ["ik"], ["k is", "kelvin"],
]


@pytest.fixture(scope="module")
def wordy_index(tmp_path_factory):
    docs = [Doc(str(i), f"T{i}", [[t]]) for i, t in enumerate(WORDY_TEXTS)]
    return make_index(tmp_path_factory.mktemp("wordy") / "index", docs)


@pytest.mark.parametrize("keywords", ADVERSARIAL, ids=lambda k: repr(k)[:40])
def test_word_postings_match_the_reference_on_adversarial_keywords(wordy_index, keywords):
    """Keywords inside words, across word boundaries and punctuation, overlapping runs, case and
    Unicode lowering: counted from the word postings (or their candidates' text) exactly as the
    definition counts them."""
    store = ChunkStore(open_index(wordy_index.path))
    expected = reference.keyword_scores(wordy_index.chunk_texts, keywords, 20)
    assert store.keyword_top(keywords, 20) == expected
    assert store.keyword_top(keywords, 20, narrow=False) == expected


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_substring_of_the_text_counts_as_the_reference_does(wordy_index, data):
    """Any piece of any chunk's text, and pieces of it in other case, as a keyword."""
    store = ChunkStore(open_index(wordy_index.path))
    texts = [t for t in wordy_index.chunk_texts if t.strip()]
    t = data.draw(st.sampled_from(texts))
    a = data.draw(st.integers(0, len(t) - 1))
    b = data.draw(st.integers(a + 1, min(len(t), a + 12)))
    keyword = data.draw(st.sampled_from([t[a:b], t[a:b].upper(), t[a:b].lower()]))
    assert store.keyword_top([keyword], 20) == reference.keyword_scores(wordy_index.chunk_texts, [keyword], 20)


def test_a_keyword_without_whitespace_reads_no_text(wordy_index, monkeypatch):
    """'mother' and "mother's" are counted from the words alone (grandmother, stepmother's, mothers
    included); 'a nest of' only on the chunks holding the whole word 'nest'."""
    store = ChunkStore(open_index(wordy_index.path))
    (part,) = [p for p in store.parts if p.num_chunks]
    read: list[np.ndarray] = []
    real = part.keyword_scores
    monkeypatch.setattr(part, "keyword_scores", lambda rows, terms: read.append(rows) or real(rows, terms))
    rows, counts, n_read = part.keyword_counts("mother")
    assert (rows.tolist(), counts.tolist(), n_read, read) == ([5], [5], 0, [])
    rows, counts, n_read = part.keyword_counts("mother's")
    assert (rows.tolist(), counts.tolist(), n_read, read) == ([5], [1], 0, [])
    rows, counts, n_read = part.keyword_counts("a nest of")
    assert (rows.tolist(), counts.tolist(), n_read) == ([1], [1], 1)  # "honest nest of" is not "a nest of"
    assert part.candidate_rows(["a nest of"]).tolist() == [1]  # the whole word "nest"


def test_only_the_listed_characters_lower_to_ascii():
    """An ASCII keyword is counted on text with only its ASCII letters lowered; that is exact for
    every row but those holding a character whose Python lowercase holds ASCII."""
    found = [c for c in map(chr, range(128, 0x110000)) if any(x.isascii() for x in c.lower())]
    assert tuple(found) == part_cache.LOWER_TO_ASCII


def test_split_keyword_conditions():
    assert split_keyword("mother") == (True, [])
    assert split_keyword("o'brien") == (True, [])  # one word: str.split() does not split it
    assert split_keyword("u.s.") == (True, [])
    assert split_keyword("a nest of") == (False, [("suffix", "a"), ("whole", "nest"), ("prefix", "of")])
    assert split_keyword(" foo\t") == (False, [("whole", "foo")])
    assert split_keyword("father-in-law") == (True, [])
    assert split_keyword("paris, texas") == (False, [("suffix", "paris"), ("prefix", "texas")])  # "," separates words
    assert split_keyword("(born") == (False, [("prefix", "born")])
    assert split_keyword(" \t ") == (False, [])  # separators only: every chunk is counted


def test_counts_of_one_take_no_nibble_and_every_count_reads_back(tmp_path):
    """Counts 1 to 40 over 500 chunks and three words: which postings count more than one is a bit
    each, their nibbles found by the bits set before (words_repeated*.npy), 16 or more in words_big."""
    rng = np.random.default_rng(3)
    counts = {w: rng.choice([1, 1, 1, 1, 2, 3, 15, 16, 17, 40], size=500) for w in ("alpha", "beta", "gamma")}
    present = {w: rng.random(500) < 0.7 for w in counts}
    texts = [" ".join(f"{w} " * int(counts[w][i]) for w in counts if present[w][i]) for i in range(500)]
    writer = WordPostingsWriter()
    writer.add(texts[:250], 0)
    writer.add(texts[250:], 250)
    writer.write(tmp_path)
    words = WordPostings(tmp_path, num_chunks=500)
    for w in counts:
        rows, got = words.keyword_counts(w)
        assert rows.tolist() == np.flatnonzero(present[w]).tolist()
        assert got.tolist() == counts[w][present[w]].tolist()
    postings = sum(int(p.sum()) for p in present.values())
    assert np.load(tmp_path / "words_counts.npy").size == -(-sum(int((counts[w][present[w]] > 1).sum()) for w in counts) // 2) < postings / 2


def test_words_never_cross_chunk_boundaries_and_counts_are_exact(tmp_path):
    writer = WordPostingsWriter()
    writer.add(["ab", "cd ab", "xyz " * 300], 0)
    writer.add(["ab ab", "father's ab. (ab"], 3)  # "(ab" is the word "ab": "(" separates
    meta = writer.write(tmp_path)
    assert meta["vocabulary"] == 5 and meta["word_postings"] == 8
    words = WordPostings(tmp_path, num_chunks=5)
    assert [r.tolist() for r in words.keyword_counts("ab")] == [[0, 1, 3, 4], [1, 1, 2, 2]]
    assert [r.tolist() for r in words.keyword_counts("xyz")] == [[2], [300]]  # past the nibble: words_big.npy
    assert 300 > ESCAPE and words.keyword_counts("bcd")[0].tolist() == []  # "ab" and "cd" are two words
    assert [r.tolist() for r in words.keyword_counts("'s")] == [[4], [1]]
    assert words.candidates([("suffix", "b"), ("prefix", "cd")]).tolist() == [1]  # both conditions
    assert words.candidates([("whole", "ab.")]).tolist() == [4]  # not "ab"
    assert words.candidates([("prefix", "a")]).tolist() == [0, 1, 3, 4]
    assert words.candidates([("whole", "c")]).tolist() == []


def test_adjacent_word_pairs_narrow_a_phrase_to_the_chunks_holding_its_pairs(tmp_path):
    """Chunks holding every word of 'you can no' but never 'can' right before a word starting
    with 'no' (or a word ending in 'you' right before 'can') are not candidates."""
    texts = ["you can no more", "no, you can't; can you", "can you now", "you, can; not", "thank-you can nothing", "can no"]
    words = postings(tmp_path, texts)
    _, conditions = split_keyword("you can no")
    assert len(pair_edges(conditions)) == 2
    assert words.candidates(conditions).tolist() == [0, 3, 4]  # "you, can; not": other separators, the same pairs (counted on the text)
    assert words.candidates(split_keyword("u can no")[1]).tolist() == [0, 3, 4, 5]  # "u": too short to fix a pair key
    assert len(pair_edges(split_keyword("u can no")[1])) == 1 and pair_edges(split_keyword("a no")[1]) == []
    assert words.with_pairs(None, split_keyword("can you")[1]).tolist() == [1, 2]


def test_a_condition_in_nearly_every_chunk_is_not_gathered(tmp_path, monkeypatch):
    """The prefix 'a' is in every chunk, so gathering its postings would remove no candidate; a
    word in half of the chunks ('with') is gathered. The candidates stay a superset either way."""
    texts = [f"an apple {'with' if i % 2 else 'without'} {'zebra' if i % 4 == 1 else 'horse'} a{i}" for i in range(200)]
    words = postings(tmp_path, texts)
    gathered = []
    real = words._within
    monkeypatch.setattr(words, "_within", lambda rows, ids: gathered.append(len(ids)) or real(rows, ids))
    rows = words.candidates([("whole", "with"), ("prefix", "a")])  # ' with a'
    assert gathered == [] and rows.tolist() == list(range(1, 200, 2))
    rows = words.candidates([("whole", "with"), ("whole", "zebra"), ("prefix", "a")])  # " with zebra a"
    assert gathered == [1] and rows.tolist() == list(range(1, 200, 4))
    scanned = []
    real_scan = words.matching_words
    monkeypatch.setattr(words, "matching_words", lambda needle, limit=None: scanned.append(needle) or real_scan(needle, limit))
    rows = words.candidates([("suffix", "apple"), ("prefix", "with")])  # 'apple with': the word 'apple' alone is in every chunk
    assert scanned == [] and rows.tolist() == list(range(200))
    rows = words.candidates([("suffix", "ebra"), ("prefix", "a")])  # 'ebra a': no word 'ebra', so the words are scanned
    assert scanned == [b"ebra\n"] and rows.tolist() == list(range(1, 200, 4))


def test_block_signatures_skip_blocks_and_keep_every_word(tmp_path):
    """Words are looked for only in blocks whose signature holds all of a keyword's 3-byte hashes;
    every word containing it is still found (a superset), however many blocks there are."""
    vocab = [f"w{i:05d}x" for i in range(5000)] + ["director", "codirectors", "directory."]
    words = postings(tmp_path, [" ".join(vocab[i : i + 50]) for i in range(0, len(vocab), 50)])
    assert len(words.blocks) == -(-len(vocab) // words_module.BLOCK_WORDS)
    spans = words._spans(b"director")
    assert sum(b - a for a, b in spans) < len(words._vocab) / 4  # most blocks skipped
    ids, per_word = words.matching_words(b"director")
    assert sorted(words._word(i).decode() for i in ids.tolist()) == ["codirectors", "director", "directory."]
    assert words.keyword_counts("w0421")[0].tolist() == [84]  # w04210x .. w04219x, all in chunk 84
    assert words.keyword_counts("w0421")[1].tolist() == [10]


@pytest.mark.parametrize("rows", [300, 70_000])
def test_row_gaps_of_every_width_decode(tmp_path, rows):
    """Rows are stored as gaps of 1, 2 or 4 bytes, whichever holds a word's widest gap."""
    rng = np.random.default_rng(rows)
    texts = [" ".join(w for w in ("common", "rare" if r % 997 == 5 else "", "sparse" if rng.random() < 0.01 else "", "edge" if r in (1, rows - 1) else "") if w) for r in range(rows)]
    writer = WordPostingsWriter()
    for start in range(0, rows, 4096):
        writer.add(texts[start : start + 4096], start)
    writer.write(tmp_path)
    words = WordPostings(tmp_path, num_chunks=rows)
    assert sorted(set(np.diff(words.row_at) // np.diff(words.offsets))) == ([1, 2] if rows < 2**16 else [1, 2, 4])
    for w in ("common", "rare", "sparse", "edge", "r", "e"):
        expected = [r for r, t in enumerate(texts) if w in t]
        assert words.keyword_counts(w)[0].tolist() == expected, w


def test_made_up_words_score_exactly(tmp_path):
    """Text over a small alphabet (made-up words from a few syllables), where every short substring
    is in most chunks: still identical to the reference."""
    rng = np.random.default_rng(0)
    syllables = ["ka", "lo", "mi", "ta", "ru", "ne", "so", "vi"]
    vocab = ["".join(rng.choice(syllables, size=int(rng.integers(1, 5)))) for _ in range(300)]
    texts = [" ".join(rng.choice(vocab, size=30)) + "." for _ in range(60)]
    built = make_index(tmp_path / "index", [Doc(str(i), "t", [[t]]) for i, t in enumerate(texts)])
    store = ChunkStore(open_index(built.path))
    for kws in (["kalo"], ["ka lo"], ["a k"], ["mita ruso"], [vocab[7]], [vocab[3] + " " + vocab[9]], ["o."], ["vivivivi"]):
        assert store.keyword_top(kws, 20) == reference.keyword_scores(built.chunk_texts, kws, 20), kws


@pytest.mark.parametrize("reads, gap, block", [("pread", 4096, 16384), ("pread", 0, 16384), ("pread", 4096, 2), ("mmap", 4096, 16384), ("mmap", 0, 3)])
def test_candidate_texts_read_with_pread_or_in_place_score_the_same(edge_index, monkeypatch, reads, gap, block):
    monkeypatch.setattr(part_cache, "READ_GAP", gap)  # 0: a read per candidate run of adjacent rows
    monkeypatch.setattr(part_cache, "SCORE_ROWS", block)  # candidates scored a few at a time
    store = ChunkStore(open_index(edge_index.path))
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
    monkeypatch.setattr(part_cache, "READ_BATCH", 2)
    store = ChunkStore(open_index(edge_index.path), cache_dir=tmp_path)
    assert any(p.table.column("text").num_chunks > 2 for p in store.parts)
    for gap in (0, 1 << 30):
        monkeypatch.setattr(part_cache, "READ_GAP", gap)
        for kws in KEYWORD_SETS:
            expected = chunk_ids_scores(edge_index, reference.keyword_scores(edge_index.chunk_texts, kws, 20))
            assert chunk_ids_scores(edge_index, store.keyword_top(kws, 20, narrow=False)) == expected, kws


def test_remembered_keyword_counts_give_the_same_top_chunks(edge_index):
    """Every keyword's counts remembered (no candidate minimum): each set asked twice, the second
    time from memory, equals the reference; a keyword given twice still counts twice."""
    store = ChunkStore(open_index(edge_index.path))
    store.keyword_counts = KeywordCounts(min_candidates=0)
    sets = KEYWORD_SETS + [["Lothair II", "lothair ii", "LOTHAIR II"]]
    for _ in range(2):
        for kws in sets:
            expected = chunk_ids_scores(edge_index, reference.keyword_scores(edge_index.chunk_texts, kws, 20))
            assert chunk_ids_scores(edge_index, store.keyword_top(kws, 20)) == expected, kws
    stats = store.keyword_counts.stats()
    assert stats["hits"] >= len({k.lower() for kws in sets for k in kws}) and stats["keywords"] > 0


def test_keyword_counts_keep_only_costly_keywords_within_the_budget():
    def vec(n):
        return np.arange(n, dtype=np.int64), np.ones(n, dtype=np.int32)

    entry = 12 * 100 + ENTRY_BYTES
    memory = KeywordCounts(budget_bytes=3 * entry, min_candidates=50, min_seconds=0.5)
    memory.put("cheap", *vec(100), candidates=49, seconds=0.4)  # counted again each time: not kept
    assert memory.get("cheap") is None
    memory.put("slow", *vec(2), candidates=3, seconds=0.6)  # few chunks, but slow to count: kept
    assert memory.get("slow") is not None and memory.bytes == 24 + ENTRY_BYTES
    memory = KeywordCounts(budget_bytes=3 * entry, min_candidates=50, min_seconds=0.5)
    for k in ("a", "b", "c"):
        memory.put(k, *vec(100), candidates=500)
    assert memory.get("a") is not None  # 'a' is now the most recently used
    memory.put("d", *vec(100), candidates=500)  # over budget: the least recently used ('b') goes
    assert memory.get("b") is None and all(memory.get(k) is not None for k in ("a", "c", "d"))
    assert memory.bytes == 3 * entry and len(memory) == 3
    memory.put("huge", *vec(1000), candidates=5000)  # larger than the whole budget: not kept, nothing evicted
    assert memory.get("huge") is None and len(memory) == 3
    ords, counts = memory.get("a")
    with pytest.raises(ValueError):
        counts[0] = 7  # shared between calls: read-only
