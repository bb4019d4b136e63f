"""The protocols of the papers our methods come from, as data (docs/evaluation.md, "Protocol"): per
card setting the paper's value, where stated, and the test ours must pass. A-RAG: arXiv 2602.03442
and the authors' code at commit a44de6b; AgenticRAG and A2RAG: their papers. A setting neither
states has no row: the card never invents a reference value."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

# The settings a card may hold, in the order it prints them.
BACKBONE = "backbone model"
JUDGE_MODEL = "judge model"
JUDGE_PRESET = "judge prompt"
EMBEDDER = "embedder"
CHUNKING = "chunking"
CHUNK_OVERLAP = "chunk overlap"
TOKENIZER = "retrieved-token tokenizer"
MAX_STEPS = "max steps"
TOKEN_BUDGET = "token budget"
REPLY_CAP = "reply cap (max_tokens)"
REASONING_EFFORT = "reasoning effort"
TEMPERATURE = "temperature"
GUARD_RAILS = "guard rails"
PROMPT_VARIANT = "prompt variant"
SNIPPET_CAP = "keyword snippets per chunk"
RESULT_TITLES = "result titles"
QUERIES_PER_SEARCH = "queries per search"
RESULTS_PER_QUERY = "results per query"
FIND_PASSAGES = "find passages per pattern"
OPEN_WINDOW = "open window (lines)"
CONTEXT_BUDGET = "context budget"
EXTRACTOR = "graph extractor"
GATE_SUMMARIES = "gate summaries"
MAX_REWRITES = "rewrites (bounded retry)"
CORPUS = "corpus"
# Differences from the authors' code the differential run classifies (their kind names in KINDS).
SYSTEM_PROMPT = "system prompt"
TOOL_DESCRIPTIONS = "tool descriptions"
FORCED_ANSWER = "forced-answer prompt"
CHUNK_READ_HEADER = "chunk_read header"
SENTENCE_SPLITTER = "sentence splitter"
QUERY_INSTRUCTION = "query instruction"
EMBEDDER_PRECISION = "embedder precision"
VECTOR_SEARCH = "sentence vector search"
BUDGET_ACCOUNTING = "budget accounting"
TOOL_RESULT_CUT = "tool result cut"
TOOL_CALLS_PER_STEP = "tool calls per step"
JUDGE_SHORTCUT = "judge exact-match shortcut"
READ_TOOL_NAME = "reading tool's name"
QUESTION_MESSAGE = "question message"
REQUEST_FIELDS = "request fields"

SETTINGS_ORDER = (
    BACKBONE, JUDGE_MODEL, JUDGE_PRESET, JUDGE_SHORTCUT, EMBEDDER, QUERY_INSTRUCTION, EMBEDDER_PRECISION, VECTOR_SEARCH, CHUNKING, CHUNK_OVERLAP,
    SENTENCE_SPLITTER, TOKENIZER, MAX_STEPS, TOKEN_BUDGET, BUDGET_ACCOUNTING, TOOL_RESULT_CUT, REPLY_CAP, REASONING_EFFORT,
    TEMPERATURE, GUARD_RAILS, TOOL_CALLS_PER_STEP, PROMPT_VARIANT, SYSTEM_PROMPT, TOOL_DESCRIPTIONS, FORCED_ANSWER,
    READ_TOOL_NAME, QUESTION_MESSAGE, REQUEST_FIELDS, CHUNK_READ_HEADER, SNIPPET_CAP, RESULT_TITLES, QUERIES_PER_SEARCH, RESULTS_PER_QUERY, FIND_PASSAGES, OPEN_WINDOW,
    CONTEXT_BUDGET, EXTRACTOR, GATE_SUMMARIES, MAX_REWRITES, CORPUS,
)

# The differential run's kind name of each setting it compares.
KINDS = {
    CHUNK_READ_HEADER: "chunk_read_header", SYSTEM_PROMPT: "system_prompt_rules", TOOL_DESCRIPTIONS: "tool_descriptions",
    SENTENCE_SPLITTER: "sentence_splitter", QUERY_INSTRUCTION: "query_instruction", EMBEDDER_PRECISION: "embedder_precision",
    BUDGET_ACCOUNTING: "budget_accounting", TOOL_RESULT_CUT: "tool_result_cut", TOOL_CALLS_PER_STEP: "tool_calls_per_step",
    JUDGE_SHORTCUT: "judge_exact_match_shortcut", FORCED_ANSWER: "forced_answer_prompt", SNIPPET_CAP: "keyword_snippet_cap",
    TOKENIZER: "retrieved_tokens_tokenizer", READ_TOOL_NAME: "read_tool_name", QUESTION_MESSAGE: "question_message",
    REQUEST_FIELDS: "request_parameters",
}


@dataclass(frozen=True)
class Effect:
    moves_numbers: bool  # False: a difference here is form only (no reported number moves)
    why: str


# Whether a difference moves a reported number, and why: a judgement kept as data that the
# differential run against the authors' code (benchmarks.official_side_by_side) may change.
EFFECTS: Mapping[str, Effect] = {
    CHUNK_READ_HEADER: Effect(True, "the header lists the neighbours' ids, which a model may go on to read (retrieved tokens leave headers out)"),
    SYSTEM_PROMPT: Effect(True, "added rules (one tool per step, the chunk-id form) steer which calls a model makes"),
    TOOL_DESCRIPTIONS: Effect(True, "a model chooses its tools and arguments from their descriptions"),
    FORCED_ANSWER: Effect(True, "the wording of the last request shapes the forced answer"),
    SENTENCE_SPLITTER: Effect(True, "decides which sentences exist to match: semantic_search ranked as the authors' code in 6 of 50 2Wiki queries, with 20% more retrieved tokens"),
    QUERY_INSTRUCTION: Effect(True, "changes every query vector, so semantic_search's ranking"),
    EMBEDDER_PRECISION: Effect(True, "moves every vector a little: near-tied sentences may swap ranks"),
    VECTOR_SEARCH: Effect(True, "an approximate index misses some of a query's exact top sentences (its recall@10 says how many)"),
    BUDGET_ACCOUNTING: Effect(True, "decides at which step the budget forces the answer"),
    TOOL_RESULT_CUT: Effect(True, "a cut result shows the model, and counts, fewer retrieved tokens"),
    TOOL_CALLS_PER_STEP: Effect(True, "a reply's extra calls are not run: the model sees fewer results per step"),
    READ_TOOL_NAME: Effect(True, "a model picks its tools by name and description"),
    QUESTION_MESSAGE: Effect(True, "the first user turn is text the model reads"),
    REQUEST_FIELDS: Effect(True, "the reply cap's field and the sampling fields decide how a reply is drawn"),
    JUDGE_SHORTCUT: Effect(False, "a prediction equal to the gold answer is what the paper's lenient judge calls correct: the shortcut only saves the call"),
}


def effect_of(setting: str) -> Effect:
    return EFFECTS.get(setting, Effect(True, "decides what the model is, reads or may do"))


@dataclass(frozen=True)
class Expected:
    shown: str  # the paper's value, as the card prints it ("not stated": the authors' code's is the reference)
    source: str  # where it is stated
    accepts: Callable[[Any], bool]  # whether our (normalised) value is the reference's
    official: str = ""  # the authors' code's value, as the card prints it beside the paper's ("": not compared)
    official_source: str = ""  # where in the authors' code


@dataclass(frozen=True)
class PaperProtocol:
    name: str  # e.g. "A-RAG (arXiv 2602.03442)"
    backbones: tuple[str, ...]  # the backbone models the paper ran, as model-name fragments
    expected: Mapping[str, Expected]


def names_one_of(*fragments: str) -> Callable[[Any], bool]:
    return lambda value: value is not None and any(f in str(value).lower() for f in fragments)


def equals(expected: Any) -> Callable[[Any], bool]:
    return lambda value: value == expected


NOT_STATED = "not stated"


def authors(path: str) -> str:
    return f"authors' code a44de6b, {path}"


A_RAG_BACKBONES = ("gpt-5-mini", "gpt-4o-mini")
A_RAG_DATASETS = ("musique", "hotpotqa", "2wikimultihopqa", "graphrag-bench-medical", "graphrag-bench-novel")
OFFICIAL = "official A-RAG code, configs/example.yaml"

A_RAG = PaperProtocol(
    name="A-RAG (arXiv 2602.03442)",
    backbones=A_RAG_BACKBONES,
    expected={
        BACKBONE: Expected("gpt-5-mini or gpt-4o-mini", "§4.1 Implementation", names_one_of(*A_RAG_BACKBONES)),
        JUDGE_MODEL: Expected("gpt-5-mini", "§4.1 Implementation", names_one_of("gpt-5-mini")),
        # conf/judge/paper.yaml is the paper code's lenient judge in our words
        JUDGE_PRESET: Expected("preset paper", "official A-RAG code, scripts/eval.py", equals("preset paper")),
        EMBEDDER: Expected("Qwen3-Embedding-0.6B", "§4.1 Implementation", names_one_of("qwen3-embedding-0.6b"),
                           "Qwen/Qwen3-Embedding-0.6B", authors("configs/example.yaml")),
        CHUNKING: Expected("packed, 1000 tokens", "§3.1 Chunking (~1,000-token chunks on sentence boundaries, LinearRAG's setup)", equals("packed, 1000 tokens")),
        CHUNK_OVERLAP: Expected("100 tokens", "LinearRAG's setup, which §3.1 follows (the A-RAG paper states no overlap)", equals(100)),
        TOKENIZER: Expected("o200k_base", "official A-RAG code, src/arag/tools (tiktoken for gpt-4o)", equals("o200k_base"),
                            "o200k_base", authors("src/arag/tools/*.py (tiktoken for gpt-4o)")),
        MAX_STEPS: Expected("15", f"{OFFICIAL} (agent.max_loops; the paper text names none)", equals(15), "15", authors("configs/example.yaml")),
        TOKEN_BUDGET: Expected("128000", f"{OFFICIAL} (agent.max_token_budget)", equals(128000), "128000", authors("configs/example.yaml")),
        REPLY_CAP: Expected("≥ 16384", "Appendix B (max_tokens ≥ 16384); official: 16384", lambda v: isinstance(v, int) and v >= 16384,
                            "16384", authors("configs/example.yaml")),
        # the value is (effort, model name): GPT-4o-mini, the paper's other backbone, has no reasoning effort
        REASONING_EFFORT: Expected("medium", f"{OFFICIAL} (llm.reasoning_effort)", lambda v: v[0] == "medium" or (v[0] is None and "gpt-4o-mini" in v[1])),
        GUARD_RAILS: Expected("none", "§3.3 Agent Loop and Appendix C, Algorithm 1 (no constraint on the agent's choices)", equals("off")),
        PROMPT_VARIANT: Expected("paper", "Appendix prompts", equals("paper")),
        SNIPPET_CAP: Expected("5", "official A-RAG code, src/arag/tools/keyword_search.py", equals(5), "5", authors("src/arag/tools/keyword_search.py")),
        RESULT_TITLES: Expected("no", "official A-RAG code, src/arag/tools (results show chunk ids and snippets only)", equals(False)),
        CORPUS: Expected("one of " + ", ".join(A_RAG_DATASETS), "§4.1 Datasets", lambda v: v in A_RAG_DATASETS),
        # The kinds of difference from the authors' code (arag.evaluation.protocol reads ours from what ran).
        SYSTEM_PROMPT: Expected("the Appendix prompt's rules", "Appendix (rules compared by checklist, never by text)", equals("paper rules"),
                                "its own prompt", authors("src/arag/agent/prompts/default.txt")),
        TOOL_DESCRIPTIONS: Expected(NOT_STATED, authors("src/arag/tools/*.py (the paper gives no descriptions)"), equals("authors' wording"),
                                    "its own schema descriptions", authors("src/arag/tools/*.py")),
        FORCED_ANSWER: Expected("tools removed, the model asked for its answer", "Appendix C, Algorithm 1", equals("forced, no tools"),
                                '"You have reached the limit..." with tools=None', authors("src/arag/agent/base.py")),
        CHUNK_READ_HEADER: Expected(NOT_STATED, authors("src/arag/tools/read_chunk.py (the paper states no format)"), equals("[Chunk <id>]"),
                                    "[Chunk <id>]", authors("src/arag/tools/read_chunk.py")),
        SENTENCE_SPLITTER: Expected(NOT_STATED, authors("scripts/build_index.py (the paper states no splitter)"), equals("regex"),
                                    "regex [.!?\\n]+, end punctuation stripped, pieces of <= 10 characters dropped", authors("scripts/build_index.py")),
        QUERY_INSTRUCTION: Expected(NOT_STATED, authors("src/arag/tools/semantic_search.py (§4.1 names the embedder only)"), equals(None),
                                    "none (the raw query encoded)", authors("src/arag/tools/semantic_search.py")),
        EMBEDDER_PRECISION: Expected(NOT_STATED, authors("scripts/build_index.py (the paper states none)"), equals("float32"),
                                     "float32 (sentence-transformers' default)", authors("scripts/build_index.py, src/arag/tools/semantic_search.py")),
        VECTOR_SEARCH: Expected("exact: cosine with every sentence embedding", "§3.2 Semantic Search, Eq. (3)", equals("exact"),
                                "exact (a product with every sentence vector)", authors("src/arag/tools/semantic_search.py")),
        BUDGET_ACCOUNTING: Expected(NOT_STATED, authors("src/arag/agent/base.py (the paper states no budget; its code's configs/example.yaml sets 128000)"), equals("message text, o200k"),
                                    "o200k tokens of the messages' text (the system prompt counted twice), checked before each step", authors("src/arag/agent/base.py")),
        TOOL_RESULT_CUT: Expected(NOT_STATED, authors("src/arag/agent/base.py (the paper states none)"), equals("never"),
                                  "never cut", authors("src/arag/agent/base.py")),
        TOOL_CALLS_PER_STEP: Expected("1", '§3.3 ("we intentionally avoid parallel tool calling")', equals(1),
                                      "every call of a reply carried out", authors("src/arag/agent/base.py")),
        READ_TOOL_NAME: Expected("chunk_read", "§3.2 Hierarchical Retrieval Interfaces", equals("chunk_read"),
                                 "read_chunk", authors("src/arag/tools/read_chunk.py")),
        QUESTION_MESSAGE: Expected(NOT_STATED, authors("src/arag/agent/base.py (the paper states no form)"), equals("{question}"),
                                   "the bare question", authors("src/arag/agent/base.py")),
        REQUEST_FIELDS: Expected(NOT_STATED, authors("src/arag/core/llm.py (the paper states none)"), equals("max_tokens, temperature 0"),
                                 "max_tokens, temperature 0, tool_choice auto", authors("src/arag/core/llm.py")),
        JUDGE_SHORTCUT: Expected("none (the judge asked)", "§4.1 Evaluation Metrics (LLM-Acc: an LLM decides equivalence)", equals(False),
                                 "none (the judge always asked)", authors("scripts/eval.py")),
    },
)

AGENTIC_RAG_BACKBONES = ("gpt-5-mini", "claude-sonnet-4.5", "claude-sonnet-4-5")
AGENTIC_RAG = PaperProtocol(
    name="AgenticRAG",
    backbones=AGENTIC_RAG_BACKBONES,
    expected={
        BACKBONE: Expected("gpt-5-mini or Claude Sonnet 4.5", "§5.1", names_one_of(*AGENTIC_RAG_BACKBONES)),
        MAX_STEPS: Expected("15", "§3.1 (maximum iterations, default 15)", equals(15)),
        CONTEXT_BUDGET: Expected("128000", "§3.4 Context management (128K-token threshold)", equals(128000)),
        GUARD_RAILS: Expected("none", "§3.1 (the model alone decides its tool calls)", equals("off")),
        QUERIES_PER_SEARCH: Expected("5", "§3.2 Search (up to five reformulations per call)", equals(5)),
        RESULTS_PER_QUERY: Expected("10", "§3.2 Search (up to 10 results per query)", equals(10)),
        FIND_PASSAGES: Expected("2", "§3.2 Find (up to 2 passages per pattern)", equals(2)),
        OPEN_WINDOW: Expected("1800", "§3.2 Open (a window of 1,800 lines)", equals(1800)),
    },
)

A2RAG_DATASETS = ("hotpotqa", "2wikimultihopqa")
A2RAG = PaperProtocol(
    name="A2RAG",
    backbones=("gpt-4o-mini",),
    expected={
        BACKBONE: Expected("gpt-4o-mini", "§IV-A.3 Models", names_one_of("gpt-4o-mini")),
        TEMPERATURE: Expected("0", "§IV-A.3 Models (deterministic decoding)", equals(0.0)),
        EMBEDDER: Expected("text-embedding-3-small", "§IV-A.3 Models", names_one_of("text-embedding-3-small")),
        EXTRACTOR: Expected("an LLM", "§II Notation and §I (a graph extracted from the text offline, GraphRAG/LightRAG-style by a language model)", lambda v: str(v).startswith("llm")),
        GATE_SUMMARIES: Expected("llm", "§III-B.1 Offline summaries (a short summary of each document, written at indexing)", equals("llm")),
        MAX_REWRITES: Expected("1-2 (2-3 attempts)", "§III-B.3 Bounded retry (I_max typically 2-3)", lambda v: v in (1, 2)),
        CORPUS: Expected("one of " + ", ".join(A2RAG_DATASETS), "§IV-A.1 Tasks and Datasets", lambda v: v in A2RAG_DATASETS),
    },
)


def paper_of(method: Mapping[str, Any]) -> PaperProtocol:
    """AgenticRAG's and A2RAG's own paper; every other method (A-RAG and its Table 1's baselines) A-RAG's."""
    kind = str(method.get("kind") or "agent")
    return {"agenticrag": AGENTIC_RAG, "a2rag": A2RAG}.get(kind, A_RAG)
