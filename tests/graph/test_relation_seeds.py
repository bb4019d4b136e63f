"""Relation seeds (the A2RAG paper's S_R) on a hand-made graph: Stage 1 keeps only the edges of a
matching relation, and Stage 2 takes the bridges over matching edges first, so under the path cap
only the relation-seeded search reaches the bridge the question's relation points to."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from arag.graph.build import GraphLayout
from arag.graph.store import GraphStore, seeds_connected
from arag.index.layout import write_json_atomic
from arag.methods import load_method

# A and B are the question's entities. X joins them over "married" edges; Y joins them over
# "directed" edges and also "mentions" edges beside them, so Y has the higher degree (edges counted
# per relation, as the graph build counts them) and by degree alone X comes first. Z hangs off A by
# an untyped co-occurrence edge.
NAMES = ["a", "b", "x", "y", "z"]
EDGES = [
    ("a", "married", "x"), ("x", "married", "b"),
    ("a", "directed", "y"), ("y", "directed", "b"),
    ("a", "mentions", "y"), ("y", "mentions", "b"),
    ("a", "co_occurs_with", "z"),
]


def write_graph(root) -> GraphStore:
    layout = GraphLayout(root)
    layout.root.mkdir(parents=True)
    ids = {n: i for i, n in enumerate(NAMES)}
    degree = [sum(n in (h, t) for h, _, t in EDGES) for n in NAMES]
    pq.write_table(pa.table({"node_id": list(range(len(NAMES))), "name": NAMES, "aliases": [[n] for n in NAMES], "degree": degree}), layout.nodes)
    pq.write_table(pa.table({"head": [ids[h] for h, _, _ in EDGES], "relation": [r for _, r, _ in EDGES], "tail": [ids[t] for _, _, t in EDGES],
                             "chunk_id": ["c"] * len(EDGES)}), layout.edges)
    pq.write_table(pa.table({"node_id": list(range(len(NAMES))), "chunk_id": [f"{n}#0" for n in NAMES]}), layout.provenance)
    write_json_atomic(layout.manifest, {"complete": True})
    return GraphStore(root)


@pytest.fixture
def store(tmp_path):
    return write_graph(tmp_path / "index")


def test_stage_one_keeps_only_edges_of_a_relation_seed(store):
    a, b, x, y, z = (store.by_name[n] for n in "abxyz")
    assert store.local_hoods([a, b]) == {a: {a, x, y, z}, b: {b, x, y}}
    # "married" is a relation type the seed does not match: dropped; untyped edges carry no type to clash with.
    assert store.local_hoods([a, b], {"directed"}) == {a: {a, y, z}, b: {b, y}}
    assert store.local_hoods([a, b], {"no such relation"}) == {a: {a, y, z}, b: {b, y}}  # y: also joined by "mentions"
    # Two seeds are joined when adjacent or sharing a neighbour; any number of seeds must chain into one group.
    assert seeds_connected(store.local_hoods([a, b], {"directed"})) and seeds_connected({a: {a}})
    assert not seeds_connected({a: {a, x}, b: {b}}) and not seeds_connected({a: {a, x}, b: {b, y}, y: {y, b}})


def test_only_the_relation_seed_finds_the_bridge(store):
    a, b, x, y = (store.by_name[n] for n in "abxy")
    node_only, paths = store.bridges([a, b], hops=2, max_paths=2)
    assert y not in node_only and all(x in p for p in paths)  # the cap is spent on X, the lowest-degree bridge
    seeded, paths = store.bridges([a, b], hops=2, max_paths=2, relations={"directed"})
    assert seeded[y] == 1.0 and x not in seeded and paths == [[a, y], [b, y]]
    assert "y#0" in store.rank_chunks(seeded, 3) and "y#0" not in store.rank_chunks(node_only, 3)
    # Relation seeds that match no edge leave the node-only order.
    assert store.bridges([a, b], 2, 2, {"unrelated"}) == (node_only, store.bridges([a, b], 2, 2)[1])


def test_the_method_passes_its_relation_seeds_to_both_stages(store):
    a, b, x, y = (store.by_name[n] for n in "abxy")
    full = load_method("a2rag")
    triples, _, joined, local = full._graph_stage("local", store, [a, b], {"directed"})
    assert x not in local and {a, b, y} <= set(local) and joined
    assert triples and all("x" not in (t.head, t.tail) for t in triples)  # Stage 1 shows the kept edges only
    triples, extra, found, bridge = full._graph_stage("bridge", store, [a, b], {"directed"})
    assert found and ["a", "y"] in extra["paths"] and y in bridge
    # Stage 2 shows the triples along its paths, in path order, a matching relation first between two nodes.
    assert [(t.head, t.relation, t.tail) for t in triples[:2]] == [("a", "directed", "y"), ("a", "mentions", "y")]
    assert {frozenset((t.head, t.tail)) for t in triples} == {frozenset(p) for path in extra["paths"] for p in zip(path, path[1:])}
