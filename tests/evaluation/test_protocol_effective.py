"""The protocol card reads what ran (arag.evaluation.effective, arag.evaluation.text_fingerprints):
the token budget after fitting it to the model's window, the reply cap as sent and what a reply
could use, tool calls per step with the extra calls answered "not run", chunk_read's header as
shown, the texts by fingerprint against the method's preset, and a served index's facts from its
server; and the committed CPU runs' report shows the fitted budget."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest

from arag.agent import Agent, AgentConfig
from arag.evaluation import protocol_papers as P
from arag.evaluation.effective import effective, header_form
from arag.evaluation.protocol import protocol_card
from arag.llm.scripted import ScriptedBackend
from arag.llm.types import Completion, ToolCall
from arag.methods import load_method
from tests.support.scripted_evaluation import compose_evaluate

REPO = Path(__file__).resolve().parents[2]
CPU_RESULTS = REPO / "benchmarks" / "cpu_evaluations" / "results"
FULL = "d45a26133a83ba16"  # A-RAG (Full) on 20 2Wiki questions, llama.cpp in a 16,384-token window
FAST = dict(backoff_initial_s=0.0, backoff_max_s=0.0, backoff_jitter_s=0.0)
# The differences from the authors' code that a `+protocol=a-rag-paper` run keeps by design (ours, documented).
OURS_BY_DESIGN = {P.SENTENCE_SPLITTER, P.BUDGET_ACCOUNTING, P.TOOL_RESULT_CUT, P.SYSTEM_PROMPT, P.TOOL_DESCRIPTIONS, P.CHUNK_READ_HEADER, P.QUESTION_MESSAGE}


def rows_of(card) -> dict:
    return {r.setting: r for r in card.rows}


def committed_info(run_id: str = FULL) -> dict:
    return json.loads((CPU_RESULTS / "2wiki20" / run_id / "run.json").read_text())


def paper_run_info(**model) -> dict:
    """A run.json as a `+protocol=a-rag-paper` run on the paper's index records it (the model's
    config replaced by `model` when given)."""
    info = copy.deepcopy(committed_info())
    s = info["settings"]
    s["model"] = model or {"backend": "openai", "model": "gpt-5-mini", "max_tokens": 16384, "reasoning_effort": "medium", "temperature": None}
    s["agent"]["guard_rails"] = {"require_read_before_answer": False, "tool_steps": 0, "shown_chunk_ids_only": False, "max_refusals": 2}
    s["method"].update(prompt_variant="paper", snippets_per_chunk=5, result_titles=False)
    s["retrieved_tokens_tokenizer"] = "o200k_base"
    s["index_facts"] = {"embedder": "Qwen3-Embedding-0.6B", "chunking": "packed", "chunk_tokens": 1000, "chunk_overlap": 100, "splitter": "sentencex",
                        "query_instruction": "the model's 'query' prompt", "dtype": "float16", "vector_search": "exact"}
    return info


@pytest.fixture(scope="module")
def agent_ctx(tmp_path_factory):
    from arag.tools import ToolContext
    from tests.support.agent_index import AGENT_DOCS
    from tests.support.tiny_index import fake_encode, make_index

    index = make_index(tmp_path_factory.mktemp("card") / "index", AGENT_DOCS)
    with ToolContext(index.path, encoder=fake_encode) as ctx:
        yield ctx


def llamacpp_episode(ctx, window: int = 16384):
    """An A-RAG (Full) episode as a llama.cpp model in a `window`-token window runs it (the reply cap
    left at the default, 16,384): one reply asks for two calls (one is answered "not run"), then
    chunk_read, then the answer."""
    two = Completion(tool_calls=[ToolCall("keyword_search", json.dumps({"keywords": ["Lothair II"]}), "c1"), ToolCall("chunk_read", json.dumps({"chunk_ids": ["1#0"]}), "c2")])
    read = Completion(tool_calls=[ToolCall("chunk_read", json.dumps({"chunk_ids": ["1#0"]}), "c3")])
    backend = ScriptedBackend([two, read, {"answer": "Ermengarde of Tours"}])
    backend.context_window = window
    agent = Agent(backend, load_method("arag_full"), ctx, protocol="native", config=AgentConfig(max_steps=15, token_budget=128000, **FAST))
    return agent.run("Who was the mother of Lothair II?").to_json()


def llamacpp_info(window: int = 16384) -> dict:
    return paper_run_info(backend="llamacpp", model="qwen2.5-coder-1.5b-instruct", n_ctx=window, max_tokens=None, temperature=0.0)


# ---- effective values from the episodes ----------------------------------------------------------------
def test_a_llamacpp_run_in_a_16k_window_shows_the_fitted_budget_and_a_deviation(agent_ctx):
    trajectory = llamacpp_episode(agent_ctx)
    ran = effective([trajectory, {}])  # a failed episode without a record counts for nothing
    assert ran.episodes == 1 and ran.token_budgets == (13824,) and ran.reply_caps == (16384,) and ran.windows == (16384,)
    assert ran.most_calls_in_a_step == 1 and ran.extra_calls == 1 and ran.replies_with_extra_calls == 1
    rows = rows_of(protocol_card(llamacpp_info(), ran))
    budget = rows[P.TOKEN_BUDGET]
    assert budget.ours == "13824 (fitted in the 16384-token window; 128000 set)" and budget.differs and budget.recorded and budget.paper == "128000"
    assert budget in protocol_card(llamacpp_info(), ran).deviations
    cap = rows[P.REPLY_CAP]
    assert cap.differs and cap.ours.startswith("16384 sent; at most ") and cap.recorded
    calls = rows[P.TOOL_CALLS_PER_STEP]
    assert not calls.differs and calls.ours == '1 at most; 1 reply asked for more: 1 extra call answered "not run"'
    assert calls.official == "every call of a reply carried out"
    # The same settings with a window that holds the whole budget: 128000 ran, as the paper's.
    roomy = effective([llamacpp_episode(agent_ctx, window=262144)])
    assert roomy.token_budgets == (128000,) and not rows_of(protocol_card(llamacpp_info(262144), roomy))[P.TOKEN_BUDGET].differs


def test_without_episodes_the_budget_is_derived_with_the_loops_function():
    rows = rows_of(protocol_card(llamacpp_info()))
    budget = rows[P.TOKEN_BUDGET]
    assert budget.ours == "13824 (derived: 128000 set, fitted to the 16384-token window)" and budget.differs and not budget.recorded
    assert not rows_of(protocol_card(paper_run_info()))[P.TOKEN_BUDGET].differs  # no known window: the budget as set


def test_a_reply_cap_equal_to_the_window_is_not_the_papers():
    rows = rows_of(protocol_card(paper_run_info(backend="llamacpp", model="m", n_ctx=16384, max_tokens=16384)))
    assert rows[P.REPLY_CAP].differs and rows[P.REPLY_CAP].ours == "16384 sent; less than the 16384-token window usable (the prompt shares it)"
    roomy = rows_of(protocol_card(paper_run_info(backend="llamacpp", model="m", n_ctx=65536, max_tokens=16384)))
    assert not roomy[P.REPLY_CAP].differs and roomy[P.REPLY_CAP].ours == "16384 (in a 65536-token window)"


def test_the_chunk_read_header_is_read_from_what_the_model_was_shown(agent_ctx):
    ran = effective([llamacpp_episode(agent_ctx)])
    assert ran.chunk_read_header == "[chunk_id: <id> | previous: <id> | next: <id>]"
    row = rows_of(protocol_card(llamacpp_info(), ran))[P.CHUNK_READ_HEADER]
    assert row.differs and row.recorded and row.official == "[Chunk <id>]" and row.paper == "not stated"
    theirs = header_form({"name": "chunk_read", "text": "----\n[Chunk 12]\nTeutberga died 11 November 875."})
    assert theirs == "[Chunk <id>]"


def test_the_report_reads_them_from_the_stored_rows(agent_ctx, tmp_path):
    from arag.evaluation.results import RunStore
    from arag.evaluation.rows import EpisodeRow
    from arag.report.episodes import connect
    from arag.report.protocol import run_cards

    episode = llamacpp_episode(agent_ctx)
    row = EpisodeRow(run_id="r", dataset="2wikimultihopqa", question_id="q0", question="?", gold_answers=["a"], supporting_titles=[], method="arag_full",
                     model="qwen", backend="llamacpp", status="ok", prediction="a", settings=json.dumps(committed_info()["identity"]),
                     refused_calls=episode["refused_calls"], trajectory=json.dumps(episode)).to_record()
    with RunStore(tmp_path, "r") as store:
        store.write([row])
    rows = rows_of(run_cards(connect(tmp_path), tmp_path)["r"])
    assert rows[P.TOKEN_BUDGET].ours == "13824 (fitted in the 16384-token window; 128000 set)"
    assert rows[P.TOOL_CALLS_PER_STEP].ours == '1 at most; 1 reply asked for more: 1 extra call answered "not run"'
    assert rows[P.CHUNK_READ_HEADER].ours == "[chunk_id: <id> | previous: <id> | next: <id>]" and rows[P.CHUNK_READ_HEADER].recorded


# ---- texts by fingerprint --------------------------------------------------------------------------------
def test_an_overridden_system_prompt_reads_custom(eval_index, questions_file):
    from arag.evaluation.questions import load_questions
    from arag.evaluation.run_config import run_settings

    def card(*overrides: str):
        cfg = compose_evaluate(f"index.path={eval_index.path}", f"questions.path={questions_file}", "model=scripted", "method=arag_full", *overrides)
        settings = run_settings(cfg, load_questions(str(questions_file)))
        return rows_of(protocol_card({"identity": settings.identity(), "settings": settings.to_json()}))

    preset = card()
    assert preset[P.PROMPT_VARIANT].ours == "paper" and not preset[P.PROMPT_VARIANT].differs
    assert preset[P.SYSTEM_PROMPT].ours.startswith("the arag_full preset's (sha256 ") and "one tool per step" in preset[P.SYSTEM_PROMPT].ours
    assert preset[P.TOOL_DESCRIPTIONS].ours.startswith("the preset's, in our words")
    custom = card("method.system_prompt=Answer the question from the chunks.")
    assert custom[P.PROMPT_VARIANT].ours.startswith("custom (the system prompt, sha256 ") and custom[P.PROMPT_VARIANT].differs
    assert custom[P.SYSTEM_PROMPT].ours.startswith("custom (sha256 ") and custom[P.SYSTEM_PROMPT].differs
    assert custom[P.SYSTEM_PROMPT].ours.split("sha256 ")[1][:12] != preset[P.SYSTEM_PROMPT].ours.split("sha256 ")[1][:12]


def test_tool_descriptions_are_not_judged_without_the_index_chunk_ids():
    """From the rows' identity alone (run.json gone) the chunk ids the descriptions were filled with are
    unknown: the fingerprints are shown, unchecked, never read as custom."""
    with_info = rows_of(protocol_card(committed_info()))[P.TOOL_DESCRIPTIONS]
    assert with_info.ours.startswith("the preset's, in our words (sha256 ") and with_info.recorded
    alone = rows_of(protocol_card({"identity": committed_info()["identity"]}))[P.TOOL_DESCRIPTIONS]
    assert alone.ours.startswith("ours (sha256 ") and "not checked" in alone.ours and not alone.recorded


# ---- a served index's facts from its server ---------------------------------------------------------------
def test_a_served_index_run_shows_the_servers_embedder(agent_ctx):
    import httpx

    from arag.serve.client import RemoteTools
    from arag.serve.sessions import SessionTrackers
    from arag.serve.tool_service import ToolService

    info = ToolService(agent_ctx, sessions=SessionTrackers(), tools=("keyword_search", "semantic_search", "chunk_read")).info()
    assert info["index_facts"]["embedder"] == agent_ctx.index.manifest["embedding"]["model"]
    remote = RemoteTools("http://tools.test", retries=0, transport=httpx.MockTransport(lambda request: httpx.Response(200, json=info)))
    try:
        facts = remote.index_facts
    finally:
        remote.close()
    run = paper_run_info()
    run["settings"].update(index_path=None, index_url="http://tools.test", index_facts=facts)
    rows = rows_of(protocol_card(run))
    embedder = info["index_facts"]["embedder"]
    assert rows[P.EMBEDDER].ours == f"{embedder} (from the tool server)" and rows[P.EMBEDDER].recorded
    assert rows[P.SENTENCE_SPLITTER].recorded and rows[P.SENTENCE_SPLITTER].ours.startswith("sentencex")
    assert rows[P.VECTOR_SEARCH].ours == "exact (from the tool server)" and not rows[P.VECTOR_SEARCH].differs
    # A server from before it stated its facts still names its embedder.
    older = {k: v for k, v in info.items() if k != "index_facts"}
    remote = RemoteTools("http://tools.test", retries=0, transport=httpx.MockTransport(lambda request: httpx.Response(200, json=older)))
    try:
        assert remote.index_facts == {"embedder": embedder}
    finally:
        remote.close()


@pytest.mark.slow
def test_a_run_against_a_served_index_records_the_servers_facts(eval_index, questions_file, tmp_path):
    """End to end: pipelines.serve answers GET /index with the index's facts, the run records them."""
    pytest.importorskip("mcp", reason="the tool server needs the serve extra: pip install -e '.[serve]'")
    from arag.evaluation.questions import load_questions
    from arag.evaluation.run_config import run_settings
    from tests.support.scripted_evaluation import base_overrides
    from tests.support.tool_server import start_http_server, stop

    server = start_http_server(eval_index.path, tmp_path / "server.log", "serve.preload=false")
    try:
        cfg = compose_evaluate(*base_overrides(eval_index.path, questions_file, tmp_path / "results"), f"index.url={server.url}")
        settings = run_settings(cfg, load_questions(str(questions_file), "error"))
    finally:
        stop(server)
    assert settings.index_path is None and settings.index_facts["embedder"] == "fake-trigram-hash" and settings.index_facts["splitter"] == "sentencex"
    rows = rows_of(protocol_card({"identity": settings.identity(), "settings": settings.to_json()}))
    assert rows[P.EMBEDDER].ours == "fake-trigram-hash (from the tool server)" and rows[P.EMBEDDER].recorded


# ---- the preset ------------------------------------------------------------------------------------------
def test_the_presets_card_lists_the_differences_that_move_numbers():
    card = protocol_card(paper_run_info())
    assert {r.setting for r in card.deviations} == OURS_BY_DESIGN | {P.QUERY_INSTRUCTION, P.EMBEDDER_PRECISION}
    assert {r.setting for r in card.form_only} == {P.JUDGE_SHORTCUT}
    assert all(r.effect for r in card.rows if r.differs)
    info = paper_run_info()
    info["settings"]["index_facts"].update(query_instruction=None, dtype="float32")
    assert {r.setting for r in protocol_card(info).deviations} == OURS_BY_DESIGN
    every_kind = set(P.KINDS) - {P.REQUEST_FIELDS}  # what the requests carried is read from the episodes only
    assert every_kind <= {r.setting for r in card.rows}, every_kind - {r.setting for r in card.rows}
    assert P.REQUEST_FIELDS not in {r.setting for r in card.rows}
    # GPT-5's requests as the episodes recorded them: the reply cap's other field and no temperature
    from arag.evaluation.effective import Effective

    ran = Effective(episodes=1, request_fields={"cap": "max_completion_tokens", "parallel_tool_calls": False})
    rows = rows_of(protocol_card(paper_run_info(), ran))
    assert (rows[P.REQUEST_FIELDS].ours, rows[P.REQUEST_FIELDS].differs) == ("max_completion_tokens, no temperature, parallel_tool_calls false", True)
    assert rows[P.REQUEST_FIELDS].official == "max_tokens, temperature 0, tool_choice auto"


# ---- the committed runs ----------------------------------------------------------------------------------
def test_the_committed_runs_report_shows_the_fitted_budget(tmp_path):
    from arag.report.build import build_report

    results = tmp_path / "2wiki20"
    shutil.copytree(CPU_RESULTS / "2wiki20", results)
    section = build_report(results, tmp_path / "report").markdown.split("## Protocol\n")[1].split("\n## ")[0]
    assert "| token budget | 13824 (fitted in the 16384-token window; 128000 set) | 128000 | 128000 |" in section
    assert "| chunk_read header | [chunk_id: <id> \\| title: <title> \\| previous: <id> \\| next: <id>] | not stated | [Chunk <id>] |" in section
    assert "tool calls per step 1 at most; no reply asked for more (authors' code: every call of a reply carried out)" in section
    assert "128000 (" not in section.split("| token budget |")[1].split("\n")[0].split("|")[1]  # never the setting as what ran
