"""Property test: 500 random arguments to each tool (A-RAG's and AgenticRAG's); none may raise."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arag.tools import TOOLS, DocumentSession, DocumentToolSettings, ReadTracker, ToolResult

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(["%", "_", "'; DROP TABLE chunks; --", "\\", "'", '"', "0#0", "1#2", "\x00", "\ud800", "İ", "ς", "x" * 5000]),
)
json_values = st.recursive(json_scalars, lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=8), inner, max_size=4)), max_leaves=12)
known_keys = st.sampled_from(["keywords", "top_k", "query", "chunk_ids", "queries", "ref_id", "patterns", "mode", "line", "notes", "keep_ref_ids"])
ref_ids = st.one_of(st.sampled_from(["turn1search1", "turn1search2", "turn2search1", "turn1search99"]), json_scalars)
arguments = st.one_of(
    st.dictionaries(st.one_of(known_keys, st.text(max_size=10)), json_values, max_size=4),
    st.fixed_dictionaries({"keywords": st.lists(st.one_of(st.text(max_size=20), json_scalars), max_size=6)}, optional={"top_k": json_scalars}),
    st.fixed_dictionaries({"query": st.one_of(st.text(max_size=60), json_scalars)}, optional={"top_k": json_scalars}),
    st.fixed_dictionaries({"chunk_ids": st.lists(st.one_of(st.text(max_size=12), json_scalars), max_size=6)}),
    st.fixed_dictionaries({"queries": st.lists(st.one_of(st.text(max_size=30), json_scalars), max_size=7)}),
    st.fixed_dictionaries({"ref_id": ref_ids, "patterns": st.lists(st.one_of(st.text(max_size=20), json_scalars), max_size=4)}, optional={"mode": st.one_of(st.sampled_from(["lexical", "semantic"]), json_scalars)}),
    st.fixed_dictionaries({"ref_id": ref_ids}, optional={"line": st.one_of(st.integers(min_value=-5, max_value=40), json_scalars)}),
    st.fixed_dictionaries({"notes": st.one_of(st.text(max_size=40), json_scalars), "keep_ref_ids": st.lists(ref_ids, max_size=3)}),
    json_values,
    st.text(max_size=40),  # raw (often invalid) JSON text
)


def episode_state(edge_ctx, tool: str, semantic_find: bool) -> ReadTracker:
    """A-RAG tools get a ReadTracker; the document tools a session whose first searches gave ids."""
    if tool not in ("search", "find", "open", "summarize"):
        return ReadTracker()
    session = DocumentSession(settings=DocumentToolSettings(open_window_lines=3, find_max_tokens=40, semantic_find=semantic_find))
    edge_ctx.call("search", {"queries": ["Lothair II", "tie"]}, tracker=session)
    edge_ctx.call("search", {"queries": ["café"]}, tracker=session)
    return session


@pytest.mark.parametrize("tool", sorted(TOOLS))
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(args=arguments, full_text=st.booleans())
def test_no_tool_call_raises(edge_ctx, tool, args, full_text):
    result = edge_ctx.call(tool, args, tracker=episode_state(edge_ctx, tool, semantic_find=full_text), full_text=full_text)
    assert isinstance(result, ToolResult)
    assert isinstance(result.text, str) and result.text
    assert "internal error" not in (result.error or ""), (result.error, result.details.get("traceback"))
    if result.error:
        assert result.results == [] and result.retrieved_tokens == 0
    else:
        assert result.retrieved_tokens >= 0
        assert all(isinstance(h.chunk_id, str) for h in result.results)
    result.to_json()
