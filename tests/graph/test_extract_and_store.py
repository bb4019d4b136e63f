"""The rule extractor on known sentences, the LLM extractor's output handling, the graph files, and
the retrieval stages (PPR against a dense reference)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pyarrow.parquet as pq
import pytest

from arag.graph.build import GraphLayout
from arag.graph.extract import CO_OCCURS, MENTIONS, Chunk, ExtractionReject, LLMExtractor, RuleExtractor, Triple, normalise_name, parse_triples
from arag.graph.store import GraphStore, degree_normalised_reset, personalized_pagerank
from arag.llm.scripted import ScriptedBackend


def test_rule_extractor_finds_titles_spans_dates_numbers_and_relations():
    chunk = Chunk("1#0", "1", "Teutberga", "Teutberga\nTeutberga died 11 November 875. She was a queen of Lotharingia by marriage to Lothair II. Hugh, King of Italy, had 3 sons.")
    got = RuleExtractor().extract(chunk)
    assert got.entities == ["Teutberga", "Teutberga", "11 November 875", "Lotharingia", "Lothair II", "Hugh", "King of Italy", "3"]
    pattern = [t for t in got.triples if t.relation not in (CO_OCCURS, MENTIONS)]
    assert Triple("Teutberga", "died", "11 November 875") in pattern
    assert Triple("Lotharingia", "by marriage to", "Lothair II") in pattern
    # A comma between two entities is a clause break: co-occurrence, not a pattern relation.
    assert Triple("Hugh", CO_OCCURS, "King of Italy") in got.triples
    assert Triple("Teutberga", MENTIONS, "Lothair II") in got.triples


def test_rule_extractor_reads_a_packed_window_document_by_document():
    """A window's title field holds every title it covers: each is an entity of its own span, never
    one entity of all of them joined."""
    text = "died in 869.\n\nTeutberga\nTeutberga was a queen of Lotharingia.\n\nErmengarde of Tours\nErmengarde of Tours died on 20 March 851."
    got = RuleExtractor().extract(Chunk("0:3", "1\n0\n2", "Lothair II\nTeutberga\nErmengarde of Tours", text))
    assert not any("\n" in e for e in got.entities) and {"Teutberga", "Ermengarde of Tours", "869"} <= set(got.entities)
    assert Triple("Teutberga", MENTIONS, "Lotharingia") in got.triples and Triple("Ermengarde of Tours", MENTIONS, "20 March 851") in got.triples
    # The span continued from the window before has no title here: no subject link for it.
    assert not any(t.tail == "869" and t.relation == MENTIONS for t in got.triples)


def test_normalised_names_merge_case_and_punctuation():
    assert normalise_name("  Lothair  II. ") == normalise_name("lothair ii") == "lothair ii"


def test_llm_extractor_parses_triples_and_rejects_bad_output():
    backend = ScriptedBackend(['{"triples": [["Lothair II", "mother", "Ermengarde of Tours"]]}', "Sure! Here are the triples: none", '{"triples": [["only two", "items"]]}'])
    ex = LLMExtractor({"backend": "scripted", "protocol": "json"}, backend=backend)
    chunk = Chunk("1#0", "1", "Lothair II", "His mother was Ermengarde of Tours.")
    assert ex.extract(chunk).triples == [Triple("Lothair II", "mother", "Ermengarde of Tours")]
    with pytest.raises(ExtractionReject, match="not JSON"):
        ex.extract(chunk)
    with pytest.raises(ExtractionReject, match="three non-empty strings"):
        ex.extract(chunk)
    assert backend.requests[0].response_schema is not None and "Ermengarde" in backend.requests[0].messages[-1].content
    identity = ex.identity()
    assert identity["kind"] == "llm" and identity["prompt_sha256"] and identity["model"]["backend"] == "scripted"


def test_parse_triples_reads_fenced_json():
    assert parse_triples('```json\n{"triples": [["A", "Likes", "B"]]}\n```').triples == [Triple("A", "likes", "B")]


def test_graph_files_hold_nodes_edges_and_provenance(graph_index):
    layout = GraphLayout(graph_index.path)
    nodes = pq.read_table(layout.nodes).to_pylist()
    names = {n["name"]: n for n in nodes}
    assert {"teutberga", "lothair ii", "ermengarde of tours", "chaturbhuj doshi", "11 november 875"} <= set(names)
    assert "Lothair II" in names["lothair ii"]["aliases"]
    edges = pq.read_table(layout.edges).to_pylist()
    store = GraphStore(graph_index.path)
    assert store.graph.degree(names["lothair ii"]["node_id"]) == names["lothair ii"]["degree"] > 0
    assert set(store.chunks_of(names["lothair ii"]["node_id"])) == {"0#0", "1#0", "1#1"}
    assert all(e["chunk_id"] in graph_index.chunk_ids for e in edges)
    assert store.node_vectors.shape == (len(nodes), 32) and store.summary_vectors.shape[0] == 5


def reference_ppr(g: nx.Graph, p0: np.ndarray, alpha: float, iters: int = 500) -> np.ndarray:
    """Dense power iteration of r = α·p₀ + (1 − α)·Pᵀr, P the row-normalised adjacency."""
    a = nx.to_numpy_array(g, nodelist=range(g.number_of_nodes()))
    p = a / a.sum(1, keepdims=True)
    r = p0.copy()
    for _ in range(iters):
        r = alpha * p0 + (1 - alpha) * p.T @ r
    return r


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ppr_equals_reference_implementations(seed):
    import igraph

    g = nx.connected_watts_strogatz_graph(30, 4, 0.3, seed=seed)
    ig = igraph.Graph(n=30, edges=list(g.edges()), directed=False)
    seeds = [0, 7, 19]
    alpha = 0.15
    got = personalized_pagerank(ig, seeds, alpha)
    p0 = degree_normalised_reset(np.array([d for _, d in sorted(g.degree())], float), seeds)
    assert p0[0] / p0[7] == pytest.approx(g.degree(7) / g.degree(0))
    np.testing.assert_allclose(got, reference_ppr(g, p0, alpha), atol=1e-6)
    nx_r = nx.pagerank(g, alpha=1 - alpha, personalization=dict(enumerate(p0)), tol=1e-12, max_iter=1000)
    np.testing.assert_allclose(got, [nx_r[i] for i in range(30)], atol=1e-6)


def test_stages_local_bridge_and_ppr(graph_index):
    store = GraphStore(graph_index.path)
    node = store.by_name
    local = store.local([node["lothair ii"]])
    assert local[node["lothair ii"]] == 1.0 and local[node["ermengarde of tours"]] == 0.5
    scores, paths = store.bridges([node["teutberga"], node["ermengarde of tours"]], hops=2, max_paths=4)
    assert node["lothair ii"] in scores and paths and all(len(p) - 1 <= 2 for p in paths)
    assert store.bridges([node["teutberga"]], 2, 4) == ({}, [])
    with pytest.raises(ValueError, match="at least 2"):
        store.bridges([1, 2], hops=1, max_paths=4)
    ppr = store.ppr([node["phoolwari"]], alpha=0.15, top=3)
    assert max(ppr, key=ppr.get) == node["phoolwari"] and len(ppr) == 3
    assert "3#0" in store.rank_chunks(ppr, 2)


def test_seed_alignment_by_edit_similarity(graph_index):
    from tests.support.tiny_index import fake_encode

    store = GraphStore(graph_index.path)
    seeds = store.align(["Lothar II", "Zzzqx"], fake_encode(["Lothar II", "Zzzqx"]), edit_weight=0.5, min_score=0.6)
    assert [s.name for s in seeds] == ["lothair ii"]


def test_llm_extraction_part_keeps_bad_output_as_rejects(tmp_path):
    from arag.graph.build import GraphSettings, extract_part, plan_graph_parts, prepare_graph_directory
    from arag.index.store import open_index
    from tests.support.graph_index import GRAPH_DOCS
    from tests.support.tiny_index import make_index

    root = make_index(tmp_path / "index", GRAPH_DOCS[:2]).path  # chunks 0#0, 1#0, 1#1
    backend = ScriptedBackend(['{"triples": [["Teutberga", "married", "Lothair II"]]}', "I cannot do that.", '{"triples": []}'])
    extractor = LLMExtractor({"backend": "scripted"}, backend=backend)
    index = open_index(root)
    layout = GraphLayout(root)
    prepare_graph_directory(layout, GraphSettings({"kind": "llm"}).identity(index, extractor), overwrite=False)
    (part,) = plan_graph_parts(index, 10)
    record = extract_part(str(root), part, {}, extractor=extractor)
    assert (record.num_chunks, record.num_triples, record.num_rejected) == (3, 1, 1)
    rejects = pq.read_table(layout.part_file("rejects", 0)).to_pylist()
    assert rejects == [{"chunk_id": "1#0", "reason": rejects[0]["reason"], "raw": "I cannot do that."}] and "not JSON" in rejects[0]["reason"]
    triples = pq.read_table(layout.part_file("triples", 0)).to_pylist()
    assert triples == [{"chunk_id": "0#0", "doc_id": "0", "head": "Teutberga", "relation": "married", "tail": "Lothair II"}]


def test_bridge_paths_start_only_at_seeds_that_reach_the_bridge(graph_index):
    import warnings

    store = GraphStore(graph_index.path)
    node = store.by_name
    seeds = [node["teutberga"], node["ermengarde of tours"], node["chaturbhuj doshi"]]  # the last in another component
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # igraph warns when asked for a path that does not exist
        scores, paths = store.bridges(seeds, hops=2, max_paths=20)
    assert paths and all(p[0] != node["chaturbhuj doshi"] for p in paths) and node["lothair ii"] in scores
