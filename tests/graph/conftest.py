"""A tiny index with its graph, built in-process (rule extractor, fake encoder): no Ray, no model."""

from __future__ import annotations

import pytest

from arag.graph.build import GraphLayout, GraphSettings, assemble_graph_manifest, commit_graph_manifest, extract_part, merge_graph, plan_graph_parts, prepare_graph_directory
from arag.graph.extract import RuleExtractor
from arag.index.store import open_index
from tests.agent.conftest import AGENT_DOCS
from tests.tools.conftest import Doc, fake_encode, make_index

GRAPH_DOCS = AGENT_DOCS + [
    Doc("4", "Chaturbhuj Doshi", [["Chaturbhuj Doshi was an Indian film director.", "He was born in Gujarat."]], part=1),
]
RULES = {"kind": "rule"}


def build_graph_inline(root, chunks_per_part: int = 2):
    index = open_index(root)
    settings = GraphSettings(extractor=RULES, chunks_per_part=chunks_per_part)
    identity = settings.identity(index, RuleExtractor())
    layout = GraphLayout(root)
    prepare_graph_directory(layout, identity, overwrite=True)
    plan = plan_graph_parts(index, chunks_per_part)
    records = [extract_part(str(root), p, RULES) for p in plan]
    counts = merge_graph(str(root), plan, encoder=fake_encode)
    commit_graph_manifest(layout, assemble_graph_manifest(layout, identity, records, counts, 0.0))
    return layout


@pytest.fixture(scope="session")
def graph_index(tmp_path_factory):
    built = make_index(tmp_path_factory.mktemp("graph") / "index", GRAPH_DOCS)
    build_graph_inline(built.path)
    return built


@pytest.fixture(scope="session")
def graph_ctx(graph_index):
    from arag.tools import ToolContext

    with ToolContext(graph_index.path, encoder=fake_encode) as ctx:
        yield ctx
