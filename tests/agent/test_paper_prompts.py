"""The paper's working rules (A-RAG appendix prompts), each carried by our own prompts or tool
descriptions: one test per rule, so a prompt edit that drops one fails by name."""

from __future__ import annotations

import re

import pytest

from arag.methods import load_method
from arag.tools import tool_schemas

AGENTS = ["arag_full", "arag_no_keyword", "arag_no_semantic", "arag_no_chunk_read", "arag_naive"]


def seen_by_model(method: str) -> str:
    """Everything the model reads before the question: the system prompt and every tool description."""
    m = load_method(method)
    tools = tool_schemas(list(m.tools)) if m.tools else []
    return (m.system_text + "\n" + "\n".join(t["function"]["description"] + str(t["function"]["parameters"]) for t in tools)).lower()


@pytest.mark.parametrize("method", ["arag_full", "arag_no_semantic", "arag_no_chunk_read"])
def test_keywords_are_one_to_three_words(method):
    assert re.search(r"one to three words", seen_by_model(method))


@pytest.mark.parametrize("method", ["arag_full", "arag_no_keyword", "arag_no_semantic"])
def test_snippets_are_not_enough_read_before_answering(method):
    text = seen_by_model(method)
    assert "not enough to answer from" in text and re.search(r"read the chunks .{0,60}chunk_read before you answer", text, re.S)


@pytest.mark.parametrize("method", ["arag_full", "arag_no_chunk_read"])
def test_when_to_prefer_semantic_search(method):
    assert re.search(r"prefer it when you do not\s+know the exact wording", seen_by_model(method))


@pytest.mark.parametrize("method", AGENTS + ["naive_rag", "direct"])
def test_decompose_multi_hop_questions(method):
    assert re.search(r"(break the question down|chains several facts)", seen_by_model(method))


@pytest.mark.parametrize("method", AGENTS)
def test_iterate_search_read_evaluate(method):
    text = seen_by_model(method)
    assert re.search(r"iterate: search .{0,80}read .{0,80}judge whether .{0,80}settles it.{0,40}search again", text, re.S)


@pytest.mark.parametrize("method", AGENTS)
def test_one_tool_per_step_is_stated(method):
    assert "one tool per step" in seen_by_model(method)


@pytest.mark.parametrize("method", AGENTS + ["naive_rag", "direct"])
def test_answer_style_per_dataset(method):
    short = load_method(method)
    free = load_method(method, {"answer_style": "free_form"})
    assert "answer only" in short.system_text.lower() and "complete sentences" not in short.system_text
    assert "complete sentences" in free.system_text and "answer only" not in free.system_text.lower()
    if short.tools:
        assert "complete sentences" in free.final_text and "{answer_style}" not in free.final_text


def test_forced_answer_prompt_says_no_more_tools():
    final = load_method("arag_full").final_text.lower()
    assert "no more tools" in final and "gathered so far" in final


def test_unknown_answer_style_is_an_error():
    with pytest.raises(ValueError, match="answer_style"):
        load_method("arag_full", {"answer_style": "poem"})


def test_dataset_answer_styles():
    from arag.evaluation.settings import answer_style_for

    assert answer_style_for("2wikimultihopqa") == "short" and answer_style_for("graphrag-bench-novel") == "free_form"


@pytest.mark.parametrize("method", ["arag_full", "arag_naive", "arag_no_keyword", "arag_no_semantic"])
def test_chunk_read_gives_example_ids_and_they_are_the_index_s_own(method, agent_ctx):
    """Figure 8 shows chunk_read's parameter with example ids; ours are a real id of the opened index
    (tests/agent/test_chunk_ids.py checks the packed and per-document forms)."""
    m = load_method(method).for_index(agent_ctx.chunk_ids)
    chunk_read = next(t["function"] for t in m.tool_schemas() if t["function"]["name"] == "chunk_read")
    example = agent_ctx.chunk_ids.example
    assert f'for example ["{example}"]' in chunk_read["parameters"]["properties"]["chunk_ids"]["description"]
    assert f'"{example}"' in m.system_text and agent_ctx.call("chunk_read", {"chunk_ids": [example]}).error is None

