"""Our half of benchmarks/official_side_by_side.py, in tests/support/official_compare.py: the
per-call and per-question comparison tables on small fake records (the chunk export:
tests/index/test_index_export.py; the tool-call proxy: tests/evaluation/test_tool_call_proxy.py). The authors' code
itself is never run here."""

from __future__ import annotations

from tests.support.official_compare import compare_call, tiktoken_cache, tools_summary


def test_tiktoken_cache_refuses_a_wrong_file(tmp_path):
    import pytest

    from tests.support.official_compare import SetupError

    bad = tmp_path / "o200k_base.tiktoken"
    bad.write_bytes(b"not it")
    with pytest.raises(SetupError, match="SHA-256"):
        tiktoken_cache(bad, tmp_path / "cache")


def _search(ids, scores, snippets, tokens, tokens_o200k=None):
    return {"ids": ids, "scores": scores, "snippets": snippets, "texts": {}, "tokens": tokens, "tokens_o200k": tokens_o200k}


def test_compare_keyword_call_same_ids_different_snippets():
    call = {"key": "q1:keyword", "qid": "q1", "tool": "keyword_search", "args": {"keywords": ["Lothair II"]}}
    six = [f"Lothair II fact {i}." for i in range(6)]
    ours = _search(["a", "b", "c"], [20.0, 10.0, 5.0], [["Lothair II was king.", "Lothair II died in 869!"], ["Lothair II married"], six], 12, 11)
    theirs = {"ids": ["a", "b", "c"], "scores": None, "snippets": [["Lothair II was king", "Lothair II died in 869"], ["Lothair II married her"], [s.rstrip(".") for s in six[:5]]], "log": {"retrieved_tokens": 13}}
    row = compare_call(call, ours, theirs)
    assert row["same_order"] and row["overlap"] == 3
    assert row["same_snippets"] == 0
    assert row["same_but_punctuation"] == 1  # a: their splitter drops the end punctuation; b: cut differently
    assert row["same_with_cap_5"] == 2  # c: they show a chunk's first 5 matching sentences
    assert (row["sentences_ours"], row["sentences_theirs"]) == (9, 8)
    assert (row["tokens_ours_recorded"], row["tokens_ours_o200k"], row["tokens_theirs_o200k"]) == (12, 11, 13)
    assert "max_score_diff" not in row  # their keyword text shows no score


def test_compare_semantic_call_order_and_score_difference():
    call = {"key": "q1:semantic", "qid": "q1", "tool": "semantic_search", "args": {"query": "who"}}
    ours = _search(["a", "b", "c"], [0.61234, 0.5, 0.4], [["x"], ["y"], ["z"]], 3)
    theirs = {"ids": ["a", "c", "d"], "scores": [0.612, 0.402, 0.3], "snippets": [["x"], ["z"], ["w"]], "log": {"retrieved_tokens": 3}}
    row = compare_call(call, ours, theirs)
    assert not row["same_order"] and row["overlap"] == 2
    assert abs(row["max_score_diff"] - 0.002) < 1e-9  # over the shared ids a and c only
    summary = tools_summary([row])
    assert summary[0]["tool"] == "semantic_search" and summary[0]["same ids, same order"] == 0
    assert summary[0]["identical snippets"] == "2 / 2" and summary[0]["same but end punctuation"] == "2 / 2"


def test_compare_chunk_read_texts():
    call = {"key": "q1:read", "qid": "q1", "tool": "chunk_read", "args": {"chunk_ids": ["a", "b"]}}
    ours = {"ids": ["a", "b"], "scores": None, "snippets": [], "texts": {"a": "Text A.", "b": "Text B."}, "tokens": 6, "tokens_o200k": 6}
    theirs = {"ids": ["a", "b"], "scores": None, "snippets": [], "texts": {"a": "Text A.\n", "b": "Other."}, "log": {"retrieved_tokens": 5}}
    row = compare_call(call, ours, theirs)
    assert (row["same_text"], row["compared_texts"]) == (1, 2)
    assert tools_summary([row])[0]["identical texts"] == "1 / 2"


def test_every_choice_the_differential_run_names_has_a_protocol_card_row():
    """A kind of difference from the authors' code that we keep by choice is printed on every run's
    card (arag.evaluation.protocol_papers.KINDS maps card settings to the kinds); a defect is fixed instead."""
    from arag.evaluation import protocol_papers as P
    from tests.support.official_parity import CHOICE, FIXED, KINDS

    chosen = {name for name, kind in KINDS.items() if kind.resolution == CHOICE}
    assert {"tool_calls_per_step", "sentence_splitter", "request_parameters"} <= chosen  # the table is the one the run classifies by
    assert not chosen - set(P.KINDS.values()), chosen - set(P.KINDS.values())
    assert all(kind.resolution in (CHOICE, FIXED) for kind in KINDS.values())
