"""RemoteTools against a real server: ToolContext's answers, the tracker as a server session, and
the agent loop, the evaluation runner and pipelines.ask/evaluate switched over with index.url."""

from __future__ import annotations

import pytest

pytest.importorskip("mcp", reason="the tool server needs the serve extra: pip install -e '.[serve]'")

import asyncio
import dataclasses
import json

import yaml
from hydra import compose, initialize_config_dir

from arag.evaluation.questions import Question
from arag.evaluation.runner import EpisodeRunner
from arag.evaluation.run_settings import RunSettings
from arag.llm.scripted import ScriptedBackend
from arag.methods import METHOD_CONF_DIR
from arag.serve.client import RemoteTools, ToolServerError, open_tools
from arag.tools import ReadTracker
from arag.tools.base import ResultFormat
from tests.support.scripted_evaluation import CONF, compose_evaluate
from tests.support.tool_server import BAD_CALLS, CALLS, free_port

QUESTION = Question("q0", "When did Lothair II's mother die?", ("20 March 851",), ("Lothair II", "Ermengarde of Tours"))
SCRIPT = [
    {"tool": "keyword_search", "arguments": {"keywords": ["Lothair"]}},
    {"tool": "semantic_search", "arguments": {"query": "mother of Lothair II"}},
    {"tool": "chunk_read", "arguments": {"chunk_ids": ["2#0", "1#0"]}},
    {"tool": "chunk_read", "arguments": {"chunk_ids": ["2#0"]}},
    {"tool": "keyword_search", "arguments": {"keywords": "not a list"}},
    {"answer": "20 March 851"},
]


@pytest.fixture(scope="module")
def remote(http_server):
    with RemoteTools(http_server.url) as tools:
        yield tools


def same(a, b) -> bool:
    return (a.tool, a.text, [h.to_json() for h in a.results], a.retrieved_tokens, a.error, a.details) == (b.tool, b.text, [h.to_json() for h in b.results], b.retrieved_tokens, b.error, b.details)


def test_remote_calls_answer_as_local(remote, local_ctx):
    remote_tracker, local_tracker = ReadTracker(), ReadTracker()
    for tool, args in CALLS + [(t, a) for t, a, _ in BAD_CALLS]:
        for arguments in (args, json.dumps(args)):  # a dict, or the model's raw JSON text
            assert same(remote.call(tool, arguments, tracker=remote_tracker), local_ctx.call(tool, arguments, tracker=local_tracker)), (tool, arguments)
    assert remote_tracker.order == local_tracker.order == ["1#0", "1#1"]
    for tool, raw in [("keyword_search", '{"keywords": ["x"'), ("semantic_search", {"query": "\udcff"}), ("chunk_read", {"chunk_ids": ["1#0"], "top_k": float("nan")})]:
        assert same(remote.call(tool, raw), local_ctx.call(tool, raw)), raw
    assert same(remote.call("keyword_search", {"keywords": ["Lothair"]}, full_text=True), local_ctx.call("keyword_search", {"keywords": ["Lothair"]}, full_text=True))
    shown = ResultFormat(snippets_per_chunk=1, result_titles=True)  # a method's format travels with its calls
    for tool, args in [("keyword_search", {"keywords": ["e"]}), ("semantic_search", {"query": "Lothair"}), ("chunk_read", {"chunk_ids": ["0#0"]})]:
        assert same(remote.call(tool, args, result_format=shown), local_ctx.call(tool, args, result_format=shown)), tool
    unknown = remote.call("web_search", {})
    assert unknown.error and "available tools: keyword_search" in unknown.error


def test_a_reset_tracker_is_a_new_session(remote):
    tracker = ReadTracker()
    assert remote.call("chunk_read", {"chunk_ids": ["3#0"]}, tracker=tracker).results[0].already_read is False
    assert remote.call("chunk_read", {"chunk_ids": ["3#0"]}, tracker=tracker).results[0].already_read is True
    tracker.reset()
    assert remote.call("chunk_read", {"chunk_ids": ["3#0"]}, tracker=tracker).results[0].already_read is False


def test_titles_of_many_ids(remote, local_ctx):
    ids = [f"{d}#{p}" for d in range(5) for p in range(30)]  # more than one request's 50
    from arag.tools.chunk_read import chunk_titles

    assert remote.titles_of(ids) == chunk_titles(local_ctx, ids) == {"0#0": "Teutberga", "1#0": "Lothair II", "1#1": "Lothair II", "2#0": "Ermengarde of Tours", "3#0": "Phoolwari"}


def test_an_unreachable_server_is_a_clear_error():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ToolServerError, match=f"tool server {url} unreachable after 2 attempt\\(s\\): GET /index \\(ConnectError"):
        RemoteTools(url, retries=1)
    with pytest.raises(ValueError, match="http:// or https://"):
        RemoteTools("localhost:8765")


def test_a_method_needing_an_unserved_tool_fails_early(tmp_path, served_index):
    from tests.support.tool_server import start_http_server, stop

    server = start_http_server(served_index.path, tmp_path / "naive.log", "serve.tools=arag_naive")
    try:
        with pytest.raises(ToolServerError, match="does not serve keyword_search, semantic_search"):
            open_tools(index_url=server.url, require_tools=("keyword_search", "semantic_search", "chunk_read"))
        with open_tools(index_url=server.url, require_tools=("naive_embedding_search",)) as tools:
            assert tools.tools == ["naive_embedding_search", "chunk_read"]
    finally:
        stop(server)


def run_settings(**index) -> RunSettings:
    judge = dataclasses.asdict(compose_evaluate().judge)
    judge.pop("model")
    return RunSettings(
        dataset="bench",
        method=yaml.safe_load((METHOD_CONF_DIR / "arag_full.yaml").read_text()),
        model={"backend": "scripted", "protocol": "json", "model": "scripted", "script": [], "replay": True},
        agent={"max_steps": 8, "token_budget": None, "backoff_initial_s": 0.0, "backoff_max_s": 0.0, "backoff_jitter_s": 0.0},
        judge=judge,
        judge_model=None,
        questions_path="/q.jsonl",
        questions_sha256="0" * 64,
        index_build_fingerprint="fp",
        **index,
    )


def test_an_evaluation_episode_against_the_served_index(http_server, served_index):
    """The runner opens the index by URL (RemoteTools), runs the scripted episode and scores evidence
    through the server; the row equals the one of the same episode over the local index."""
    rows = {}
    for where, index in {"served": {"index_url": http_server.url}, "local": {"index_path": str(served_index.path)}}.items():
        runner = EpisodeRunner(run_settings(**index), backend=ScriptedBackend(SCRIPT, replay=True))
        assert isinstance(runner.ctx, RemoteTools) == (where == "served")
        rows[where] = asyncio.run(runner.run(QUESTION))
        runner.close()
    served, local = rows["served"], rows["local"]
    assert served.status == "ok" and served.prediction == "20 March 851"
    assert (served.calls_chunk_read, served.tool_errors, served.evidence_recall_read, served.evidence_recall_seen) == (2, 2, 1.0, 1.0)
    # The failure kinds come through the server: the re-read brought nothing new, the string was refused.
    assert served.tool_error_kinds == local.tool_error_kinds == {"already_read": 1, "refused": 1}
    assert served.retrieved_tokens == local.retrieved_tokens > 0
    assert served.run_id == local.run_id  # how the index is reached is not part of the run
    calls = [(c["name"], c["text"], c["chunk_ids"], c["error"], c["failure"]) for c in json.loads(served.trajectory)["tool_calls"]]
    assert calls == [(c["name"], c["text"], c["chunk_ids"], c["error"], c["failure"]) for c in json.loads(local.trajectory)["tool_calls"]]
    assert "Already read in this episode" in calls[3][1]


def test_pipelines_switch_on_index_url(http_server, served_index, tmp_path):
    from pipelines.ask import ask
    from arag.evaluation.run_config import run_settings as evaluate_settings
    from arag.evaluation.questions import load_questions
    from tests.conftest import write_jsonl

    script = "[{tool:keyword_search,arguments:{keywords:[Lothair]}},{tool:chunk_read,arguments:{chunk_ids:['2#0']}},{answer:'20 March 851'}]"
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose(config_name="ask", overrides=[f"index.url={http_server.url}", "model=scripted", f"model.script={script}", "question=Who was the mother of Lothair II?"])
    episode = ask(cfg)
    assert episode.status == "answered" and "She died on 20 March 851." in episode.tool_calls[1].text

    questions = load_questions(str(write_jsonl(tmp_path / "q.jsonl", [{"id": "q0", "question": "x?", "answers": ["y"]}])), "error")
    by_url = evaluate_settings(compose_evaluate(f"index.url={http_server.url}", f"questions.path={tmp_path / 'q.jsonl'}"), questions)
    by_path = evaluate_settings(compose_evaluate(f"index.path={served_index.path}", f"questions.path={tmp_path / 'q.jsonl'}"), questions)
    assert (by_url.index_url, by_url.index_path) == (http_server.url, None)
    assert by_url.index_build_fingerprint == by_path.index_build_fingerprint and by_url.run_id == by_path.run_id


def test_index_timeout_reaches_the_workers_client(http_server, tmp_path):
    """index.timeout_s: the per-call limit of the evaluation workers' client (a busy server's queue
    counts in it), not part of the run; a bad value is refused by name."""
    from arag.evaluation.questions import load_questions
    from arag.evaluation.run_config import run_settings as evaluate_settings
    from tests.conftest import write_jsonl

    questions = load_questions(str(write_jsonl(tmp_path / "q.jsonl", [{"id": "q0", "question": "x?", "answers": ["y"]}])), "error")
    given = evaluate_settings(compose_evaluate(f"index.url={http_server.url}", f"questions.path={tmp_path / 'q.jsonl'}", "index.timeout_s=900"), questions)
    default = evaluate_settings(compose_evaluate(f"index.url={http_server.url}", f"questions.path={tmp_path / 'q.jsonl'}"), questions)
    assert (given.index_timeout_s, default.index_timeout_s) == (900.0, 120.0) and given.run_id == default.run_id
    runner = EpisodeRunner(given, backend=ScriptedBackend(SCRIPT, replay=True))
    try:
        assert runner.ctx._client.timeout.read == 900.0
    finally:
        runner.close()
    with pytest.raises(ValueError, match="index.timeout_s"):
        evaluate_settings(compose_evaluate(f"index.url={http_server.url}", f"questions.path={tmp_path / 'q.jsonl'}", "index.timeout_s=0"), questions)
