"""Question files: the benchmark format, and bad input named by file and line."""

from __future__ import annotations

import pytest

from arag.evaluation.questions import QuestionFileError, load_questions
from tests.conftest import write_jsonl
from tests.support.paths import TWOWIKI_QUESTIONS

GOOD = {"id": "a", "question": "Who?", "answers": ["X"], "supporting_titles": ["T"], "type": "extra keys are fine"}


def test_loads_the_shared_benchmark_format(tmp_path):
    path = write_jsonl(tmp_path / "2wiki" / "questions.jsonl", [GOOD, {"id": 7, "question": "When?", "answers": "1990"}])
    qs = load_questions(path)
    assert [q.id for q in qs.questions] == ["a", "7"]
    assert qs.questions[0].answers == ("X",) and qs.questions[0].supporting_titles == ("T",)
    assert qs.questions[1].answers == ("1990",) and qs.questions[1].supporting_titles == ()
    assert qs.name == "2wiki" and len(qs.sha256) == 64 and qs.rejects == []


def test_the_real_2wiki_questions_load():
    path = TWOWIKI_QUESTIONS
    if not path.exists():
        pytest.skip(f"benchmark data not present at {path} (set ARAG_DATA_DIR)")
    qs = load_questions(path)
    assert len(qs.questions) == 800 and qs.questions[0].answers == ("20 March 851",)


def test_missing_file_names_the_path(tmp_path):
    with pytest.raises(QuestionFileError, match="questions file not found: .*nope.jsonl"):
        load_questions(tmp_path / "nope.jsonl")
    with pytest.raises(QuestionFileError, match="is a directory"):
        load_questions(tmp_path)


@pytest.mark.parametrize(
    "line, reason",
    [
        (b'{"id": "b", "question": "Q", "answers": ["A"]', "not valid JSON"),
        (b'["a list"]', "expected a JSON object"),
        (b'{"question": "Q", "answers": ["A"]}', "missing or empty 'id'"),
        (b'{"id": "b", "question": "  ", "answers": ["A"]}', "missing or empty 'question'"),
        (b'{"id": "b", "question": "Q", "answers": []}', "'answers' must be a non-empty list"),
        (b'{"id": "b", "question": "Q", "answers": [""]}', "'answers' holds only empty strings"),
        (b'{"id": "b", "question": "Q", "answers": ["A"], "supporting_titles": "T"}', "'supporting_titles' must be a list"),
        (b'{"id": "a", "question": "Q", "answers": ["A"]}', "duplicate question id 'a' \\(first on line 1\\)"),
        (b'{"id": "b", "question": "Q\xff", "answers": ["A"]}', "not valid UTF-8"),
    ],
)
def test_a_bad_line_stops_with_file_and_line(tmp_path, line, reason):
    path = write_jsonl(tmp_path / "q.jsonl", [GOOD, b"", line])
    with pytest.raises(QuestionFileError, match=f"q.jsonl:3: {reason}"):
        load_questions(path)


def test_skip_mode_counts_and_keeps_every_bad_line(tmp_path):
    path = write_jsonl(tmp_path / "q.jsonl", [GOOD, b"{broken", {"id": "c", "question": "Q", "answers": ["A"]}, {"id": "a", "question": "Q", "answers": ["A"]}])
    qs = load_questions(path, on_bad_line="skip")
    assert [q.id for q in qs.questions] == ["a", "c"]
    assert [(r.line, r.reason.split(" (")[0]) for r in qs.rejects] == [(2, "not valid JSON"), (4, "duplicate question id 'a'")]
    assert qs.rejects[0].describe(path) == f"{path}:2: {qs.rejects[0].reason}"


def test_a_file_without_questions_is_an_error(tmp_path):
    with pytest.raises(QuestionFileError, match="no questions in"):
        load_questions(write_jsonl(tmp_path / "q.jsonl", [b"", b"  "]))
    with pytest.raises(QuestionFileError, match="1 bad lines, first: .*q2.jsonl:1"):
        load_questions(write_jsonl(tmp_path / "q2.jsonl", [b"nope"]), on_bad_line="skip")
    with pytest.raises(ValueError, match="on_bad_line"):
        load_questions(tmp_path / "q.jsonl", on_bad_line="ignore")
