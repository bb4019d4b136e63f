"""What the llamacpp backend compiles to a grammar (no model needed)."""

from __future__ import annotations

from arag.llm.llamacpp import GRAMMAR_MAX_STRING_BOUND, grammar_schema
from arag.methods import load_method


def test_grammar_schema_drops_only_string_bounds_llama_cpp_cannot_parse():
    schema = {
        "type": "object",
        "properties": {
            "queries": {"type": "array", "items": {"type": "string", "maxLength": 300}, "maxItems": 5},
            "notes": {"type": "string", "maxLength": 16000, "minLength": 2000},
            "maxLength": {"type": "string", "maxLength": GRAMMAR_MAX_STRING_BOUND},  # a property so named stays
        },
    }
    out = grammar_schema(schema)
    assert out["properties"]["queries"] == schema["properties"]["queries"]
    assert out["properties"]["notes"] == {"type": "string"}
    assert out["properties"]["maxLength"] == {"type": "string", "maxLength": GRAMMAR_MAX_STRING_BOUND}
    assert schema["properties"]["notes"]["maxLength"] == 16000  # the tool's own schema is untouched


def test_the_search_query_bound_reaches_the_grammar_and_the_notes_bound_does_not():
    from arag.agent.protocols import JsonProtocol

    agentic, arag = (str(grammar_schema(JsonProtocol().request(load_method(m).tool_schemas())["response_schema"])) for m in ("agenticrag", "arag_full"))
    assert "'maxLength': 300" in agentic  # search queries
    assert "'maxLength': 200" in arag and "'maxLength': 1000" in arag  # keywords; semantic queries and chunk ids


def test_a_forced_summarize_grammar_can_only_keep_ids_still_shown():
    """At a full context the grammar lists the shown reference ids: the model cannot invent one."""
    import json

    import pytest

    from arag.agent.context import forced_summarize_schema
    from arag.agent.protocols import JsonProtocol

    llama_grammar = pytest.importorskip("llama_cpp.llama_grammar")
    summarize = [s for s in load_method("agenticrag").tool_schemas() if s["function"]["name"] == "summarize"]
    for shown in (["turn1search1", "turn2open1"], []):
        schema = grammar_schema(JsonProtocol().request([forced_summarize_schema(summarize[0], shown)], allow_answer=False)["response_schema"])
        gbnf = llama_grammar.json_schema_to_gbnf(json.dumps(schema))
        assert all(f'\\"{r}\\"' in gbnf for r in shown) and "turn3search1" not in gbnf
        llama_grammar.LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)  # compiles
