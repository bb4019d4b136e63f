"""The A2RAG paper's graph: with a model configured, the build extracts triples with the LLM and has
it write the gate summaries; the manifest (and every A2RAG episode) records what built the graph,
"llm:<model>" or the CPU substitutes ("rules", "extractive")."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from hydra import compose, initialize_config_dir

from arag.config.files import conf_dir
from arag.graph.build import GraphLayout, GraphSettings, assemble_graph_manifest, commit_graph_manifest, extract_part, merge_graph, plan_graph_parts, prepare_graph_directory
from arag.graph.extract import ExtractionReject, LLMExtractor, RuleExtractor, make_extractor
from arag.graph.store import GraphNotBuiltError, GraphStore
from arag.graph.summaries import parse_summary, summary_mode
from arag.index.store import open_index
from arag.llm.scripted import ScriptedBackend
from tests.support.tiny_index import Doc, fake_encode, make_index

MODEL = {"backend": "scripted", "model": "extractor-double", "protocol": "json"}
DOCS = [
    Doc("1", "Lothair II", [["Lothair II was king of Lotharingia.", "His mother was Ermengarde of Tours."]]),
    Doc("2", "Ermengarde of Tours", [["Ermengarde of Tours died on 20 March 851."]], part=0),
]


def build(root, script):
    """The graph of DOCS with the LLM extractor and LLM summaries over one scripted backend."""
    index = open_index(root)
    cfg = {"kind": None, "model": MODEL}
    settings = GraphSettings(extractor=cfg, chunks_per_part=10)
    backend = ScriptedBackend(script)
    extractor = LLMExtractor(MODEL, backend=backend)
    identity = settings.identity(index, extractor)
    layout = GraphLayout(root)
    prepare_graph_directory(layout, identity, overwrite=True)
    plan = plan_graph_parts(index, 10)
    records = [extract_part(str(root), p, cfg, extractor=extractor, summaries=settings.summary_mode) for p in plan]
    counts = merge_graph(str(root), plan, encoder=fake_encode, llm_summaries=True)
    manifest = assemble_graph_manifest(layout, identity, records, counts, 0.0)
    commit_graph_manifest(layout, manifest)
    return layout, manifest, backend


def test_a_configured_model_makes_the_llm_the_extractor_and_summariser():
    assert isinstance(make_extractor({"kind": None, "model": MODEL}), LLMExtractor)
    assert isinstance(make_extractor({"kind": None}), RuleExtractor)
    assert isinstance(make_extractor({"kind": "rule", "model": MODEL}), RuleExtractor)  # named explicitly: the substitute
    assert (summary_mode(None, {"model": MODEL}), summary_mode(None, {}), summary_mode("extractive", {"model": MODEL})) == ("llm", "extractive", "extractive")
    with pytest.raises(ValueError, match="graph.summaries=llm needs graph.extractor.model"):
        summary_mode("llm", {})
    with pytest.raises(ValueError, match="graph.summaries must be llm or extractive"):
        summary_mode("abstractive", {"model": MODEL})
    # The shipped config: no model → rules; a model group chosen → the LLM, for both.
    from pipelines.graph import settings_from_config
    from pipelines.config_checks import checked_settings

    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        plain = compose(config_name="graph")
        with_model = compose(config_name="graph", overrides=["model@graph.extractor.model=llamacpp_qwen2.5_coder_1.5b"])
    for cfg in (plain, with_model):
        checked_settings(cfg)
    assert isinstance(make_extractor(settings_from_config(plain).extractor), RuleExtractor) and settings_from_config(plain).summary_mode == "extractive"
    assert isinstance(make_extractor(settings_from_config(with_model).extractor), LLMExtractor) and settings_from_config(with_model).summary_mode == "llm"


def test_llm_extraction_builds_the_triples_and_records_the_extractor(tmp_path):
    root = make_index(tmp_path / "index", DOCS).path
    script = [
        {"summary": "Lothair II, king of Lotharingia, son of Ermengarde of Tours."},  # doc 1's summary, then its triples
        '{"triples": [["Lothair II", "king of", "Lotharingia"], ["Lothair II", "mother", "Ermengarde of Tours"]]}',
        {"summary": "Ermengarde of Tours died on 20 March 851."},
        "here are some triples",  # doc 2's triples: unusable, counted and kept as a reject
    ]
    layout, manifest, backend = build(root, script)
    # The paper's extraction, in our words: triples, JSON, the passage with its title.
    request = backend.requests[1]
    assert "(subject, relation, object)" in request.messages[0].content and request.response_schema["required"] == ["triples"]
    assert "Lothair II" in request.messages[-1].content
    edges = pq.read_table(layout.edges).to_pylist()
    names = pq.read_table(layout.nodes).column("name").to_pylist()
    assert sorted((names[e["head"]], e["relation"], names[e["tail"]], e["chunk_id"]) for e in edges) == [
        ("lothair ii", "king of", "lotharingia", "1#0"), ("lothair ii", "mother", "ermengarde of tours", "1#0")]
    assert manifest["extractor"] == "llm:extractor-double" and manifest["summaries"] == "llm:extractor-double"
    assert (manifest["num_rejected"], manifest["num_summary_rejected"]) == (1, 0)
    rejects = pq.read_table(layout.part_file("rejects", 0)).to_pylist()
    assert [r["chunk_id"] for r in rejects] == ["2#0"] and "not JSON" in rejects[0]["reason"]
    summaries = {r["doc_id"]: r for r in pq.read_table(layout.summaries).to_pylist()}
    assert summaries["1"]["llm_summary"] == "Lothair II, king of Lotharingia, son of Ermengarde of Tours."
    assert summaries["1"]["summary"].startswith("Lothair II")  # the extractive one is kept beside it
    store = GraphStore(root)
    assert (store.extractor, store.summaries_written_by) == ("llm:extractor-double", "llm:extractor-double")
    assert json.loads(layout.manifest.read_text())["extractor"] == "llm:extractor-double"


def test_unusable_summaries_are_counted_and_the_extractive_one_stands_in(tmp_path):
    root = make_index(tmp_path / "index", DOCS).path
    script = ['{"summary": ""}', '{"triples": []}', "Sure, here it is", '{"triples": []}']
    layout, manifest, _ = build(root, script)
    assert manifest["num_summary_rejected"] == 2 and manifest["num_summary_fallbacks"] == 2 and manifest["num_llm_summaries"] == 0
    rejects = pq.read_table(layout.part_file("rejects", 0)).to_pylist()
    assert rejects[0] == {"chunk_id": "1#0", "reason": "summary: reply has no summary", "raw": '{"summary": ""}'}
    assert rejects[1]["chunk_id"] == "2#0" and "not JSON" in rejects[1]["reason"]
    assert parse_summary("A native reply.", json_reply=False) == "A native reply."
    store = GraphStore(root)
    extractive = pq.read_table(layout.summaries).column("summary").to_pylist()
    assert store.llm_summary_vectors[0].tolist() == pytest.approx(fake_encode([extractive[0]])[0].tolist())
    with pytest.raises(ExtractionReject, match="not JSON"):
        parse_summary('{"summary": ')


def test_rule_graphs_say_so_and_refuse_llm_gate_summaries(graph_index, tmp_path):
    from tests.support.graph_index import build_graph_inline

    root = make_index(tmp_path / "index", DOCS).path
    build_graph_inline(root, llm_summaries=False)
    store = GraphStore(root)
    assert (store.extractor, store.summaries_written_by) == ("rules", "extractive")
    assert json.loads(GraphLayout(root).manifest.read_text())["extractor"] == "rules"
    with pytest.raises(GraphNotBuiltError, match="method.gate_summaries=llm.*model@graph.extractor.model=.*method.gate_summaries=extractive"):
        store.gate_scores(fake_encode(["q"])[0], summaries="llm")
    assert store.gate_scores(fake_encode(["Lothair II"])[0], summaries="extractive")[0][1] == "Lothair II"
    # A graph built before the manifest named its extractor: read from its identity.
    manifest = json.loads(GraphLayout(root).manifest.read_text())
    store.manifest = {k: v for k, v in manifest.items() if k not in ("extractor", "summaries")}
    assert (store.extractor, store.summaries_written_by) == ("rules", "extractive")


def test_an_a2rag_run_id_covers_its_graph_and_a_missing_llm_summary_fails_before_any_episode(tmp_path):
    from arag.evaluation.questions import load_questions
    from arag.evaluation.run_config import run_settings
    from tests.support.scripted_evaluation import compose_evaluate
    from tests.support.graph_index import build_graph_inline

    root = make_index(tmp_path / "index", DOCS).path
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"id": "q1", "question": "Who was Lothair II's mother?", "answers": ["Ermengarde of Tours"]}) + "\n")
    question_set = load_questions(str(questions))

    def settings(*overrides):
        return run_settings(compose_evaluate(f"index.path={root}", f"questions.path={questions}", "model=scripted", "method=a2rag", *overrides), question_set)

    build_graph_inline(root, llm_summaries=False)
    with pytest.raises(GraphNotBuiltError, match="method.gate_summaries=extractive"):
        settings()
    rules = settings("method.gate_summaries=extractive")
    assert "+graph-" in rules.identity()["index"]
    build_graph_inline(root, llm_summaries=True)  # the same index, its graph rebuilt otherwise: another run
    assert settings("method.gate_summaries=extractive").run_id != rules.run_id and settings().run_id
