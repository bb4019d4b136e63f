"""The protocols of the papers our methods come from, as data: per setting a run's card compares
(arag.evaluation.protocol), the paper's value as the card prints it, where the paper (or, where the
paper names none, its authors' official configuration) states it, and the test our value must pass.

A-RAG: arXiv 2602.03442 and the authors' public code (configs/example.yaml, src/arag/); AgenticRAG
and A2RAG: their papers (/work/shared/papers in the development checkout). A setting a paper does
not state has no row: the card never invents a reference value.
"""

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

SETTINGS_ORDER = (
    BACKBONE, JUDGE_MODEL, JUDGE_PRESET, EMBEDDER, CHUNKING, CHUNK_OVERLAP, TOKENIZER, MAX_STEPS, TOKEN_BUDGET, REPLY_CAP,
    REASONING_EFFORT, TEMPERATURE, GUARD_RAILS, PROMPT_VARIANT, SNIPPET_CAP, RESULT_TITLES, QUERIES_PER_SEARCH,
    RESULTS_PER_QUERY, FIND_PASSAGES, OPEN_WINDOW, CONTEXT_BUDGET, EXTRACTOR, GATE_SUMMARIES, MAX_REWRITES, CORPUS,
)


@dataclass(frozen=True)
class Expected:
    shown: str  # the paper's value, as the card prints it
    source: str  # where it is stated
    accepts: Callable[[Any], bool]  # whether our (normalised) value is the paper's


@dataclass(frozen=True)
class PaperProtocol:
    name: str  # e.g. "A-RAG (arXiv 2602.03442)"
    backbones: tuple[str, ...]  # the backbone models the paper ran, as model-name fragments
    expected: Mapping[str, Expected]


def names_one_of(*fragments: str) -> Callable[[Any], bool]:
    """Accepts a model name containing one of `fragments` (e.g. 'gpt-5-mini-2025-08-07')."""
    return lambda value: value is not None and any(f in str(value).lower() for f in fragments)


def equals(expected: Any) -> Callable[[Any], bool]:
    return lambda value: value == expected


def at_least(minimum: int) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, int) and value >= minimum


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
        EMBEDDER: Expected("Qwen3-Embedding-0.6B", "§4.1 Implementation", names_one_of("qwen3-embedding-0.6b")),
        CHUNKING: Expected("packed, 1000 tokens", "§3.1 Chunking (~1,000-token chunks on sentence boundaries, LinearRAG's setup)", equals("packed, 1000 tokens")),
        CHUNK_OVERLAP: Expected("100 tokens", "LinearRAG's setup, which §3.1 follows (the A-RAG paper states no overlap)", equals(100)),
        TOKENIZER: Expected("o200k_base", "official A-RAG code, src/arag/tools (tiktoken for gpt-4o)", equals("o200k_base")),
        MAX_STEPS: Expected("15", f"{OFFICIAL} (agent.max_loops; the paper text names none)", equals(15)),
        TOKEN_BUDGET: Expected("128000", f"{OFFICIAL} (agent.max_token_budget)", equals(128000)),
        REPLY_CAP: Expected("≥ 16384", "Appendix B (max_tokens ≥ 16384); official: 16384", at_least(16384)),
        # the value is (effort, model name): GPT-4o-mini, the paper's other backbone, has no reasoning effort
        REASONING_EFFORT: Expected("medium", f"{OFFICIAL} (llm.reasoning_effort)", lambda v: v[0] == "medium" or (v[0] is None and "gpt-4o-mini" in v[1])),
        GUARD_RAILS: Expected("none", "§3.3 Agent Loop and Appendix C, Algorithm 1 (no constraint on the agent's choices)", equals("off")),
        PROMPT_VARIANT: Expected("paper", "Appendix prompts", equals("paper")),
        SNIPPET_CAP: Expected("5", "official A-RAG code, src/arag/tools/keyword_search.py", equals(5)),
        RESULT_TITLES: Expected("no", "official A-RAG code, src/arag/tools (results show chunk ids and snippets only)", equals(False)),
        CORPUS: Expected("one of " + ", ".join(A_RAG_DATASETS), "§4.1 Datasets", lambda v: v in A_RAG_DATASETS),
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
    """The paper a method comes from, by its kind: AgenticRAG's and A2RAG's own; every other method
    (A-RAG and the baselines of its Table 1: direct, naive RAG) the A-RAG paper's."""
    kind = str(method.get("kind") or "agent")
    return {"agenticrag": AGENTIC_RAG, "a2rag": A2RAG}.get(kind, A_RAG)
