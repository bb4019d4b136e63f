"""Each plugin is the one home of its facts (arag.registry): a tool, a backend or a method kind
registered from here, with no other file edited, shows up in evidence recall, the result columns,
the report, the tool sets, the settings checks and the run identity."""

from __future__ import annotations

import asyncio
import dataclasses

import pyarrow.parquet as pq
import pytest

from arag.evaluation.questions import Question
from arag.evaluation.rows import row_schema
from arag.report.build import build_report
from arag.evaluation.results import RunStore
from arag.evaluation.runner import EpisodeRunner
from arag.evaluation.run_settings import RunSettings
from arag.llm.scripted import ScriptedBackend
from arag.registry import BACKEND, METHOD, TOOL, register, unregister
from arag.tools.base import NOT_EVIDENCE, READ, SNIPPET, Hit, ToolResult, ToolSpec

TOY = "toy_lookup"
# Ermengarde of Tours' chunk in the evaluation index (tests/support/scripted_evaluation.py), one of the two
# supporting documents of the question.
GOLD_CHUNK = "2#0"
Q = Question("q0", "When did Lothair II's mother die?", ("20 March 851",), ("Lothair II", "Ermengarde of Tours"))
FAST = {"backoff_initial_s": 0.0, "backoff_max_s": 0.0, "backoff_jitter_s": 0.0}


def toy_tool(evidence: str) -> ToolSpec:
    def run(ctx, args, options):
        text = "Ermengarde of Tours was the wife of Lothair I. She died on 20 March 851."
        return ToolResult(tool=TOY, text=f"[{GOLD_CHUNK}] {text}", results=[Hit(GOLD_CHUNK, snippets=[text])], retrieved_tokens=20)

    parameters = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"], "additionalProperties": False}
    return ToolSpec(name=TOY, description="Look a document up by its title.", parameters=parameters, fn=run, evidence=evidence)


@pytest.fixture
def registered():
    """Registers what a test hands it under its kind and name, and takes it out afterwards."""
    added: list[tuple[str, str]] = []

    def add(kind: str, name: str, plugin):
        register(kind, name, plugin)
        added.append((kind, name))
        return plugin

    yield add
    for kind, name in added:
        unregister(kind, name)


def toy_settings(judge) -> RunSettings:
    method = {"name": "toy_method", "label": "Toy method", "kind": "agent", "tools": [TOY], "system_prompt": "Answer with the tool's help. {answer_style}"}
    return RunSettings(
        dataset="bench",
        method=method,
        model={"backend": "scripted", "protocol": "json", "model": "scripted", "script": [], "replay": True},
        agent={"max_steps": 4, "token_budget": None, **FAST},
        judge=judge,
        judge_model=None,
        questions_path="/q.jsonl",
        questions_sha256="0" * 64,
        index_path="/index",
        index_build_fingerprint="fp",
    )


@pytest.fixture
def judge():
    from tests.support.scripted_evaluation import compose_evaluate

    cfg = dataclasses.asdict(compose_evaluate().judge)
    cfg.pop("model")
    return cfg


def run_toy(settings: RunSettings, ctx):
    script = [{"tool": TOY, "arguments": {"title": "Ermengarde of Tours"}}, {"answer": "20 March 851"}]
    runner = EpisodeRunner(settings, backend=ScriptedBackend(script, replay=True), ctx=ctx)
    return asyncio.run(runner.run(Q))


@pytest.mark.parametrize(("evidence", "seen", "read"), [(READ, 1, 1), (SNIPPET, 1, 0), (NOT_EVIDENCE, 0, 0)])
def test_a_tool_counts_as_evidence_as_it_declares(registered, ctx, judge, evidence, seen, read):
    registered(TOOL, TOY, toy_tool(evidence))
    row = run_toy(toy_settings(judge), ctx)
    assert row.status == "ok" and row.calls_toy_lookup == 1 and row.calls_other == 0 and row.tool_errors == 0
    assert (row.evidence_supporting, row.evidence_seen, row.evidence_read) == (2, seen, read)


def test_a_toy_tool_shows_up_in_evidence_recall_result_columns_and_the_report(registered, ctx, judge, tmp_path):
    from arag.tools import TOOL_SETS, tool_schemas

    registered(TOOL, TOY, toy_tool(READ))
    settings = toy_settings(judge)
    row = run_toy(settings, ctx)
    assert row.evidence_recall_read == 0.5 and row.evidence_recall_at_2 == 0.5
    assert tool_schemas([TOY])[0]["function"]["name"] == TOY and TOY not in TOOL_SETS  # a tool set is a method config's

    results = tmp_path / "results"
    with RunStore(results, settings.run_id) as store:
        store.write([row.to_record()])
        stored = store.read_rows()
    assert stored[0]["calls_toy_lookup"] == 1
    part = next((results / settings.run_id).rglob("part-*.parquet"))
    names = pq.read_schema(part).names
    assert names == row_schema().names and names.index("calls_toy_lookup") == names.index("calls_other") - 1

    report = build_report(results).markdown
    tool_use = report.split("## Tool use", 1)[1].split("\n## ", 1)[0]
    header = next(line for line in tool_use.splitlines() if line.startswith("| dataset"))
    row_line = next(line for line in tool_use.splitlines() if "toy_method" in line)
    cells = [c.strip() for c in header.strip("|").split("|")], [c.strip() for c in row_line.strip("|").split("|")]
    assert dict(zip(*cells))[TOY] == "1.00" and dict(zip(*cells))["chunk_read"] == "0.00"


def test_results_written_before_a_tool_was_registered_still_report(registered, ctx, judge, tmp_path):
    """Older files lack a newer tool's column: the report counts only the columns the files hold."""
    registered(TOOL, TOY, toy_tool(READ))
    row = run_toy(toy_settings(judge), ctx)
    results = tmp_path / "results"
    with RunStore(results, row.run_id) as store:
        store.write([row.to_record()])
    unregister(TOOL, TOY)
    report = build_report(results).markdown  # the file's calls_toy_lookup column is still shown
    assert f"| {TOY} |" in report.split("## Tool use", 1)[1]


class ToyBackend(ScriptedBackend):
    kind = "toy_backend"
    runtime_keys = frozenset({"knob"})

    def __init__(self, *args, knob: int = 0, **kwargs):
        super().__init__(*args, **kwargs)
        self.knob = knob

    prepared: list[dict] = []

    @classmethod
    def default_concurrency(cls, cfg):
        return 3 * int(cfg.get("knob") or 1)

    @classmethod
    def concurrency_caps(cls, cfg, in_flight, engine_in_flight, role="model"):
        return {"knob": in_flight}, [f"{role}: {engine_in_flight} per engine"]

    @classmethod
    def worker_overrides(cls, cfg, slot, engines):
        return {"knob": 100 + slot % engines}

    @classmethod
    def threads_in_process(cls, cfg, cores=None):
        return 4

    @classmethod
    def prepare_runtime(cls, cfg):
        cls.prepared.append(dict(cfg))


def test_a_toy_backend_declares_its_settings_concurrency_and_runtime_keys(registered, judge):
    from arag.llm.factory import KINDS, default_concurrency, make_backend
    from arag.runtime.evaluate_job import default_concurrency as runtime_default
    from arag.strict_settings import UnknownSettingError

    registered(BACKEND, ToyBackend.kind, ToyBackend)
    cfg = {"backend": "toy_backend", "protocol": "json", "model": "toy", "script": [{"answer": "x"}], "knob": 2}
    assert "toy_backend" in KINDS and make_backend(cfg).knob == 2
    with pytest.raises(UnknownSettingError, match=r"model\.knobb\b.*did you mean model\.knob"):
        make_backend({**cfg, "knobb": 1})
    assert default_concurrency(cfg) == runtime_default(cfg) == 6
    assert default_concurrency({"backend": "llamacpp"}) == 1 and default_concurrency({"backend": "scripted"}) == 16

    def run_id(knob):
        s = toy_settings(judge)
        return RunSettings(**{**s.to_json(), "method": {**s.method, "tools": []}, "model": {**cfg, "knob": knob}}).run_id

    assert run_id(1) == run_id(5)  # a run-time key: the same run


def test_a_toy_backend_states_its_limits_worker_keys_threads_and_runtime(registered):
    """The evaluation, re-judge, graph build and ask read these from the backend, never from its name."""
    from arag.llm.factory import make_backend
    from arag.runtime.evaluate_job import backend_caps
    from arag.runtime.graph_job import oversubscribed_cores
    from arag.llm.factory import worker_overrides

    registered(BACKEND, ToyBackend.kind, ToyBackend)
    cfg = {"backend": "toy_backend", "protocol": "json", "model": "toy", "script": [{"answer": "x"}]}
    assert backend_caps(cfg, 8, 24, role="judge.model") == ({"knob": 8}, ["judge.model: 24 per engine"])
    assert [worker_overrides(cfg, slot, 2) for slot in range(3)] == [{"knob": 100}, {"knob": 101}, {"knob": 100}]
    assert "runs toy_backend in-process on 4 threads" in oversubscribed_cores({"kind": "llm", "model": cfg}, task_cpus=1)
    ToyBackend.prepared.clear()
    make_backend(cfg)
    assert ToyBackend.prepared == [cfg]  # before the backend is built, in the process that builds it


def test_vllm_defaults_live_in_one_place():
    import inspect

    from arag.llm import vllm
    from arag.runtime import vllm_engine

    assert inspect.signature(vllm.VLLMBackend).parameters["max_num_seqs"].default == vllm.EngineSpec.max_num_seqs == vllm.DEFAULT_MAX_NUM_SEQS
    assert inspect.signature(vllm.VLLMBackend).parameters["max_inflight"].default == vllm.DEFAULT_MAX_INFLIGHT
    assert inspect.signature(vllm_engine.engine_actor).parameters["max_inflight"].default == vllm.DEFAULT_MAX_INFLIGHT
    assert vllm.VLLMBackend.default_concurrency({}) == vllm.DEFAULT_MAX_NUM_SEQS
    over = vllm.DEFAULT_MAX_INFLIGHT + 1
    assert vllm.VLLMBackend.concurrency_caps({}, over, over)[0] == {"max_inflight": over}


def test_a_method_kind_registered_elsewhere_is_checked_and_built(registered):
    from dataclasses import dataclass

    from arag.methods import Method, method_from_config
    from arag.strict_settings import UnknownSettingError

    @dataclass
    class ToyMethod(Method):
        depth: int = 1

    registered(METHOD, "toy_kind", ToyMethod)
    method = method_from_config({"name": "m", "label": "M", "kind": "toy_kind", "system_prompt": "s", "depth": 3})
    assert isinstance(method, ToyMethod) and method.depth == 3
    with pytest.raises(UnknownSettingError, match=r"method\.dept\b"):
        method_from_config({"name": "m", "kind": "toy_kind", "system_prompt": "s", "dept": 3})


def test_the_builtin_facts_come_from_their_plugins():
    """The method configs declare labels and tool sets; the tools their evidence; nothing else lists them."""
    from arag.config.files import method_declarations
    from arag.report.episodes import method_label as _label
    from arag.methods import evidence_of
    from arag.tools import TOOL_SETS, TOOLS

    assert _label("arag_full") == "A-RAG (Full)" and _label("a2rag_node_only") == "A2RAG Node-only" and _label("not_configured") == "not_configured"
    assert TOOL_SETS["arag_no_chunk_read"] == ("keyword_search", "semantic_search") and "direct" not in TOOL_SETS
    assert all(set(d["tools"]) <= set(TOOLS) for d in method_declarations().values())
    assert {t: s.evidence for t, s in TOOLS.items()} == {
        "keyword_search": SNIPPET, "semantic_search": SNIPPET, "naive_embedding_search": READ, "chunk_read": READ,
        "search": SNIPPET, "find": SNIPPET, "open": READ, "summarize": NOT_EVIDENCE,
    }
    assert {t for t, s in TOOLS.items() if s.encodes_queries} == {"semantic_search", "naive_embedding_search", "search", "find"}  # a tool server's warm start
    assert [t for t, s in TOOLS.items() if s.unit == "document"] == ["search", "find", "open"]
    assert evidence_of("graph_retrieval") == READ and evidence_of("made_up") == NOT_EVIDENCE  # A2RAG's stages, declared by its method
    with pytest.raises(ValueError, match="evidence must be one of read, snippet, none"):
        ToolSpec(name="t", description="", parameters={}, fn=lambda *a: None, evidence="maybe")
    with pytest.raises(ValueError, match="tool 'keyword_search' is registered already"):
        register(TOOL, "keyword_search", TOOLS["chunk_read"])


def test_a_toy_tool_states_its_reads_shown_ids_warm_up_and_what_a_client_mirrors(registered):
    """The agent loop, the served index's client and the tool server ask the spec, never the name."""
    from types import SimpleNamespace

    from arag.agent.loop import shown_id_arguments
    from arag.serve.tool_service import ToolService
    from arag.tools import ReadTracker

    mirrored = []
    spec = ToolSpec(
        name="toy_reader", description="", parameters={}, fn=lambda *a: None, evidence=READ, tracks_reads=True, shown_ids_argument="ids",
        warm_up={"title": "warm"}, encodes_queries=True, mirror=lambda tracker, result: mirrored.append(result.tool),
    )
    registered(TOOL, spec.name, spec)
    assert shown_id_arguments(("keyword_search", "toy_reader", "chunk_read", "made_up")) == {"toy_reader": "ids", "chunk_read": "chunk_ids"}
    tracker = ReadTracker()
    tracker.follow(spec, ToolResult(tool="toy_reader", text="", results=[Hit("a#0"), Hit("b#0", already_read=True)]))
    assert tracker.order == ["a#0"] and mirrored == ["toy_reader"]
    calls = []
    service = SimpleNamespace(tools={"toy_reader": spec}, workers=SimpleNamespace(workers=2, call=lambda name, args: calls.append((name, args)) or ToolResult(tool=name, text="")))
    ToolService.preload(service)
    assert calls == [("toy_reader", {"title": "warm"})] * 2  # every worker process loads what the tool needs


def test_a_toy_tool_states_its_result_settings_context_compaction_and_schema_limits(registered):
    """AgenticRAG's context management and schema limits, the run identity's result format and the
    protocol card's result-format rows follow what the tools state (ToolSpec), never their names: a
    toy tool with the same facts gets the same treatment."""
    from arag.evaluation.protocol import run_facts
    from arag.evaluation import protocol_papers as P
    from arag.methods import load_method
    from arag.tools import TOOLS, DocumentToolSettings, result_settings_of

    assert {t: s.result_settings for t, s in TOOLS.items() if s.result_settings} == {
        "keyword_search": ("snippets_per_chunk", "result_titles"), "semantic_search": ("result_titles",),
        "naive_embedding_search": ("result_titles",), "chunk_read": ("result_titles",),
    }
    assert [t for t, s in TOOLS.items() if s.compacts_context] == ["summarize"]
    assert [t for t, s in TOOLS.items() if s.ref_entries] == ["search"]
    assert [t for t, s in TOOLS.items() if s.fit_schema] == ["search", "find"]
    with pytest.raises(ValueError, match="result_settings must be among snippets_per_chunk, result_titles"):
        ToolSpec(name="t", description="", parameters={}, fn=lambda *a: None, evidence=READ, result_settings=("titles",))

    def fit(fn, documents):
        fn["parameters"]["properties"]["title"]["maxLength"] = documents.max_queries

    toy = ToolSpec(name="toy_notes", description="", parameters={"type": "object", "properties": {"title": {"type": "string"}}}, fn=lambda *a: None,
                   evidence=NOT_EVIDENCE, compacts_context=True, result_settings=("snippets_per_chunk",), fit_schema=fit)
    registered(TOOL, toy.name, toy)
    assert toy.schema(DocumentToolSettings(max_queries=3))["function"]["parameters"]["properties"]["title"] == {"type": "string", "maxLength": 3}
    assert toy.schema()["function"]["parameters"]["properties"]["title"] == {"type": "string"}  # the spec's own schema is untouched
    agenticrag = load_method("agenticrag")
    assert agenticrag.manages_context and not load_method("agenticrag_no_summarize").manages_context
    with_toy = dataclasses.replace(agenticrag, tools=("search", "toy_notes"), documents=DocumentToolSettings(max_queries=2))
    assert with_toy.manages_context
    search, notes = with_toy.tool_schemas()
    assert search["function"]["parameters"]["properties"]["queries"]["maxItems"] == 2 and notes["function"]["parameters"]["properties"]["title"]["maxLength"] == 2
    assert result_settings_of(["toy_notes", "not_installed"]) == {"snippets_per_chunk"}
    # A method offering it: the result format shapes what the model sees, so it enters the run's identity.
    assert dataclasses.replace(load_method("direct"), tools=("toy_notes",)).shows_tool_results() and not load_method("direct").shows_tool_results()
    from arag.agent.context import compacts_context, lists_ref_entries

    assert compacts_context("toy_notes") and compacts_context("summarize") and not compacts_context("search") and not compacts_context("not_installed")
    assert lists_ref_entries("search") and not lists_ref_entries("toy_notes")
    facts = run_facts({"settings": {"method": {"name": "m", "kind": "agent", "tools": ["toy_notes"]}, "model": {"model": "x"}, "agent": {}}})
    assert P.SNIPPET_CAP in facts and P.RESULT_TITLES not in facts
