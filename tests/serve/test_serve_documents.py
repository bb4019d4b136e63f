"""AgenticRAG over a served index: search's reference ids live in the server's session, so find,
open and summarize of later calls resolve them, and an episode through RemoteTools equals the same
episode over the local index (the method's settings travel with the calls)."""

from __future__ import annotations

import pytest

pytest.importorskip("mcp", reason="the tool server needs the serve extra: pip install -e '.[serve]'")

import httpx

from arag.agent import ANSWERED, Agent, AgentConfig
from arag.llm.scripted import ScriptedBackend
from arag.methods import load_method
from arag.serve.client import RemoteTools
from arag.tools import DocumentSession, DocumentToolSettings

FAST = dict(backoff_initial_s=0.0, backoff_max_s=0.0, backoff_jitter_s=0.0)
SCRIPT = [
    {"tool": "search", "arguments": {"queries": ["Lothair II mother", "Ermengarde"]}},
    {"tool": "find", "arguments": {"ref_id": "turn1search1", "patterns": ["mother", "died"]}},
    {"tool": "open", "arguments": {"ref_id": "turn1search1", "line": 1}},
    {"tool": "search", "arguments": {"queries": ["Teutberga queen"]}},
    {"tool": "open", "arguments": {"ref_id": "turn2search1"}},
    {"tool": "find", "arguments": {"ref_id": "turn7search1", "patterns": ["x"]}},  # never handed out
    {"tool": "summarize", "arguments": {"notes": "Lothair II's mother: Ermengarde of Tours.", "keep_ref_ids": ["turn1search1"]}},
    {"answer": "Ermengarde of Tours\nCitations: turn1search1 (0.9), turn2search1 (0.2)"},
]


def episode(ctx, overrides=None):
    backend = ScriptedBackend(SCRIPT)
    agent = Agent(backend, load_method("agenticrag", overrides), ctx, protocol="json", config=AgentConfig(max_steps=12, **FAST))
    return agent.run("Who was the mother of Lothair II?")


@pytest.mark.parametrize("overrides", [None, {"open_window_lines": 1, "search_results": 2}])
def test_search_find_open_over_a_served_index_as_locally(http_server, local_ctx, overrides):
    with RemoteTools(http_server.url) as remote:
        served = episode(remote, overrides)
    local = episode(local_ctx, overrides)
    assert served.status == local.status == ANSWERED
    calls = [(c.name, c.text, c.error, c.chunk_ids, c.ref_ids, c.retrieved_tokens) for c in served.tool_calls]
    assert calls == [(c.name, c.text, c.error, c.chunk_ids, c.ref_ids, c.retrieved_tokens) for c in local.tool_calls]
    errors = [c.name for c in served.tool_calls if c.error]
    assert errors == ["find"] and "unknown reference id 'turn7search1'" in served.tool_calls[5].error  # only the id never handed out
    assert served.tool_calls[2].text.startswith("[turn1search1]") and "Viewing lines [1–" in served.tool_calls[2].text
    assert served.tool_calls[4].text.startswith("[turn2search1]")
    assert served.citations == local.citations and served.citations[0]["doc_id"] is not None  # the client's session knows the ids
    if overrides:  # the method's settings reached the server's session
        assert "Viewing lines [1–1]" in served.tool_calls[2].text
        assert len(served.tool_calls[0].ref_ids) == 3  # up to 2 documents for each of its 2 queries, merged


def test_document_settings_header_is_checked(http_server):
    url = f"{http_server.url}/tools/search"
    bad = httpx.post(url, json={"queries": ["x"]}, headers={"X-Session-Id": "s1", "X-Document-Settings": '{"max_querys": 2}'})
    assert bad.status_code == 400 and "unknown document tool setting(s) max_querys" in bad.json()["error"]
    zero = httpx.post(url, json={"queries": ["x"]}, headers={"X-Document-Settings": '{"search_results": 0}'})
    assert zero.status_code == 400 and "search_results must be a whole number >= 1" in zero.json()["error"]


def test_a_reset_session_forgets_the_served_references(http_server):
    session = DocumentSession(settings=DocumentToolSettings(search_results=1))
    with RemoteTools(http_server.url) as remote:
        first = remote.call("search", {"queries": ["Phoolwari"]}, tracker=session)
        assert first.details["ref_ids"] == ["turn1search1"] and list(session.refs) == ["turn1search1"]
        assert remote.call("open", {"ref_id": "turn1search1"}, tracker=session).error is None
        session.reset()
        again = remote.call("open", {"ref_id": "turn1search1"}, tracker=session)
        assert again.error and "call search first" in again.error
