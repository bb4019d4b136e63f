"""Where an index's graph (A2RAG) keeps its files:

```
<index>/graph/
  manifest.json              written last: the graph is complete iff it exists
  build.json                 identity of the build in progress (a rerun resumes it or starts over)
  parts/part-00000.json      commit record of an extraction part, written after its Parquet files
  triples/part-00000.parquet chunk_id, doc_id, head, relation, tail (surface forms)
  mentions/part-00000.parquet chunk_id, doc_id, surface (every entity met, even in no triple)
  rejects/part-00000.parquet chunk_id, reason, raw (extractor or summariser output that could not be used)
  gate_summaries/part-00000.parquet doc_id, title, summary (graph.summaries=llm: the LLM-written ones)
  nodes.parquet              node_id, name (normalised), aliases, degree
  edges.parquet              head, relation, tail (node ids), chunk_id
  provenance.parquet         node_id, chunk_id (π: node → chunks)
  summaries.parquet          doc_id, title, summary (extractive), llm_summary (null without LLM ones): the gate's
  node_vectors.npy, relation_vectors.npy (+ relations.parquet), summary_vectors.npy (extractive),
  llm_summary_vectors.npy (LLM-written summaries, the extractive one where a reply was rejected)
```
"""

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
