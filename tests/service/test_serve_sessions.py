"""Per-session read trackers stay bounded: least recently used sessions and idle ones are dropped."""

from __future__ import annotations

import pytest

from arag.service.app import ServeSettings, tool_context_options
from arag.service.sessions import SessionIdError, SessionTrackers, check_session_id
from arag.service.tool_service import served_tool_names


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
    with pytest.raises(ValueError, match="serve.prot"):
        ServeSettings.from_dict({"prot": 1})
    with pytest.raises(ValueError, match="serve.transport must be one of stdio, http"):
        ServeSettings.from_dict({"transport": "grpc"})
    with pytest.raises(ValueError, match="tools.nprobes; tools takes"):
        tool_context_options({"nprobes": 4})
    assert tool_context_options({"nprobe": 4, "cache_dir": None}) == {"nprobe": 4}
    with pytest.raises(ValueError, match="unknown tool"):
        served_tool_names(["keyword_search", "web_search"])
    assert served_tool_names("arag_naive") == ("naive_embedding_search", "chunk_read")
    assert served_tool_names("chunk_read") == ("chunk_read",)


def test_the_token_comes_from_settings_or_environment(monkeypatch):
    monkeypatch.setenv("ARAG_SERVE_TOKEN", "from-env")
    assert ServeSettings().resolved_token() == "from-env"
    assert ServeSettings(token="given").resolved_token() == "given"
    monkeypatch.setenv("ARAG_SERVE_TOKEN", " ")
    assert ServeSettings().resolved_token() is None


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "error: give the index to serve: index.path=<dir>"),
        (["index.path=/nonexistent/index"], "error: cannot open index: no index directory at /nonexistent/index"),
        (["index.path=.", "serve.transport=grpc"], "error: serve.transport must be one of stdio, http, got 'grpc'"),
        (["index.path=.", "serve.prot=1"], "Could not override 'serve.prot'"),
    ],
)
def test_the_command_names_what_is_wrong(args, message):
    import subprocess
    import sys

    from tests.service.conftest import REPO, server_env

    done = subprocess.run([sys.executable, "-m", "pipelines.serve", *args], cwd=REPO, env=server_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and message in done.stderr and "Traceback" not in done.stderr
