"""Where an index's graph (A2RAG) keeps its files (docs/agents.md, "Graph files")."""

from __future__ import annotations

import os
from pathlib import Path

from arag.index.layout import part_name

GRAPH_DIR = "graph"
PART_DIRS = ("parts", "triples", "mentions", "rejects", "gate_summaries")


class GraphLayout:
    def __init__(self, index_root: str | os.PathLike):
        self.index_root = Path(index_root)
        self.root = self.index_root / GRAPH_DIR

    def __getattr__(self, name: str) -> Path:  # nodes, edges, provenance, summaries, relations, *_vectors
        files = {
            "manifest": "manifest.json", "build_state": "build.json", "nodes": "nodes.parquet", "edges": "edges.parquet",
            "provenance": "provenance.parquet", "summaries": "summaries.parquet", "relations": "relations.parquet",
            "node_vectors": "node_vectors.npy", "relation_vectors": "relation_vectors.npy", "summary_vectors": "summary_vectors.npy",
            "llm_summary_vectors": "llm_summary_vectors.npy",
        }
        if name in files:
            return self.root / files[name]
        raise AttributeError(name)

    def part_file(self, kind: str, part: int) -> Path:
        return self.root / kind / f"{part_name(part)}.{'json' if kind == 'parts' else 'parquet'}"

    def make_dirs(self) -> None:
        for sub in PART_DIRS:
            (self.root / sub).mkdir(parents=True, exist_ok=True)

    def remove_temporaries(self) -> None:
        for tmp in self.root.rglob(".tmp-*"):
            tmp.unlink(missing_ok=True)
