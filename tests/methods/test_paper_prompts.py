"""Each rule of the papers' prompts, carried by our own prompts or tool descriptions (in our words):
one test per rule, named after the figure or section that states it, so a prompt edit that drops one
fails by name. A-RAG: Figure 6 (system prompts; the authors' src/arag/agent/prompts/default.txt is
the Full one), Figures 7-8 (tool descriptions), the forced answer of the authors' agent; AgenticRAG:
appendix A.2 (system instructions for tool use) and §4 (scored citations); Direct: §4.1."""

from __future__ import annotations

import re

import pytest

from arag.methods import load_method
from arag.methods.base import ANSWER_STYLES, PROMPT_VARIANTS
from arag.tools import tool_schemas

FULL_PROMPT = ["arag_full", "arag_no_keyword", "arag_no_semantic", "arag_no_chunk_read"]  # Full's prompt, less a removed tool (§4.3)
AGENTS = FULL_PROMPT + ["arag_naive"]
AGENTICRAG = ["agenticrag", "agenticrag_no_summarize", "agenticrag_no_semantic_find", "agenticrag_single_query"]
PROMPTED = AGENTS + AGENTICRAG + ["naive_rag", "direct"]


def seen_by_model(method: str) -> str:
    """Everything the model reads before the question: the system prompt and every tool description."""
    m = load_method(method)
    tools = tool_schemas(list(m.tools)) if m.tools else []
    return (m.system_text + "\n" + "\n".join(t["function"]["description"] + str(t["function"]["parameters"]) for t in tools)).lower()


def system(method: str, **overrides) -> str:
    return " ".join(load_method(method, overrides).system_text.lower().split())


def every_text(method: str) -> str:
    m = load_method(method)
    return " ".join(" ".join(m.texts().values()).lower().split())


# ---- A-RAG, Figure 6 -----------------------------------------------------------------------------


@pytest.mark.parametrize("method", AGENTS)
def test_fig6_role_and_goal_answer_accurately_from_the_documents(method):
    text = system(method)
    assert "document collection" in text and "tools" in text and "accurate answer" in text and "relevant passages" in text


@pytest.mark.parametrize("method", AGENTS)
def test_fig6_available_tools_are_the_method_s_own(method):
    m = load_method(method)
    listed = re.findall(r"^- (\w+):", m.system_text, re.M)
    assert listed == list(m.tools)
    for gone in {"keyword_search", "semantic_search", "chunk_read", "naive_embedding_search"} - set(m.tools):
        assert gone not in m.system_text  # an ablation removes the tool from the prompt too


@pytest.mark.parametrize("method", FULL_PROMPT)
def test_fig6_full_strategy_search_read_evaluate_repeat_answer(method):
    assert re.search(r"search, read .{0,30}judge whether .{0,40}search and read again .{0,30}answer only at the end", system(method))


@pytest.mark.parametrize("method", FULL_PROMPT)
def test_fig6_full_strategy_decompose_multi_hop_questions(method):
    assert re.search(r"multi-hop question into sub-questions .{0,20}one after another", system(method))


def test_fig6_naive_strategy_retrieve_read_answer_without_decomposition():
    text = system("arag_naive")
    assert "retrieve chunks, read them, then answer" in text
    assert "multi-hop" not in text and "sub-question" not in text  # the paper's Naive A-RAG prompt has none


# Figure 6, "When Answering": the rule → what our prompts say for it.
FIG6_WHEN_ANSWERING = {
    "ground_in_retrieved_documents": r"base the answer on the documents you retrieved",
    "cite_the_supporting_chunks": r"cite the chunks that support it, by their ids",
    "clear_direct_and_backed_by_evidence": r"clear and direct, and back it with the evidence",
    "no_speculation_beyond_the_documents": r"do not speculate beyond what the documents support",
}


@pytest.mark.parametrize("method", AGENTS)
def test_one_tool_per_step_is_stated(method):
    """Our runtime's rule for A-RAG (Algorithm 1 takes one tool call per step)."""
    assert "one tool per step" in seen_by_model(method) and load_method(method).tools_per_step == 1


@pytest.mark.parametrize("method", AGENTS)
def test_fig6_default_a_rag_answer_is_not_a_bare_span(method):
    """The paper's prompt asks for a grounded, cited answer: the default texts ask for no bare span."""
    for text in load_method(method).texts().values():
        assert "no explanation" not in text and "give the answer only" not in text.lower() and "{answer_style}" not in text


def test_forced_answer_prompt_as_the_authors_agent():
    """The authors' forced answer (src/arag/agent/base.py): limit reached, no more tools, answer from
    what was gathered, put it together and respond directly."""
    final = " ".join(load_method("arag_full").final_text.lower().split())
    assert "reached the limit" in final and "no more tools" in final and "gathered so far" in final
    assert "putting together what you found" in final and "answering directly" in final


# ---- A-RAG, Figures 7 and 8 (the tool descriptions) ----------------------------------------------


@pytest.mark.parametrize("method", ["arag_full", "arag_no_semantic", "arag_no_chunk_read"])
def test_fig7_keywords_are_one_to_three_words(method):
    assert re.search(r"one to three words", seen_by_model(method))


@pytest.mark.parametrize("method", ["arag_full", "arag_no_keyword", "arag_no_semantic"])
def test_fig7_8_snippets_are_previews_read_with_chunk_read_before_answering(method):
    text = seen_by_model(method)
    assert "previews" in text and re.search(r"read a promising chunk with chunk_read before (relying on|answering from) it", text)


@pytest.mark.parametrize("method", ["arag_full", "arag_no_chunk_read"])
def test_fig8_when_to_use_semantic_search(method):
    text = seen_by_model(method)
    assert re.search(r"when you do not\s+know the exact words", text) and "keyword searches return nothing relevant" in text


# ---- Naive RAG (Figure 6, top) and Direct (§4.1) -------------------------------------------------


def test_fig6_naive_rag_helpful_assistant_answering_from_the_context():
    assert system("naive_rag") == "you are a helpful assistant. answer the question from the context you are given."


def test_fig6_naive_rag_context_then_question_then_ask_for_a_direct_answer():
    template = load_method("naive_rag").user_template
    assert template.index("{context}") < template.index("{question}") < template.index("direct answer based on the context above")


@pytest.mark.parametrize("method", ["naive_rag", "direct"])
def test_baselines_carry_no_rule_their_paper_lacks(method):
    text = every_text(method)
    for extra in ("best guess", "multi-hop", "chains several facts", "in turn", "memory", "no explanation"):
        assert extra not in text, extra


def test_sec4_1_direct_answers_zero_shot_from_its_own_knowledge():
    m = load_method("direct")
    assert system("direct") == "you are a helpful assistant. answer the question from your own knowledge."
    assert not m.tools and not m.needs_index()


# ---- AgenticRAG, appendix A.2 and §4 ---------------------------------------------------------------


# Appendix A.2, "System Instructions for Tool Use": each rule → what our prompts say for it.
A2_RULES = {
    "overall_search_before_answering_when_uncertain": r"search before you answer whenever you are not sure",
    "overall_explore_with_find_or_open_when_snippets_fall_short": r"when snippets are not enough, go deeper step by step with find or open",
    "overall_reuse_previous_results_rather_than_search_again": r"reuse the results you already have instead of searching for the same thing again",
    "overall_cite_whenever_tool_output_is_used": r"cite every document whose information you use",
    "search_is_the_primary_tool": r"search: the main way into the collection",
    "search_is_the_first_choice": r"first tool to reach for, whatever the question",
    "search_for_changing_facts": r"facts that change over time",
    "search_for_the_collection_s_own_terms": r"its own names and terms",
    "search_for_acronyms": r"abbreviations",
    "search_to_verify_rather_than_assume": r"check a detail instead of assuming it",
    "find_inside_a_search_result": r"find: looks inside one document from the search results",
    "find_when_results_lack_detail": r"find: .{0,200}when the search results do not give enough detail",
    "find_for_a_focused_view_on_terms": r"close look at what one result says about given terms",
    "open_windowed_content_of_a_search_result": r"open: shows a document from the search results as numbered lines, a window at a time",
    "open_when_snippets_fall_short": r"open: .{0,200}when the snippets are not enough",
    "open_more_of_the_most_promising_results": r"to read more of the most promising results",
    "open_several_results": r"you may open several of them",
    "open_at_a_line_near_the_content": r"from the line you choose \(pick one near the part you need\)",
}

STATED_RULES = [
    *((f"fig6_when_answering_{rule}", pattern, AGENTS) for rule, pattern in FIG6_WHEN_ANSWERING.items()),
    *((f"a2_{rule}", pattern, AGENTICRAG) for rule, pattern in A2_RULES.items()),
]


@pytest.mark.parametrize("pattern, method", [pytest.param(pattern, method, id=f"{rule}-{method}") for rule, pattern, methods in STATED_RULES for method in methods])
def test_the_paper_s_rule_is_in_the_system_prompt(pattern, method):
    """Figure 6's "When Answering" rules (A-RAG) and appendix A.2's rules (AgenticRAG), each by name."""
    assert re.search(pattern, system(method))


@pytest.mark.parametrize("method", AGENTICRAG)
def test_sec4_citations_carry_relevance_scores_in_every_answer_prompt(method):
    m = load_method(method)
    for text in (m.system_text, m.final_text):
        assert "relevance score between 0 and 1" in text and "Citations: turn1search2 (0.9)" in text


@pytest.mark.parametrize("method", AGENTICRAG)
def test_sec3_search_takes_the_configured_reformulations(method):
    m = load_method(method)
    said = "one query per call" if m.documents.max_queries == 1 else f"up to {m.documents.max_queries} reformulations"
    assert said in system(method)


# ---- the prompt variant and the answer style ----------------------------------------------------


@pytest.mark.parametrize("method", PROMPTED)
def test_the_paper_variant_is_the_shipped_default(method):
    m = load_method(method)
    assert m.prompt_variant == "paper" and m.describe()["prompt_variant"] == "paper"
    assert not any(style in text for text in m.texts().values() for style in ANSWER_STYLES.values())


@pytest.mark.parametrize("method", PROMPTED)
def test_the_short_answer_variant_adds_the_dataset_s_answer_style(method):
    short = load_method(method, {"prompt_variant": "short_answer"})
    free = load_method(method, {"prompt_variant": "short_answer", "answer_style": "free_form"})
    assert ANSWER_STYLES["short"] in short.system_text and "complete sentences" not in short.system_text
    assert ANSWER_STYLES["free_form"] in free.system_text and ANSWER_STYLES["short"] not in free.system_text
    if short.tools:
        assert ANSWER_STYLES["free_form"] in free.final_text and "{answer_style}" not in free.final_text
    assert short.describe()["prompt_variant"] == "short_answer"


def test_variants_are_the_documented_two():
    assert PROMPT_VARIANTS == ("paper", "short_answer")


@pytest.mark.parametrize("key, value", [("prompt_variant", "terse"), ("answer_style", "poem")])
def test_unknown_variant_or_answer_style_is_an_error(key, value):
    with pytest.raises(ValueError, match=key):
        load_method("arag_full", {key: value})


def test_dataset_answer_styles():
    from arag.evaluation.run_settings import answer_style_for

    assert answer_style_for("2wikimultihopqa") == "short" and answer_style_for("graphrag-bench-novel") == "free_form"


@pytest.mark.parametrize("method, scoring", [("arag_full", "whole reply"), ("naive_rag", "whole reply"), ("direct", "whole reply"), ("agenticrag", "whole reply less its Citations line"), ("a2rag", "the answer field")])
def test_each_method_records_how_its_answer_is_scored(method, scoring):
    assert load_method(method).describe()["answer_scoring"].startswith(scoring)


@pytest.mark.parametrize("method", ["arag_full", "arag_naive", "arag_no_keyword", "arag_no_semantic"])
def test_chunk_read_gives_example_ids_and_they_are_the_index_s_own(method, agent_ctx):
    """Figure 8 shows chunk_read's parameter with example ids; ours are a real id of the opened index
    (tests/agent/test_chunk_ids.py checks the packed and per-document forms)."""
    m = load_method(method).for_index(agent_ctx.chunk_ids)
    chunk_read = next(t["function"] for t in m.tool_schemas() if t["function"]["name"] == "chunk_read")
    example = agent_ctx.chunk_ids.example
    assert f'for example ["{example}"]' in chunk_read["parameters"]["properties"]["chunk_ids"]["description"]
    assert f'"{example}"' in m.system_text and agent_ctx.call("chunk_read", {"chunk_ids": [example]}).error is None
