"""Per-session read trackers stay bounded: least recently used sessions and idle ones are dropped."""

from __future__ import annotations

import pytest

from arag.serve.app import ServeSettings, tool_context_options
from arag.serve.sessions import SessionIdError, SessionTrackers, check_session_id
from arag.serve.tool_service import served_tool_names


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_session_keeps_its_tracker():
    sessions = SessionTrackers(max_sessions=10, idle_s=60)
    sessions.get("a").mark("1#0")
    assert sessions.get("a").seen("1#0") and not sessions.get("b").seen("1#0")


def test_the_least_recently_used_session_goes_first():
    sessions = SessionTrackers(max_sessions=3, idle_s=60)
    for s in "abc":
        sessions.get(s).mark(s)
    sessions.get("a")  # a is now the most recent
    sessions.get("d").mark("d")
    assert len(sessions) == 3
    assert sessions.get("a").seen("a") and not sessions.get("b").seen("b")  # b was dropped (and is new again)


def test_idle_sessions_expire():
    clock = Clock()
    sessions = SessionTrackers(max_sessions=10, idle_s=60, clock=clock)
    sessions.get("old").mark("x")
    clock.now = 30
    sessions.get("recent").mark("y")
    clock.now = 61
    assert len(sessions) == 1
    assert not sessions.get("old").seen("x") and sessions.get("recent").seen("y")


def test_every_session_forgotten_is_reported_evicted_expired_or_dropped():
    clock = Clock()
    sessions = SessionTrackers(max_sessions=2, idle_s=60, clock=clock)
    forgotten = []
    sessions.on_forget = forgotten.append
    for s in "abc":  # c evicts a, the least recently used
        sessions.get(s)
    clock.now = 61  # b and c expire
    assert not sessions.touch("b") and len(sessions) == 0
    sessions.get("d")
    assert sessions.drop("d") and not sessions.drop("d")
    assert forgotten == ["a", "b", "c", "d"]


def test_thousands_of_sessions_stay_bounded():
    sessions = SessionTrackers(max_sessions=100, idle_s=3600)
    for i in range(5000):
        sessions.get(f"episode-{i}").mark("1#0")
    assert len(sessions) == 100


@pytest.mark.parametrize("bad", ["", "   ", "x" * 201, "a\nb", "tab\there"])
def test_bad_session_ids(bad):
    with pytest.raises(SessionIdError):
        check_session_id(bad)


def test_settings_are_checked_by_name():
    with pytest.raises(ValueError, match=r"unknown setting serve\.prot \(did you mean serve\.port\?\)"):
        ServeSettings.from_dict({"prot": 1})
    with pytest.raises(ValueError, match="serve.transport must be one of stdio, http"):
        ServeSettings.from_dict({"transport": "grpc"})
    with pytest.raises(ValueError, match=r"unknown setting tools\.nprobes \(did you mean tools\.nprobe\?\); valid keys of tools: "):
        tool_context_options({"nprobes": 4})
    assert tool_context_options({"nprobe": 4, "cache_dir": None}) == {"nprobe": 4}
    with pytest.raises(ValueError, match="unknown tool"):
        served_tool_names(["keyword_search", "web_search"])
    assert served_tool_names("arag_naive") == ("naive_embedding_search", "chunk_read")
    assert served_tool_names("chunk_read") == ("chunk_read",)


def test_the_token_comes_from_settings_a_file_or_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("ARAG_SERVE_TOKEN", "from-env")
    assert ServeSettings().resolved_token() == "from-env"
    assert ServeSettings(token="given").resolved_token() == "given"
    (tmp_path / "token").write_text("from-file\n")
    assert ServeSettings(token_file=str(tmp_path / "token")).resolved_token() == "from-file"
    assert ServeSettings(token="none").resolved_token() is None  # an open server, said explicitly
    monkeypatch.setenv("ARAG_SERVE_TOKEN", " ")
    with pytest.raises(ValueError, match="ARAG_SERVE_TOKEN is set but blank"):
        ServeSettings().resolved_token()
    monkeypatch.delenv("ARAG_SERVE_TOKEN")
    with pytest.raises(ValueError, match="the HTTP server needs a token"):
        ServeSettings().resolved_token()
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ValueError, match="is empty"):
        ServeSettings(token_file=str(tmp_path / "empty")).resolved_token()
    with pytest.raises(ValueError, match="allowed only on a loopback host"):
        ServeSettings(token="none", host="0.0.0.0").resolved_token()


@pytest.mark.parametrize("typed, text", [(1000.0, "1e3"), (True, "true"), (None, "null"), (7, "007")])
def test_a_typed_token_keeps_its_text(typed, text):
    from pipelines.serve import token_as_typed

    serve = token_as_typed({"token": typed}, ["index.path=x", f"serve.token={text}"])
    assert serve["token"] == text
    assert token_as_typed({"token": "quoted"}, ["serve.token='quoted'"])["token"] == "quoted"
    with pytest.raises(ValueError, match="serve.token must be text"):
        ServeSettings.from_dict({"token": typed if typed is not None else 1.5})


def test_settings_of_the_server_are_checked():
    for bad, message in [
        ({"max_document_settings": {"search_result": 5}}, "serve.max_document_settings: unknown document tool setting"),
        ({"max_document_settings": {"search_results": 0}}, "search_results must be a whole number >= 1"),
        ({"header_timeout_s": 0}, "serve.header_timeout_s must be a positive number"),
        ({"keep_alive_s": 1}, "serve.keep_alive_s must be at least 2 s"),
        ({"max_connections": True}, "serve.max_connections must be a whole number"),
        ({"preload": "yes"}, "serve.preload must be true or false"),
        ({"allowed_origins": "https://a.example"}, "serve.allowed_origins must be a list"),
    ]:
        with pytest.raises(ValueError, match=message):
            ServeSettings.from_dict(bad)
    settings = ServeSettings.from_dict({"host": "0.0.0.0", "allowed_origins": ["https://a.example"]})
    assert settings.origin_rule() == (None, ["https://a.example"])  # any Host off loopback; Origins only as allowed


def test_uvicorn_gets_the_connection_bounds():
    pytest.importorskip("uvicorn")
    from arag.serve.app import uvicorn_config

    config = uvicorn_config(lambda scope, receive, send: None, ServeSettings(max_connections=7, keep_alive_s=3, header_timeout_s=2))
    # Request slots are the guard's (after the token); uvicorn's cap would count stalled connections.
    assert config.limit_concurrency is None and config.timeout_keep_alive == 3 and config.h11_max_incomplete_event_size == 16 * 1024
    assert config.http.__name__.startswith("Bounded")


def test_sessions_are_bounded_in_bytes():
    from arag.tools.documents import DocumentLines

    def load(session, doc_id, lines=200):
        session.documents[doc_id] = DocumentLines(doc_id, "t", ["a sentence of some length, " * 4] * lines, [1] * lines, ["c"] * lines)

    sessions = SessionTrackers(max_sessions=100, idle_s=3600, session_bytes=200_000, total_bytes=400_000)
    heavy = sessions.get("heavy")
    load(heavy, "d1")
    sessions.settle("heavy")
    assert 30_000 < sessions.bytes < 200_000 and "d1" in heavy.documents
    for i in range(20):  # one session over its own limit: its loaded documents go first, the session stays
        load(heavy, f"d{i}")
    heavy.mark("1#0")
    sessions.settle("heavy")
    assert heavy.documents == {} and sessions.get("heavy").seen("1#0") and sessions.bytes < 10_000
    for name in ("a", "b", "c", "d"):  # all sessions together over the total: least recently used go first
        load(sessions.get(name), "d1", lines=600)
        sessions.settle(name)
    assert sessions.bytes <= 400_000 and len(sessions) < 5
    assert not sessions.get("heavy").seen("1#0")  # the oldest was forgotten


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "error: give the index to serve: index.path=<dir>"),
        (["index.path=/nonexistent/index", "serve.token=none"], "error: cannot open index: no index directory at /nonexistent/index"),
        (["index.path=.", "serve.transport=grpc"], "error: serve.transport must be one of stdio, http, got 'grpc'"),
        (["index.path=.", "serve.prot=1"], "unknown setting serve.prot (did you mean serve.port?)"),
    ],
)
def test_the_command_names_what_is_wrong(args, message):
    import subprocess
    import sys

    from tests.support.tool_server import REPO, server_env

    done = subprocess.run([sys.executable, "-m", "pipelines.serve", *args], cwd=REPO, env=server_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and message in done.stderr and "Traceback" not in done.stderr


def test_preload_loads_the_query_encoder_before_serving(served_index):
    from arag.serve.tool_service import ToolService
    from arag.tools import ToolContext

    with ToolContext(served_index.path) as ctx:
        assert ctx._encoder is None
        ToolService(ctx, sessions=SessionTrackers(), tools=("chunk_read",)).preload()
        assert ctx._encoder is None  # no served tool encodes queries
        service = ToolService(ctx, sessions=SessionTrackers(), tools=("keyword_search", "semantic_search"))
        service.preload()
        assert ctx._encoder is not None
        service.close()


def test_every_document_setting_has_a_ceiling_in_the_config():
    """The schema of serve.max_document_settings (arag.config.schemas.DocumentCeilings) names every
    document-tool setting that has a size (arag.config cannot import arag.tools: the names are spelled twice)."""
    from dataclasses import asdict, fields

    from arag.config.schemas import DocumentCeilings, ServeConfig
    from arag.tools import DocumentToolSettings

    listed = asdict(ServeConfig().max_document_settings)
    assert isinstance(ServeConfig().max_document_settings, DocumentCeilings)
    assert set(listed) == {f.name for f in fields(DocumentToolSettings) if f.type != "bool"}
    assert all(value is None for value in listed.values())  # the paper's values, from DocumentToolSettings



def test_the_client_drops_idle_connections_before_the_server_does(monkeypatch):
    """A served call that reuses a connection the server is closing fails ("server disconnected")
    and is not sent again: the client's keep-alive must end first, with room to spare."""
    import httpx

    from arag.serve import client as client_module
    from arag.serve.guard import CLIENT_KEEPALIVE_S

    built = {}
    real_client = httpx.Client

    def capturing_client(**kwargs):
        built.update(kwargs)
        index = {"fingerprint": "f", "tools": [], "chunk_ids": {"form": "<part>:<window>", "example": "0:1"}, "retrieved_tokens_tokenizer": "o200k_base", "result_format_params": ["snippets_per_chunk", "result_titles"]}
        return real_client(**{**kwargs, "transport": httpx.MockTransport(lambda request: httpx.Response(200, json=index))})

    monkeypatch.setattr(client_module.httpx, "Client", capturing_client)
    client_module.RemoteTools("http://127.0.0.1:9")
    assert built["limits"].keepalive_expiry == CLIENT_KEEPALIVE_S
    assert ServeSettings().keep_alive_s >= 2 * CLIENT_KEEPALIVE_S
    with pytest.raises(ValueError, match="keep_alive_s must be at least"):
        ServeSettings.from_dict({"keep_alive_s": CLIENT_KEEPALIVE_S})
