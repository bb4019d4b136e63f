"""A tool's refusal of its arguments is the model's to read; a tool that fails on its own (a bug,
a broken index, a lost worker) fails the episode with the cause, which the model never reads."""

from __future__ import annotations

import dataclasses

import pytest

from arag.agent import Agent, AgentConfig
from arag.llm.scripted import ScriptedBackend
from arag.methods import load_method
from arag.tools.registry import TOOLS

FAST = {"backoff_initial_s": 0.0, "backoff_max_s": 0.0, "backoff_jitter_s": 0.0}


@pytest.fixture
def broken_keyword_search(monkeypatch):
    """keyword_search whose index reads fail (a file gone under the running index, say)."""

    def broken(ctx, args, options):
        args["keywords"]  # bad arguments are still refused as such
        raise OSError("chunks part 0 is gone")

    monkeypatch.setitem(TOOLS.held, "keyword_search", dataclasses.replace(TOOLS["keyword_search"], fn=broken))


def test_a_tool_failing_on_its_own_fails_the_episode(agent_ctx, broken_keyword_search):
    script = [
        {"tool": "keyword_search", "arguments": {"keywords": "Lothair"}},  # refused: the model reads why
        {"tool": "keyword_search", "arguments": {"keywords": ["Lothair"]}},  # fails on its own
        {"answer": "20 March 851"},
    ]
    backend = ScriptedBackend(script)
    episode = Agent(backend, load_method("arag_full"), agent_ctx, protocol="json", config=AgentConfig(max_steps=5, **FAST)).run("When did Lothair II's mother die?")
    assert episode.status == "failed" and episode.answer is None and not episode.forced
    assert episode.failure == "step 2: the keyword_search call failed: keyword_search failed on its own: internal error (OSError: chunks part 0 is gone)"
    assert [c.error is not None for c in episode.tool_calls] == [True, True] and episode.tool_calls[1].text == ""
    assert [c.failure for c in episode.tool_calls] == ["refused", "infrastructure"]  # the model's doing, and not
    shown = "\n".join(m["content"] or "" for m in episode.messages)
    assert "keywords must be a list of strings" in shown and "chunks part 0 is gone" not in shown
    assert len(backend.requests) == 2  # no model call after the failure


def test_a_tool_that_raises_fails_the_episode(agent_ctx):
    class Raises(type(load_method("arag_full"))):
        def call_tool(self, ctx, name, arguments, tracker):
            raise RuntimeError("the tool worker pool is closed")

    method = load_method("arag_full")
    method.__class__ = Raises
    episode = Agent(ScriptedBackend([{"tool": "keyword_search", "arguments": {"keywords": ["x"]}}, {"answer": "x"}]), method, agent_ctx, config=AgentConfig(max_steps=3, **FAST)).run("q?")
    assert episode.status == "failed" and episode.failure == "step 1: the keyword_search call failed: RuntimeError: the tool worker pool is closed"


def test_naive_rags_retrieval_failing_on_its_own_fails_the_episode(agent_ctx, monkeypatch):
    def broken(ctx, args, options):
        raise OSError("vectors gone")

    monkeypatch.setitem(TOOLS.held, "naive_embedding_search", dataclasses.replace(TOOLS["naive_embedding_search"], fn=broken))
    backend = ScriptedBackend([{"answer": "x"}])
    episode = Agent(backend, load_method("naive_rag"), agent_ctx, config=AgentConfig(**FAST)).run("q?")
    assert episode.status == "failed" and "naive_embedding_search failed on its own: internal error (OSError: vectors gone)" in episode.failure
    assert not backend.requests  # the model never answered from an error text pasted as its context
