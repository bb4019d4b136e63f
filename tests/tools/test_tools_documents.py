"""AgenticRAG's document tools (search, find, open, summarize): limits, errors, reference ids, de-duplication."""

from __future__ import annotations

import re

import pytest

from arag.index.tokens import count_retrieved_tokens, count_tokens
from arag.tools import TOOLS, DocumentSession, DocumentToolSettings, ToolContext
from tests.support.tiny_index import Doc, fake_encode, make_index

# A "novel" of 3 chunks (7 lines) and short passages.
DOCS = [
    Doc("novel", "The Long Road", [["Anna left Kraków in May.", "She walked north.", "The river was high."], ["Anna met Tomasz at the ferry.", "Tomasz was a fisherman."], ["In June they reached Gdańsk.", "The sea was grey."]]),
    Doc("p1", "Tomasz Wrona", [["Tomasz Wrona was a fisherman from Gdańsk.", "He married Anna in 1901."]]),
    Doc("p2", "Kraków", [["Kraków is a city in Poland.", "It lies on the Vistula river."]], part=1),
    Doc("p3", "Ferry", [["A ferry crosses a river.", "Fishermen often run ferries."]], part=1),
]


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    built = make_index(tmp_path_factory.mktemp("docs") / "index", DOCS)
    with ToolContext(built.path, encoder=fake_encode, cache_dir=tmp_path_factory.mktemp("docs-cache")) as c:
        yield c


def search(ctx, session, *queries):
    result = ctx.call("search", {"queries": list(queries)}, tracker=session)
    assert result.error is None, result.error
    return result


def ref_of(session, doc_id):
    return next(r for r, ref in session.refs.items() if ref.doc_id == doc_id)


def test_search_ids_metadata_and_dedup(ctx):
    session = DocumentSession()
    first = search(ctx, session, "Anna and Tomasz", "Tomasz fisherman", "Tomasz fisherman")
    docs = first.details["documents"]
    assert len(docs) == len(set(docs)) and {"novel", "p1"} <= set(docs)  # merged over queries, once each
    assert first.details["ref_ids"] == [f"turn1search{n}" for n in range(1, len(docs) + 1)]
    assert "[turn1search1]" in first.text and "| lines 0-6" in first.text  # the novel's lines, as open and find number them
    assert session.refs[ref_of(session, "novel")].n_lines == 7 and session.refs[ref_of(session, "p1")].title == "Tomasz Wrona"
    assert all(h.snippets for h in first.results) and first.retrieved_tokens > 0
    second = search(ctx, session, "Kraków")
    assert second.details["ref_ids"] and all(r.startswith("turn2search") for r in second.details["ref_ids"])  # the per-episode counter
    assert len(session.refs) == len(docs) + len(second.details["ref_ids"])


def test_search_names_the_line_its_snippet_starts_at_and_open_starts_there(ctx):
    """The 1.5B model copied the last number of a result's header into open (the range's end) and
    read the novel's last line; the header now ends with the snippet's own line."""
    session = DocumentSession()
    r = search(ctx, session, "Gdańsk")
    for ref_id, hit, start in zip(r.details["ref_ids"], r.results, r.details["snippet_lines"]):
        assert f"[{ref_id}] | title: {hit.title} | document: {hit.doc_id} | lines 0-{session.refs[ref_id].n_lines - 1} | snippet at line {start}\n" in r.text
        opened = ctx.call("open", {"ref_id": ref_id, "line": start}, tracker=session)
        assert opened.text.splitlines()[1] == f"{start}: {hit.snippets[0]}"
    novel = r.details["documents"].index("novel")
    assert r.details["snippet_lines"][novel] == 5  # "In June they reached Gdańsk." is the novel's line 5


def test_search_returns_up_to_n_documents_per_query(ctx):
    """As the paper's tool: each query brings its own top `search_results`; the call returns their union."""
    queries = ("Kraków is a city in Poland", "A ferry crosses a river", "Tomasz Wrona was a fisherman from Gdańsk")
    alone = [search(ctx, DocumentSession(settings=DocumentToolSettings(search_results=1)), q).details["documents"] for q in queries]
    assert all(len(docs) == 1 for docs in alone) and len({d for docs in alone for d in docs}) == 3  # each query finds another document
    together = search(ctx, DocumentSession(settings=DocumentToolSettings(search_results=1)), *queries)
    assert sorted(together.details["documents"]) == sorted(d for docs in alone for d in docs)  # 3 documents, not 1 for the call
    assert together.details["ref_ids"] == ["turn1search1", "turn1search2", "turn1search3"]
    # A document two queries find appears once.
    twice = search(ctx, DocumentSession(settings=DocumentToolSettings(search_results=1)), queries[0], queries[0] + " on the Vistula")
    assert twice.details["documents"] == alone[0]


def test_search_limits(ctx):
    session = DocumentSession(settings=DocumentToolSettings(search_results=2))
    assert len(search(ctx, session, "river").results) == 2
    for bad, msg in (([], "empty"), (["a"] * 6, "at most 5"), ("Anna", "not a single string"), ([3], "must be a string"), ([" "], "blank")):
        r = ctx.call("search", {"queries": bad}, tracker=session)
        assert r.error and msg in r.error and r.results == []
    one = DocumentSession(settings=DocumentToolSettings(max_queries=1))
    assert "at most 1" in ctx.call("search", {"queries": ["a", "b"]}, tracker=one).error
    assert session.searches == 1  # failed calls hand out no ids


def test_open_window_and_range(ctx):
    session = DocumentSession(settings=DocumentToolSettings(open_window_lines=3))
    search(ctx, session, "Anna Kraków")
    ref = ref_of(session, "novel")
    r = ctx.call("open", {"ref_id": ref}, tracker=session)
    assert r.text.splitlines()[0].endswith("Viewing lines [0–2] of 7")
    assert "0: Anna left Kraków in May." in r.text and "3: " not in r.text and "open with line=3" in r.text
    tail = ctx.call("open", {"ref_id": ref, "line": 5}, tracker=session)
    assert "Viewing lines [5–6] of 7" in tail.text and "6: The sea was grey." in tail.text and "follow" not in tail.text
    for line in (7, -1, 10**30):
        err = ctx.call("open", {"ref_id": ref, "line": line}, tracker=session).error
        assert err and "out of range" in err and "0–6" in err
    assert "whole number" in ctx.call("open", {"ref_id": ref, "line": 1.5}, tracker=session).error
    assert "unknown reference id" in ctx.call("open", {"ref_id": "turn9search9"}, tracker=session).error


def test_open_window_keeps_the_per_call_token_budget(ctx):
    """A line is a sentence, so the window also ends at `open_max_tokens` (paper: ~11k per call)."""
    novel = [s for chunk in DOCS[0].chunks for s in chunk]
    budget = count_tokens(novel[0]) + count_tokens(novel[1])  # room for exactly two lines
    session = DocumentSession(settings=DocumentToolSettings(open_max_tokens=budget))
    search(ctx, session, "Anna Kraków")
    ref = ref_of(session, "novel")
    r = ctx.call("open", {"ref_id": ref}, tracker=session)
    assert r.text.splitlines()[0].endswith("Viewing lines [0–1] of 7") and "open with line=2" in r.text
    assert r.retrieved_tokens == count_retrieved_tokens(novel[0]) + count_retrieved_tokens(novel[1])  # the cap counts cl100k_base, retrieved tokens o200k_base
    # The line to continue from reads on; a budget smaller than one line still shows that line whole.
    tiny = DocumentSession(settings=DocumentToolSettings(open_max_tokens=1))
    search(ctx, tiny, "Anna Kraków")
    r = ctx.call("open", {"ref_id": ref_of(tiny, "novel"), "line": 2}, tracker=tiny)
    assert "Viewing lines [2–2] of 7" in r.text and "2: The river was high." in r.text and "open with line=3" in r.text
    assert DocumentToolSettings().open_max_tokens == 11_000 and DocumentToolSettings().search_results == 10  # the paper's


def test_find_lexical_semantic_dedup_and_cap(ctx):
    session = DocumentSession()
    search(ctx, session, "Anna Kraków")
    ref = ref_of(session, "novel")
    r = ctx.call("find", {"ref_id": ref, "patterns": ["ANNA", "anna", "zebra"]}, tracker=session)
    # "Anna" is on lines 0 and 3: two passages for the first pattern, none repeated for the second.
    assert r.error is None and len(re.findall(r"^match for", r.text, re.M)) == 2
    assert "at line 0" in r.text and "at line 3" in r.text and "no match for 'zebra'" in r.text
    assert r.details["ref_ids"] == [ref] and {h.doc_id for h in r.results} == {"novel"}
    many = ctx.call("find", {"ref_id": ref, "patterns": ["a"]}, tracker=session)  # matches every line
    assert len(many.results) == 2  # at most 2 passages per pattern
    sem = ctx.call("find", {"ref_id": ref, "patterns": ["They reached Gdańsk in June"], "mode": "semantic"}, tracker=session)
    assert sem.error is None and "at line 5" in sem.text.split("\n\n")[1]
    capped_session = DocumentSession(settings=DocumentToolSettings(find_max_tokens=12))
    search(ctx, capped_session, "Anna Kraków")
    capped = ctx.call("find", {"ref_id": ref_of(capped_session, "novel"), "patterns": ["Anna", "sea"]}, tracker=capped_session)
    shown = [s for h in capped.results for s in h.snippets]
    assert sum(map(count_tokens, shown)) <= 12 and capped.retrieved_tokens == sum(map(count_retrieved_tokens, shown)) and "left out" in capped.text and capped.details["left_out"] >= 1


def test_find_errors_and_no_semantic(ctx):
    session = DocumentSession(settings=DocumentToolSettings(semantic_find=False))
    search(ctx, session, "Anna")
    ref = next(iter(session.refs))
    assert "mode must be one of 'lexical'" in ctx.call("find", {"ref_id": ref, "patterns": ["x"], "mode": "semantic"}, tracker=session).error
    assert "unknown reference id" in ctx.call("find", {"ref_id": "turn1search99", "patterns": ["x"]}, tracker=session).error
    assert "empty" in ctx.call("find", {"ref_id": ref, "patterns": []}, tracker=session).error
    assert "at most 10" in ctx.call("find", {"ref_id": ref, "patterns": ["x"] * 11}, tracker=session).error


def test_summarize_checks_ids(ctx):
    session = DocumentSession()
    search(ctx, session, "Anna")
    ok = ctx.call("summarize", {"notes": "Anna married Tomasz in 1901.", "keep_ref_ids": ["turn1search1", "turn1search1"]}, tracker=session)
    assert ok.error is None and ok.details["keep_ref_ids"] == ["turn1search1"] and "1901" in ok.text
    assert "unknown reference id" in ctx.call("summarize", {"notes": "", "keep_ref_ids": ["turn5search1"]}, tracker=session).error
    assert "must be a list" in ctx.call("summarize", {"notes": "", "keep_ref_ids": "turn1search1"}, tracker=session).error


def test_list_arguments_share_one_validator(ctx):
    """search's queries, find's patterns, keyword_search's keywords and chunk_read's chunk_ids: the
    same checks, each message naming the argument or its numbered item."""
    session = DocumentSession()
    ref = search(ctx, session, "river").details["ref_ids"][0]
    calls = {
        "queries": ("search", {}, "query"),
        "patterns": ("find", {"ref_id": ref}, "pattern"),
        "keywords": ("keyword_search", {}, "keyword"),
        "chunk_ids": ("chunk_read", {}, "chunk id"),
    }
    for key, (tool, base, noun) in calls.items():
        def error(value):
            return ctx.call(tool, {**base, key: value}, tracker=session).error

        assert error("Anna").startswith(f"{key} must be a list of strings, e.g. [") and error("Anna").endswith("not a single string")
        assert error(7) == f"{key} must be a list of strings, got integer"
        assert error([]) == f"{key} is empty; give at least one {noun}"
        assert error(["a"] * 101).startswith(f"too many {key} (101); give at most ")
        assert error(["a", 3]) == f"{noun} 2 must be a string, got integer"
        assert error(["a", " "]) == f"{noun} 2 is empty or blank; every {noun} needs visible characters"
        assert error(["a", "x" * 5000]).startswith(f"{noun} 2 is 5000 characters long; {key} are at most ")


def _string_slots(schema: dict, path: str = ""):
    """(path, schema) of every free string (no enum) and every array in a parameter schema."""
    if schema.get("type") == "string" and "enum" not in schema:
        yield path, schema
    if schema.get("type") == "array":
        yield path, schema
        yield from _string_slots(schema.get("items", {}), path + "[]")
    for key, sub in schema.get("properties", {}).items():
        yield from _string_slots(sub, f"{path}.{key}" if path else key)


def test_every_tool_schema_states_the_limits_its_tool_enforces(ctx):
    """A grammar-constrained model (llama.cpp, vLLM) writes only what the schema allows: with no bound,
    the 1.5B model grew its fifth search query clause by clause until the reply limit cut the call,
    and wrote that same cut call at every step of a Novel episode. Every free string has maxLength and
    every list maxItems; one character or item more is what the tool itself refuses."""
    for name, spec in TOOLS.items():
        for path, slot in _string_slots(spec.parameters):
            if (name, path) == ("summarize", "notes"):
                continue  # free text up to 16,000 characters: too deep for llama.cpp's grammar parser (arag.llm.llamacpp)
            bound = "maxItems" if slot["type"] == "array" else "maxLength"
            assert isinstance(slot.get(bound), int) and slot[bound] > 0, f"{name}: {path} has no {bound}"
    session = DocumentSession()
    ref = search(ctx, session, "river").details["ref_ids"][0]
    over = {
        ("search", "queries"): lambda n: {"queries": ["r" * n]},
        ("find", "patterns"): lambda n: {"ref_id": ref, "patterns": ["r" * n]},
        ("keyword_search", "keywords"): lambda n: {"keywords": ["r" * n]},
        ("semantic_search", "query"): lambda n: {"query": "r" * n},
    }
    for (tool, key), args in over.items():
        slot = TOOLS[tool].parameters["properties"][key]
        limit = (slot.get("items") or slot)["maxLength"]
        assert ctx.call(tool, args(limit), tracker=session).error is None, (tool, limit)
        error = ctx.call(tool, args(limit + 1), tracker=session).error
        assert error and f"{limit + 1} characters long" in error and str(limit) in error, (tool, error)
    # a search query is a phrase or a short question: far below a semantic_search query's bound
    assert TOOLS["search"].parameters["properties"]["queries"]["items"]["maxLength"] == 300
