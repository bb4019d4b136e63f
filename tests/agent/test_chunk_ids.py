"""Chunk ids as the model is told them, and the guard rail that keeps chunk_read to shown ids.

The prompts and tool texts show the form of the opened index's ids and a real id of it (packed
`<part>:<window>`, per-document `<document>#<n>`), never a fixed pattern of their own; the texts
that go into the run id are the filled ones. `shown_chunk_ids_only` (JSON protocol) lets chunk_read
name only ids the episode was shown, as the forced summarize does for reference ids."""

from __future__ import annotations

import dataclasses
import json
import re

import jsonschema
import pytest
import yaml

from arag.agent import Agent, AgentConfig
from arag.agent.loop import GuardRails
from arag.config.files import conf_dir
from arag.evaluation.run_settings import RunSettings
from arag.llm.scripted import ScriptedBackend
from arag.methods import METHOD_CONF_DIR, available_methods, load_method
from arag.tools import TOOLS, tool_schemas
from tests.support.tiny_index import fake_encode, make_packed_index

FAST = {"llm_attempts": 1, "backoff_initial_s": 0.0, "backoff_max_s": 0.0, "backoff_jitter_s": 0.0}
AGENTS = ["arag_full", "arag_naive", "arag_no_keyword", "arag_no_semantic", "arag_no_chunk_read"]
# A fixed chunk id in a text: a per-document one ("Lothair II#0", "12#0", "<document>#<n>") or a
# packed one ("0:27", "<part>:<window>").
FIXED_ID = re.compile(r"\w#\d|#<\w+>|<\w+>:<\w+>|(?<![\w.])\d+:\d+\b")  # not an address's host:port
LOTHAIR = " ".join(f"Lothair II did thing number {i} in the year {850 + i}." for i in range(12))
PACKED_DOCS = [
    {"doc_id": "s0", "title": "Ermengarde of Tours", "text": "Ermengarde of Tours was a Frankish noblewoman. She died on 20 March 851."},
    {"doc_id": "lothair", "title": "Lothair II", "text": LOTHAIR},
    {"doc_id": "s1", "title": "Teutberga", "text": "Teutberga was a queen of Lotharingia. She died in 875."},
]


@pytest.fixture(scope="module")
def packed_ctx(tmp_path_factory):
    from arag.tools import ToolContext

    root = make_packed_index(tmp_path_factory.mktemp("packed-ids") / "index", PACKED_DOCS, chunk_tokens=40, chunk_overlap=10)
    with ToolContext(root, encoder=fake_encode) as ctx:
        yield ctx


def seen_by_model(method: str, ctx) -> str:
    """The system prompt and every tool text of a method bound to the index, as the agent sends them."""
    m = load_method(method).for_index(ctx.chunk_ids)
    return m.system_text + "\n" + json.dumps(m.tool_schemas(), ensure_ascii=False)


def chunk_read_schema(schema: dict) -> dict | None:
    """The chunk_read branch of a JSON action schema, if offered."""
    branches = schema.get("oneOf", [schema])
    return next((b for b in branches if b.get("properties", {}).get("tool", {}).get("const") == "chunk_read"), None)


def action(tool: str, **arguments) -> dict:
    return {"tool": tool, "arguments": arguments}


# ---- the id form and example come from the index ---------------------------------------------------


def test_a_packed_index_describes_its_part_window_ids_with_a_real_one(packed_ctx):
    ids = packed_ctx.chunk_ids
    assert ids.form == "<part>:<window>" and re.fullmatch(r"\d+:\d+", ids.example)
    assert ids.example != "0:0" or packed_ctx.index.manifest["num_chunks"] == 1  # the middle chunk, not a degenerate first one
    read = packed_ctx.call("chunk_read", {"chunk_ids": [ids.example]})
    assert read.error is None and not read.details.get("unknown_ids")  # a real id of this index
    for method in AGENTS:
        text = seen_by_model(method, packed_ctx)
        assert f'"{ids.example}"' in text and "<part>:<window>" in text, method
        assert "#" not in text and "{chunk_id" not in text, method
    description = tool_schemas(["chunk_read"], ids)[0]["function"]["description"]
    assert f'for example "{ids.example}"' in description and "#" not in description


def test_a_per_document_index_describes_its_document_n_ids_with_a_real_one(agent_ctx):
    ids = agent_ctx.chunk_ids
    assert ids.form == "<document>#<n>" and re.fullmatch(r".+#\d+", ids.example)
    assert agent_ctx.chunk_ids == agent_ctx.index.chunk_ids  # deterministic: the same index, the same id
    read = agent_ctx.call("chunk_read", {"chunk_ids": [ids.example]})
    assert read.error is None and not read.details.get("unknown_ids")
    for method in AGENTS:
        text = seen_by_model(method, agent_ctx)
        assert f'"{ids.example}"' in text and "<document>#<n>" in text and ":<window>" not in text, method


def test_the_agent_sends_the_filled_texts(packed_ctx):
    backend = ScriptedBackend([{"answer": "x"}])
    Agent(backend, load_method("arag_full"), packed_ctx, protocol="json", config=AgentConfig(max_steps=2, **FAST)).run("q?")
    system = backend.requests[0].messages[0].content
    assert f'"{packed_ctx.chunk_ids.example}"' in system and "{chunk_id" not in system
    assert "{chunk_id" not in json.dumps(backend.requests[0].response_schema)


def test_no_fixed_chunk_id_example_in_conf_or_in_the_tool_texts():
    """The id form and example come from the index only: no config file, method text or tool text
    (descriptions and parameter schemas, which the tool server lists too) spells one of its own. The
    smoke run's scripted model is the exception: its script reads one known chunk of the 2Wiki index,
    an action it replays, not a text any model reads."""
    found = [
        f"{path.relative_to(conf_dir())}: {m}"
        for path in sorted(conf_dir().rglob("*.yaml")) if path.relative_to(conf_dir()).parts[0] != "smoke"
        for m in FIXED_ID.findall(path.read_text())
    ]
    assert not found, found
    for name, spec in TOOLS.items():
        text = json.dumps(spec.schema(), ensure_ascii=False)
        assert not FIXED_ID.search(text), (name, FIXED_ID.findall(text))
    for method in available_methods():
        texts = json.dumps(load_method(method).texts(), ensure_ascii=False)
        assert not FIXED_ID.search(texts), (method, FIXED_ID.findall(texts))


def test_a_chunk_id_given_as_one_string_is_refused_with_that_string_as_the_example(packed_ctx):
    got = packed_ctx.call("chunk_read", {"chunk_ids": "0:1"})
    assert got.error == 'chunk_ids must be a list of strings, e.g. ["0:1"], not a single string'


# ---- what goes into the run id ---------------------------------------------------------------------


def run_settings(ctx, method: str = "arag_full", rails: dict | None = None, chunk_ids: dict | None = None) -> RunSettings:
    return RunSettings(
        dataset="bench",
        method=yaml.safe_load((METHOD_CONF_DIR / f"{method}.yaml").read_text()),
        model={"backend": "scripted", "protocol": "json", "model": "scripted", "script": [{"answer": "x"}]},
        agent={"max_steps": 2, **FAST, "guard_rails": rails or {}},
        judge={"name": "strict"},
        judge_model=None,
        questions_path="/q.jsonl",
        questions_sha256="0" * 64,
        index_path=str(ctx.index.root),
        index_build_fingerprint="fp",
        chunk_ids=chunk_ids if chunk_ids is not None else ctx.chunk_ids.to_json(),
    )


def test_the_run_id_holds_the_texts_the_model_reads(packed_ctx, agent_ctx):
    settings = run_settings(packed_ctx)
    texts = settings.identity()["texts"]
    backend = ScriptedBackend([{"answer": "x"}])
    agent = Agent(backend, load_method("arag_full"), packed_ctx, protocol="json", config=AgentConfig(max_steps=2, **FAST))
    agent.run("q?")
    assert texts["tools"] == agent.tool_schemas
    assert backend.requests[0].messages[0].content == texts["method"]["system"] + "\n\n" + texts["actions"]
    assert f'"{packed_ctx.chunk_ids.example}"' in texts["method"]["system"]
    # Another index's ids are other texts, so another run id.
    assert run_settings(packed_ctx, chunk_ids=agent_ctx.chunk_ids.to_json()).run_id != settings.run_id


def test_the_runner_refuses_an_index_whose_ids_are_not_the_run_s(packed_ctx, agent_ctx):
    from arag.evaluation.runner import EpisodeRunner

    settings = run_settings(packed_ctx, chunk_ids=agent_ctx.chunk_ids.to_json())
    with pytest.raises(ValueError, match="not those the run was set up with"):
        EpisodeRunner(settings, backend=ScriptedBackend([]), ctx=packed_ctx)


def test_evaluate_sets_the_run_up_with_the_index_s_ids(packed_ctx, tmp_path):
    from arag.evaluation.questions import load_questions
    from arag.evaluation.run_config import run_settings as settings_of
    from tests.conftest import write_jsonl
    from tests.support.scripted_evaluation import compose_evaluate

    questions = write_jsonl(tmp_path / "questions.jsonl", [{"id": "q0", "question": "q?", "answers": ["a"]}])
    cfg = compose_evaluate(f"index.path={packed_ctx.index.root}", f"questions.path={questions}", "model=scripted", "method=arag_naive")
    settings = settings_of(cfg, load_questions(str(questions)))
    assert settings.chunk_ids == packed_ctx.chunk_ids.to_json()
    assert f'"{packed_ctx.chunk_ids.example}"' in settings.identity()["texts"]["method"]["system"]


# ---- the shown_chunk_ids_only guard rail ------------------------------------------------------------


def guarded_run(ctx, script: list, on: bool = True, method: str = "arag_full"):
    backend = ScriptedBackend(script)
    config = AgentConfig(max_steps=5, guard_rails=GuardRails(shown_chunk_ids_only=on), **FAST)
    episode = Agent(backend, load_method(method), ctx, protocol="json", config=config).run("When did Lothair II's mother die?")
    return episode, [r.response_schema for r in backend.requests]


def test_chunk_read_is_offered_only_with_the_ids_shown(agent_ctx):
    searched = agent_ctx.call("keyword_search", {"keywords": ["869"]})
    assert [h.chunk_id for h in searched.results] == ["1#1"]  # the second chunk of Lothair II only
    script = [action("keyword_search", keywords=["869"]), action("chunk_read", chunk_ids=["1#1"]), {"answer": "869"}]
    episode, schemas = guarded_run(agent_ctx, script)
    assert episode.status == "answered" and episode.guard_rails["shown_chunk_ids_only"] is True
    # Before any search nothing was shown: chunk_read is not offered at all (no empty enum to fill).
    assert chunk_read_schema(schemas[0]) is None
    assert episode.guard_rail_events == ["step 1: chunk_read not offered (no chunk id shown yet)"]
    # After the search: exactly the ids it showed.
    offered = chunk_read_schema(schemas[1])["properties"]["arguments"]["properties"]["chunk_ids"]
    assert offered["items"]["enum"] == ["1#1"] and offered["maxItems"] == 1
    jsonschema.validate(action("chunk_read", chunk_ids=["1#1"]), schemas[1])
    for invented in ("1#0", "Lothair II#0", "0:27", ""):
        with pytest.raises(jsonschema.ValidationError):  # what a grammar-constrained model cannot write
            jsonschema.validate(action("chunk_read", chunk_ids=[invented]), schemas[1])
    # After reading 1#1: its previous chunk, named in the result, may be read too.
    assert episode.tool_calls[1].neighbour_ids == ["1#0"]
    assert chunk_read_schema(schemas[2])["properties"]["arguments"]["properties"]["chunk_ids"]["items"]["enum"] == ["1#1", "1#0"]
    jsonschema.validate(action("chunk_read", chunk_ids=["1#0"]), schemas[2])


def test_without_the_guard_rail_chunk_read_takes_any_id(agent_ctx):
    episode, schemas = guarded_run(agent_ctx, [{"answer": "x"}], on=False)
    offered = chunk_read_schema(schemas[0])["properties"]["arguments"]["properties"]["chunk_ids"]
    assert "enum" not in offered["items"] and not episode.guard_rail_events
    jsonschema.validate(action("chunk_read", chunk_ids=["anything"]), schemas[0])


def test_the_guard_rail_leaves_methods_without_chunk_read_alone(agent_ctx):
    on, off = (guarded_run(agent_ctx, [{"answer": "x"}], on=flag, method="arag_no_chunk_read") for flag in (True, False))
    assert on[1] == off[1] and not on[0].guard_rail_events


def test_the_guard_rail_needs_the_json_protocol(agent_ctx):
    config = AgentConfig(guard_rails=GuardRails(shown_chunk_ids_only=True))
    with pytest.raises(ValueError, match="shown_chunk_ids_only needs the json protocol"):
        Agent(ScriptedBackend([]), load_method("arag_full"), agent_ctx, protocol="native", config=config)


def test_the_guard_rail_is_part_of_the_run_id(packed_ctx):
    ids = {run_settings(packed_ctx, rails={"shown_chunk_ids_only": flag}).run_id for flag in (True, False)}
    assert len(ids) == 2


@pytest.mark.parametrize(("model", "on"), [("llamacpp_qwen2.5_coder_1.5b", True), ("llamacpp_qwen2.5_coder_0.5b", True), ("openai", False), ("vllm", False), ("scripted", False)])
def test_on_by_default_for_the_small_embedded_models_only(model, on):
    from tests.support.scripted_evaluation import compose_evaluate

    rails = dataclasses.asdict(compose_evaluate(f"model={model}").agent.guard_rails)
    assert rails["shown_chunk_ids_only"] is on
    assert AgentConfig.from_dict({"guard_rails": rails}).guard_rails.shown_chunk_ids_only is on


def test_the_grammar_lists_only_the_shown_ids(agent_ctx):
    """What llama.cpp compiles from the step's schema: the shown ids, no other."""
    llama_grammar = pytest.importorskip("llama_cpp.llama_grammar")
    from arag.llm.llamacpp import grammar_schema

    searched = agent_ctx.call("keyword_search", {"keywords": ["Lothair II"]})
    _, schemas = guarded_run(agent_ctx, [action("keyword_search", keywords=["Lothair II"]), {"answer": "x"}])
    gbnf = llama_grammar.json_schema_to_gbnf(json.dumps(grammar_schema(schemas[1])))
    shown = [h.chunk_id for h in searched.results]
    assert shown and all(f'\\"{c}\\"' in gbnf for c in shown)
    unshown = [c for c in ("0#0", "1#0", "1#1", "2#0", "3#0") if c not in shown]
    assert unshown and not any(f'\\"{c}\\"' in gbnf for c in unshown)
    llama_grammar.LlamaGrammar.from_json_schema(json.dumps(grammar_schema(schemas[1])), verbose=False)  # compiles
