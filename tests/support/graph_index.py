"""A tiny index with its graph, built in-process (rule extractor, gate summaries from a summariser
double, fake encoder): no Ray, no model."""

from __future__ import annotations

import json
import re

import pytest

from arag.graph.build import GraphLayout, GraphSettings, assemble_graph_manifest, commit_graph_manifest, extract_part, merge_graph, plan_graph_parts, prepare_graph_directory
from arag.graph.extract import RuleExtractor
from arag.graph.summaries import LLMSummariser
from arag.llm.types import Completion
from arag.index.store import open_index
from tests.support.agent_index import AGENT_DOCS
from tests.support.tiny_index import Doc, fake_encode, make_index

GRAPH_DOCS = AGENT_DOCS + [
    Doc("4", "Chaturbhuj Doshi", [["Chaturbhuj Doshi was an Indian film director.", "He was born in Gujarat."]], part=1),
]
RULES = {"kind": "rule"}
SUMMARY_MODEL = {"backend": "scripted", "model": "summary-double"}


class SummaryDouble:
    """A summariser model: "<title> is the subject of this summary." for every document."""

    def __init__(self):
        self.requests = []

    def complete(self, messages, **kwargs):
        self.requests.append(messages)
        title = re.search(r"title: (.*?)\):", messages[-1].content).group(1)
        return Completion(text=json.dumps({"summary": f"{title} is the subject of this summary."}))


def build_graph_inline(root, chunks_per_part: int = 2, llm_summaries: bool = True):
    """Rules for the triples; with `llm_summaries`, gate summaries written by SummaryDouble."""
    index = open_index(root)
    extractor = {**RULES, "model": SUMMARY_MODEL} if llm_summaries else RULES
    settings = GraphSettings(extractor=extractor, chunks_per_part=chunks_per_part)
    identity = settings.identity(index, RuleExtractor())
    layout = GraphLayout(root)
    prepare_graph_directory(layout, identity, overwrite=True)
    plan = plan_graph_parts(index, chunks_per_part)
    summariser = LLMSummariser(SUMMARY_MODEL, backend=SummaryDouble()) if llm_summaries else None
    records = [extract_part(str(root), p, extractor, summaries=settings.summary_mode, summariser=summariser) for p in plan]
    counts = merge_graph(str(root), plan, encoder=fake_encode, llm_summaries=llm_summaries)
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
