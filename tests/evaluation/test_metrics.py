"""Answer metrics (SQuAD-style normalisation, several gold answers) and evidence recall."""

from __future__ import annotations

import pytest

from arag.agent.episode import Episode, ToolCallRecord
from arag.evaluation.evidence import chunks_seen_and_read, evidence_recall
from arag.evaluation.metrics import contain_acc, contain_acc_token, exact_match, f1, normalize_answer, score_answer


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The Eiffel Tower!", "eiffel tower"),
        ("  a  Tale of Two   Cities. ", "tale of two cities"),
        ("U.S.A.", "usa"),
        ("an apple, the pear", "apple pear"),
        ("Theatre", "theatre"),  # "the" only as a whole word
        ("20 March, 851", "20 march 851"),
        ("", ""),
    ],
)
def test_normalize_answer_follows_squad(text, expected):
    assert normalize_answer(text) == expected


def test_exact_match_takes_the_best_gold():
    assert exact_match("the Phoolwari", ["Aas Ka Panchhi", "Phoolwari"]) == 1.0
    assert exact_match("Phoolwari (1946)", ["Phoolwari"]) == 0.0
    assert exact_match(None, ["x"]) == 0.0 and exact_match("", ["x"]) == 0.0


def test_f1_is_token_overlap_with_the_best_gold():
    assert f1("20 March 851", ["851"]) == pytest.approx(0.5)  # precision 1/3, recall 1
    assert f1("20 March 851", ["March 851", "1 April 900"]) == pytest.approx(0.8)
    assert f1("Ermengarde of Tours", ["Ermengarde"]) == pytest.approx(0.5)
    assert f1("no idea", ["Paris"]) == 0.0
    # Repeated tokens count once per occurrence (bag of tokens).
    assert f1("paris paris", ["paris"]) == pytest.approx(2 * 0.5 * 1 / 1.5)


def test_contain_acc_is_the_paper_codes_substring_rule():
    """Normalised gold a substring of the normalised prediction, raw characters (the paper's code)."""
    assert contain_acc("She died on 20 March 851.", ["20 March 851"]) == 1.0
    assert contain_acc("It was Phoolwari, released in 1946", ["Aas Ka Panchhi", "Phoolwari"]) == 1.0
    assert contain_acc("The Answer is: YES!", ["yes"]) == 1.0  # case, punctuation and articles normalised away
    assert contain_acc("not known", ["no"]) == 1.0  # a raw substring counts, as in the paper's code
    assert contain_acc("in 19460", ["1946"]) == 1.0
    assert contain_acc("Ermengarde", ["Ermengarde of Tours"]) == 0.0  # the gold must be inside the prediction
    assert contain_acc(None, ["x"]) == 0.0 and contain_acc("", ["x"]) == 0.0


def test_contain_acc_token_needs_whole_tokens():
    assert contain_acc_token("She died on 20 March 851.", ["20 March 851"]) == 1.0
    assert contain_acc_token("not known", ["no"]) == 0.0
    assert contain_acc_token("in 19460", ["1946"]) == 0.0
    assert contain_acc_token("The answer is yes.", ["Yes"]) == 1.0


def test_recall_at_k_over_passages_in_retrieval_order():
    from arag.evaluation.evidence import recall_at_k

    ranked = ["A", ["B", "C"], "D", None, "E"]  # the second chunk covers two documents (packed chunking)
    # Passages in rank order: A, B, C, D, E — the two-document chunk takes two ranks.
    assert recall_at_k(ranked, ["C", "E"], 2) == 0.0 and recall_at_k(ranked, ["B", "E"], 2) == 0.5
    assert recall_at_k(ranked, ["C", "E"], 3) == 0.5 and recall_at_k(ranked, ["C", "E"], 5) == 1.0
    assert recall_at_k(ranked, ["A"], 1) == 1.0 and recall_at_k(ranked, ["D"], 2) == 0.0
    assert recall_at_k(["A\nB"], ["B"], 1) == 0.0 and recall_at_k(["A\nB"], ["B"], 2) == 1.0  # a packed chunk's title field: titles joined by newlines
    # A passage seen again (a second chunk of it, an overlapping window) takes no second rank.
    assert recall_at_k(["A", "A", "A\nB"], ["B"], 2) == 1.0
    assert recall_at_k(ranked, [], 2) is None
    with pytest.raises(ValueError):
        recall_at_k(ranked, ["A"], 0)


def test_recall_at_k_on_packed_windows_equals_passage_recall_by_hand():
    """A2RAG's Recall@K is over passages (its Sec. IV-A): windows covering several passages are
    mapped to them in rank order, so a packed index gives the per-passage figure."""
    from arag.evaluation.evidence import ranked_passages

    ep = Episode(question="q", method="m", protocol="json", backend={})
    ep.tool_calls = [ToolCallRecord(1, "graph_retrieval", {}, "", chunk_ids=["0:4", "0:5"]), ToolCallRecord(2, "graph_retrieval", {}, "", chunk_ids=["0:9", "0:4"])]
    windows = {"0:4": "P1\nP2\nP3", "0:5": "P3\nP4", "0:9": "P7\nP8"}  # 0:5 overlaps 0:4 on P3
    assert ranked_passages([windows[c] for c in ("0:4", "0:5", "0:9")]) == ["P1", "P2", "P3", "P4", "P7", "P8"]
    r = evidence_recall(ep, ["P2", "P4", "P8"], lambda ids: {i: windows[i] for i in ids})
    # By hand: first 2 passages P1, P2 hold 1 of 3; first 5 (P1..P4, P7) hold P2 and P4.
    assert r.at_k == {2: 1 / 3, 5: 2 / 3}
    # Window-level counting would have given 2/3 at k=2 (windows 0:4 and 0:5): it is not what is reported.
    assert r.at_k[2] != 2 / 3


def test_a_gold_that_normalises_to_nothing_still_matches():
    assert exact_match("The", ["The"]) == 1.0 and contain_acc("the", ["The"]) == 1.0


def test_score_answer_bundles_the_three():
    s = score_answer("20 March 851", ["20 March 851", "851"])
    assert (s.contain_acc, s.exact_match, s.f1) == (1.0, 1.0, 1.0)


def _episode(calls, full_text=False):
    ep = Episode(question="q", method="m", protocol="json", backend={}, agent={"method": {"full_text": full_text}})
    ep.tool_calls = [ToolCallRecord(step=i, name=n, arguments={}, text="", chunk_ids=ids) for i, (n, ids) in enumerate(calls)]
    return ep


TITLES = {"1#0": "Lothair II", "1#1": "Lothair II", "2#0": "Ermengarde of Tours", "3#0": "Phoolwari"}


def lookup(ids):
    return {c: TITLES[c] for c in ids if c in TITLES}


def test_evidence_recall_separates_seen_from_read():
    ep = _episode([("keyword_search", ["1#0", "3#0"]), ("chunk_read", ["2#0"])])
    seen, read = chunks_seen_and_read(ep)
    assert seen == {"1#0", "3#0", "2#0"} and read == {"2#0"}
    r = evidence_recall(ep, ["Lothair II", "Ermengarde of Tours"], lookup)
    assert (r.n_supporting, r.found_seen, r.found_read) == (2, 2, 1)


def test_whole_chunk_tools_and_full_text_methods_count_as_read():
    assert chunks_seen_and_read(_episode([("naive_embedding_search", ["1#0"])]))[1] == {"1#0"}
    assert chunks_seen_and_read(_episode([("semantic_search", ["1#0"])]))[1] == set()
    assert chunks_seen_and_read(_episode([("semantic_search", ["1#0"])], full_text=True))[1] == {"1#0"}


def test_evidence_recall_without_supporting_titles_is_unknown():
    r = evidence_recall(_episode([("chunk_read", ["1#0"])]), [], lookup)
    assert r.n_supporting == 0 and r.at_k == {2: None, 5: None}
    r = evidence_recall(_episode([]), ["Lothair II"], None)  # direct: nothing read
    assert (r.n_supporting, r.found_seen, r.found_read) == (1, 0, 0)
