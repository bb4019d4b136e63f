"""The A-RAG tools' results in the authors' shape: keyword_search's 5 sentences per chunk, the
official header lines, titles only on request, and retrieved tokens counted with o200k_base as the
authors' tools count them (src/arag/tools/{keyword_search,semantic_search,read_chunk}.py)."""

from __future__ import annotations

import re

import pytest

from arag.agent.loop import chunk_ids_shown
from arag.index.tokens import RETRIEVED_TOKENS_TOKENIZER, TOKENIZER_NAME, count_retrieved_tokens, count_tokens, encoding, retrieved_encoding
from arag.tools import ToolContext
from arag.tools.base import SNIPPETS_PER_CHUNK, ResultFormat
from arag.tools.render import chunk_header_end
from tests.support.tiny_index import Doc, fake_encode, make_index

# One chunk with 8 sentences that name the keyword, between sentences that do not.
MANY = [f"Sentence {i} names the zebra." for i in range(8)]
CAP_DOCS = [
    Doc("z", "Zebra facts", [["No match here.", *MANY[:4], "Nothing again.", *MANY[4:]]]),
    Doc("h", "Horse facts", [["The horse ran.", "A zebra watched."]]),
]


@pytest.fixture(scope="module")
def cap_ctx(tmp_path_factory):
    built = make_index(tmp_path_factory.mktemp("cap") / "index", CAP_DOCS)
    with ToolContext(built.path, encoder=fake_encode) as ctx:
        yield ctx


def test_keyword_search_keeps_five_matching_sentences_per_chunk(cap_ctx):
    """The official tool keeps `matched_sentences[:5]`: the first five, in text order."""
    assert SNIPPETS_PER_CHUNK == 5
    res = cap_ctx.call("keyword_search", {"keywords": ["zebra"]})
    assert res.results[0].chunk_id == "z#0" and res.results[0].snippets == MANY[:5]
    assert res.results[1].snippets == ["A zebra watched."]
    assert res.retrieved_tokens == count_retrieved_tokens("\n".join(MANY[:5] + ["A zebra watched."]))


@pytest.mark.parametrize("cap", [None, 0])
def test_the_cap_off_shows_every_matching_sentence(cap_ctx, cap):
    res = cap_ctx.call("keyword_search", {"keywords": ["zebra"]}, result_format=ResultFormat(snippets_per_chunk=cap))
    assert res.results[0].snippets == MANY


def test_another_cap(cap_ctx):
    res = cap_ctx.call("keyword_search", {"keywords": ["zebra"]}, result_format=ResultFormat(snippets_per_chunk=2))
    assert res.results[0].snippets == MANY[:2] and "Sentence 2" not in res.text


@pytest.mark.parametrize("bad", [-1, 2.5, True, "5"])
def test_a_bad_cap_is_refused(bad):
    with pytest.raises(ValueError, match="snippets_per_chunk"):
        ResultFormat(snippets_per_chunk=bad)


def test_keyword_result_text_is_the_official_shape(cap_ctx):
    res = cap_ctx.call("keyword_search", {"keywords": ["zebra"]})
    first = "Chunk ID: z#0, Matched keywords in chunk: ... " + " ... ".join(MANY[:5]) + " ..."
    assert res.text == first + "\n\nChunk ID: h#0, Matched keywords in chunk: ... A zebra watched. ..."
    assert "Zebra facts" not in res.text and "score" not in res.text.lower()


def test_semantic_result_text_is_the_official_shape(cap_ctx):
    res = cap_ctx.call("semantic_search", {"query": "the zebra", "top_k": 5})  # 15 sentences: all 12, both chunks
    blocks = res.text.split("\n\n")
    assert len(blocks) == len(res.results) == 2
    for block, hit in zip(blocks, res.results):
        assert block == f"Chunk ID: {hit.chunk_id} (Similarity: {hit.score:.3f})\nMatched: ... " + " ... ".join(hit.snippets) + " ..."
    assert res.retrieved_tokens == count_retrieved_tokens("\n".join(s for h in res.results for s in h.snippets))


def test_no_result_texts_are_the_official_ones(cap_ctx):
    assert cap_ctx.call("keyword_search", {"keywords": ["qqqq", "xx"]}).text == "No results found for keywords: ['qqqq', 'xx']"


def test_titles_appear_only_with_result_titles(cap_ctx):
    plain = [cap_ctx.call(tool, args) for tool, args in TITLED_CALLS]
    titled = [cap_ctx.call(tool, args, result_format=ResultFormat(result_titles=True)) for tool, args in TITLED_CALLS]
    for p, t in zip(plain, titled):
        assert "Zebra facts" not in p.text and "Horse facts" not in p.text
        assert "Zebra facts" in t.text, t.tool
        assert p.results == t.results and p.retrieved_tokens == t.retrieved_tokens  # the same hits, counted the same
    assert titled[0].text.startswith("Chunk ID: z#0 (Title: Zebra facts), Matched keywords in chunk: ...")
    assert re.match(r"Chunk ID: \S+ \(Title: [^)]+\) \(Similarity: \d\.\d{3}\)\nMatched: \.\.\. ", titled[1].text)
    assert titled[2].text.startswith("[chunk_id: z#0 | title: Zebra facts | previous:")


TITLED_CALLS = [
    ("keyword_search", {"keywords": ["zebra"]}),
    ("semantic_search", {"query": "zebra facts", "top_k": 2}),
    ("chunk_read", {"chunk_ids": ["z#0"]}),
    ("naive_embedding_search", {"query": "zebra facts", "top_k": 2}),
]


def test_retrieved_tokens_are_counted_with_o200k():
    """The authors count with tiktoken.encoding_for_model("gpt-4o"): o200k_base, not cl100k_base."""
    assert RETRIEVED_TOKENS_TOKENIZER == "o200k_base" and TOKENIZER_NAME == "cl100k_base"
    assert retrieved_encoding().encode_ordinary("hello world") == [24912, 2375]  # o200k_base's ids (cl100k_base: [15339, 1917])
    assert encoding().encode_ordinary("hello world") == [15339, 1917]
    text = "日本語のテキスト 123456 Ærøskøbing"
    assert count_retrieved_tokens(text) != count_tokens(text)


def test_o200k_counts_equal_an_independent_implementation():
    """bpe-openai's own Rust tokenizer (GitHub's bpe crate) agrees with the tiktoken-run o200k_base."""
    bpe_openai = pytest.importorskip("bpe_openai")
    other = bpe_openai.get_encoding("o200k_base")
    for text in ["Lothair II (835 – 8 August 869) was the king of Lotharingia.", "İstanbul ΣΟΦΟΣ 🚀🚀 Straße\n\n  x", "a" * 300]:
        assert count_retrieved_tokens(text) == len(other.encode(text)), text


def test_chunk_read_counts_each_new_chunk_in_o200k(cap_ctx):
    res = cap_ctx.call("chunk_read", {"chunk_ids": ["z#0", "h#0"]})
    assert res.retrieved_tokens == sum(count_retrieved_tokens(h.snippets[0]) for h in res.results)


def test_a_cut_result_shows_the_chunks_whose_header_id_was_kept():
    """The agent loop cuts an oversized result: a chunk counts as shown only if its header's id survived."""
    text = "Chunk ID: 0:1, Matched keywords in chunk: ... a ...\n\nChunk ID: 0:12 (Similarity: 0.500)\nMatched: ... b ..."
    assert chunk_header_end(text, "0:1") == len("Chunk ID: 0:1,") and chunk_header_end(text, "0:9") == -1
    second = text.index("Chunk ID: 0:12")
    assert chunk_ids_shown(["0:1", "0:12"], text, second + len("Chunk ID: 0:1")) == ["0:1"]  # "0:1" of "0:12" is not its id
    assert chunk_ids_shown(["0:1", "0:12"], text, second + len("Chunk ID: 0:12 ")) == ["0:1", "0:12"]
    assert chunk_ids_shown(["doc-line"], text, 5) == ["doc-line"]  # no header: a document tool's id stays
