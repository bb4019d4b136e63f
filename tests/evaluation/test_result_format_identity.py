"""A run records how its tool results were shown and counted: the method's snippets_per_chunk and
result_titles (with their defaults filled in) and the retrieved-token tokenizer enter run.json's
settings and the run id, so a run with other values is another run."""

from __future__ import annotations

import pytest

from arag.evaluation.questions import load_questions
from arag.evaluation.run_config import run_settings
from arag.evaluation.run_settings import RunSettings
from arag.methods import load_method
from tests.support.scripted_evaluation import compose_evaluate


@pytest.fixture
def settings_of(eval_index, questions_file):
    question_set = load_questions(str(questions_file))
    base = [f"index.path={eval_index.path}", f"questions.path={questions_file}", "model=scripted"]
    return lambda *overrides: run_settings(compose_evaluate(*base, *overrides), question_set)


def test_the_defaults_are_recorded(settings_of):
    settings = settings_of()
    assert settings.method["snippets_per_chunk"] == 5 and settings.method["result_titles"] is False
    assert settings.retrieved_tokens_tokenizer == "o200k_base"
    identity = settings.identity()
    assert identity["method"]["snippets_per_chunk"] == 5 and identity["retrieved_tokens_tokenizer"] == "o200k_base"
    assert RunSettings.from_json(settings.to_json()).retrieved_tokens_tokenizer == "o200k_base"  # run.json's settings


@pytest.mark.parametrize("override", ["+method.snippets_per_chunk=null", "+method.snippets_per_chunk=3", "+method.result_titles=true"])
def test_another_value_is_another_run(settings_of, override):
    assert settings_of(override).run_id != settings_of().run_id


def test_naive_rag_records_them_and_a_method_without_retrieval_does_not(settings_of):
    assert settings_of("method=naive_rag").method["result_titles"] is False
    direct = settings_of("method=direct")
    assert "snippets_per_chunk" not in direct.method and direct.retrieved_tokens_tokenizer is None
    assert "retrieved_tokens_tokenizer" not in direct.identity()


def test_a_bad_value_is_one_clear_error():
    with pytest.raises(ValueError, match="method arag_full: snippets_per_chunk must be"):
        load_method("arag_full", {"snippets_per_chunk": -2})
    with pytest.raises(ValueError, match="did you mean method.snippets_per_chunk"):
        load_method("arag_full", {"snippet_per_chunk": 2})
