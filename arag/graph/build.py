"""The offline graph of an index, in plain Python: the per-part extraction step and the merge step,
which `arag.runtime.graph_job` schedules on Ray (docs/agents.md, "The graph job" and "Graph files")."""

from __future__ import annotations

import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from arag.graph.extract import _SENTENCE, RULES_LABEL, Chunk, ExtractionReject, Extractor, LLMExtractor, make_extractor, normalise_name, written_by
from arag.graph.layout import GraphLayout
from arag.graph.summaries import EXTRACTIVE_LABEL, LLMSummariser, summary_mode
from arag.index.embedding import SentenceEmbedder, on_this_machine
from arag.index.layout import atomic_path, read_json, write_json_atomic
from arag.index.store import Index

GRAPH_FORMAT_VERSION = 1
TRIPLE_SCHEMA = pa.schema([("chunk_id", pa.string()), ("doc_id", pa.string()), ("head", pa.string()), ("relation", pa.string()), ("tail", pa.string())])
MENTION_SCHEMA = pa.schema([("chunk_id", pa.string()), ("doc_id", pa.string()), ("surface", pa.string())])
GRAPH_REJECT_SCHEMA = pa.schema([("chunk_id", pa.string()), ("reason", pa.string()), ("raw", pa.string())])
SUMMARY_SCHEMA = pa.schema([("doc_id", pa.string()), ("title", pa.string()), ("summary", pa.string())])
SUMMARY_CHARS = 400


class GraphBuildError(RuntimeError):
    pass


@dataclass(frozen=True)
class GraphPart:
    part: int
    index_part: int
    start: int  # rows [start, end) of the index part's chunks file
    end: int


@dataclass
class GraphPartRecord:
    part: int
    num_chunks: int
    num_triples: int
    num_mentions: int
    num_rejected: int
    seconds: float
    worker: str = ""  # host:pid that extracted it (shows the work spread over a cluster)
    num_summaries: int = 0  # LLM-written gate summaries (graph.summaries=llm)
    num_summary_rejected: int = 0  # summariser replies that could not be used (in rejects/)


@dataclass(frozen=True)
class GraphSettings:
    extractor: Mapping[str, Any]
    chunks_per_part: int = 2000
    summaries: str | None = None  # llm | extractive | None: llm with a model (graph.extractor.model), else extractive
    summary_sentences: int = 2
    limit_chunks: int | None = None  # only the first N chunks (a slice, for trying an extractor)

    @property
    def summary_mode(self) -> str:
        return summary_mode(self.summaries, self.extractor)

    def identity(self, index: Index, extractor: Extractor) -> dict[str, Any]:
        # Extractive summaries leave the identity as graphs built before LLM summaries had it.
        llm = {"summaries": LLMSummariser(self.extractor["model"]).identity()} if self.summary_mode == "llm" else {}
        return {
            "format_version": GRAPH_FORMAT_VERSION,
            "index_created_at": index.manifest.get("created_at"),
            "index_chunks": index.manifest.get("num_chunks"),
            "extractor": extractor.identity(),
            "chunks_per_part": self.chunks_per_part,
            "summary_sentences": self.summary_sentences,
            "limit_chunks": self.limit_chunks,
            "embedder": index.manifest["embedding"]["model"],
            **llm,
        }


def plan_graph_parts(index: Index, chunks_per_part: int, limit_chunks: int | None = None) -> list[GraphPart]:
    if chunks_per_part < 1:
        raise ValueError(f"graph.chunks_per_part must be at least 1, got {chunks_per_part}")
    plan: list[GraphPart] = []
    left = limit_chunks if limit_chunks is not None else sum(p.num_chunks for p in index.parts)
    for p in index.parts:
        for start in range(0, min(p.num_chunks, left), chunks_per_part):
            plan.append(GraphPart(len(plan), p.part, start, min(p.num_chunks, left, start + chunks_per_part)))
        left -= min(p.num_chunks, left)
    return plan


def prepare_graph_directory(layout: GraphLayout, identity: dict[str, Any], overwrite: bool) -> str:
    """"up_to_date", "resume" or "build"; a graph of other settings is removed only with overwrite."""
    if layout.root.exists():
        previous_path = layout.manifest if layout.manifest.exists() else layout.build_state
        previous = read_json(previous_path).get("identity") if previous_path.exists() else None
        if previous == identity and not overwrite:
            if layout.manifest.exists():
                return "up_to_date"
            layout.remove_temporaries()
            return "resume"
        if previous is not None and not overwrite:
            changed = sorted(k for k in set(previous) | set(identity) if previous.get(k) != identity.get(k))
            raise GraphBuildError(f"{layout.root} holds a graph built with other settings ({', '.join(changed)}); set graph.overwrite=true to rebuild it")
        shutil.rmtree(layout.root)
    layout.make_dirs()
    write_json_atomic(layout.build_state, {"identity": identity})
    return "build"


def _write_parquet(table: pa.Table, target: Path) -> None:
    with atomic_path(target) as tmp:
        pq.write_table(table, tmp, compression="zstd")


def extract_part(
    index_root: str, part: GraphPart, extractor_cfg: Mapping[str, Any], worker: str = "", extractor: Extractor | None = None,
    summaries: str = EXTRACTIVE_LABEL, summariser: LLMSummariser | None = None,
) -> GraphPartRecord:
    """Extract one part's chunks (and with `summaries="llm"` the gate summary of each document that
    starts in it) and commit it: Parquet files first, the record last."""
    layout = GraphLayout(index_root)
    record_path = layout.part_file("parts", part.part)
    if record_path.exists():
        return GraphPartRecord(**read_json(record_path))
    started = time.perf_counter()
    extractor = extractor or make_extractor(extractor_cfg)
    if summaries == "llm" and summariser is None:
        summariser = LLMSummariser(extractor_cfg["model"], backend=extractor.backend if isinstance(extractor, LLMExtractor) else None)
    index = Index(index_root)
    # One row before the slice, to know whether its first row starts a document.
    before = 1 if part.start else 0
    chunks = pq.read_table(index.parts[part.index_part].chunks, columns=["chunk_id", "doc_id", "title", "text"]).slice(part.start - before, part.end - part.start + before)
    triples, mentions, rejects, written = [], [], [], []  # rows of TRIPLE_, MENTION_, GRAPH_REJECT_ and SUMMARY_SCHEMA
    rows = chunks.to_pylist()
    previous_doc = rows[0]["doc_id"] if before else None
    summary_rejects = 0
    for row in rows[before:]:
        chunk = Chunk(row["chunk_id"], row["doc_id"], row["title"] or "", row["text"])
        if summariser is not None and chunk.doc_id != previous_doc:  # a document's first chunk (chunks of a document are consecutive)
            try:
                written.append((chunk.doc_id, chunk.title, summariser.summarise(chunk.title, chunk.text)))
            except ExtractionReject as exc:
                summary_rejects += 1
                rejects.append((chunk.chunk_id, exc.reason, exc.raw))
        previous_doc = chunk.doc_id
        try:
            got = extractor.extract(chunk)
        except ExtractionReject as exc:
            rejects.append((chunk.chunk_id, exc.reason, exc.raw))
            continue
        mentions += [(chunk.chunk_id, chunk.doc_id, surface) for surface in dict.fromkeys(e for e in got.entities if normalise_name(e))]
        triples += [(chunk.chunk_id, chunk.doc_id, t.head, t.relation, t.tail) for t in got.triples if normalise_name(t.head) and normalise_name(t.tail)]
    outputs = [("triples", triples, TRIPLE_SCHEMA), ("mentions", mentions, MENTION_SCHEMA), ("rejects", rejects, GRAPH_REJECT_SCHEMA)]
    for kind, table_rows, schema in outputs + ([("gate_summaries", written, SUMMARY_SCHEMA)] if summariser is not None else []):
        _write_parquet(pa.Table.from_pylist([dict(zip(schema.names, r)) for r in table_rows], schema=schema), layout.part_file(kind, part.part))
    record = GraphPartRecord(
        part.part, len(rows) - before, len(triples), len(mentions), len(rejects) - summary_rejects, round(time.perf_counter() - started, 3), worker,
        num_summaries=len(written), num_summary_rejected=summary_rejects,
    )
    write_json_atomic(record_path, asdict(record))
    return record


def merge_graph(
    index_root: str, plan: list[GraphPart], summary_sentences: int = 2, encoder: Callable[[list[str]], np.ndarray] | None = None, llm_summaries: bool = False,
) -> dict[str, Any]:
    """Nodes, edges, provenance, summaries and their vectors from the committed parts; returns counts.
    DuckDB over the parts' Parquet, so memory follows the graph, not the corpus text."""
    layout = GraphLayout(index_root)
    missing = [p.part for p in plan if not layout.part_file("parts", p.part).exists()]
    if missing:
        raise GraphBuildError(f"graph parts {missing[:5]} have no commit record; cannot merge")
    files = {kind: [str(layout.part_file(kind, p.part)) for p in plan] for kind in ("triples", "mentions")}
    with duckdb.connect() as con:
        con.create_function("norm", normalise_name, ["VARCHAR"], "VARCHAR")
        con.execute("CREATE TABLE m AS SELECT chunk_id, surface, norm(surface) AS name FROM read_parquet(?)", [files["mentions"]])
        con.execute("CREATE TABLE t AS SELECT chunk_id, norm(head) AS h, relation, norm(tail) AS tl, head, tail FROM read_parquet(?)", [files["triples"]])
        # Every triple end is a node, even if an LLM named it only in a triple.
        con.execute("INSERT INTO m SELECT chunk_id, head, h FROM t UNION ALL SELECT chunk_id, tail, tl FROM t")
        con.execute(
            "CREATE TABLE names AS SELECT row_number() OVER (ORDER BY name) - 1 AS node_id, name, list(DISTINCT surface ORDER BY surface) AS aliases "
            "FROM m WHERE name <> '' GROUP BY name"
        )
        con.execute(
            "CREATE TABLE edges AS SELECT DISTINCT a.node_id AS head, t.relation, b.node_id AS tail, t.chunk_id "
            "FROM t JOIN names a ON a.name = t.h JOIN names b ON b.name = t.tl WHERE a.node_id <> b.node_id ORDER BY head, tail, relation, chunk_id"
        )
        con.execute(
            "CREATE TABLE nodes AS SELECT n.node_id, n.name, n.aliases, coalesce(d.degree, 0)::INTEGER AS degree FROM names n LEFT JOIN "
            "(SELECT node_id, count(DISTINCT other) AS degree FROM (SELECT head AS node_id, tail AS other FROM edges UNION ALL SELECT tail, head FROM edges) GROUP BY node_id) d "
            "USING (node_id) ORDER BY node_id"
        )
        con.execute("CREATE TABLE prov AS SELECT DISTINCT n.node_id, m.chunk_id FROM m JOIN names n USING (name) ORDER BY node_id, chunk_id")
        con.execute("CREATE TABLE rels AS SELECT row_number() OVER (ORDER BY relation) - 1 AS relation_id, relation FROM (SELECT DISTINCT relation FROM edges)")
        for table, target in (("nodes", layout.nodes), ("edges", layout.edges), ("prov", layout.provenance), ("rels", layout.relations)):
            _write_parquet(con.sql(f"SELECT * FROM {table}").to_arrow_table(), target)
        counts = {k: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for k, t in (("num_nodes", "nodes"), ("num_edges", "edges"), ("num_provenance", "prov"), ("num_relations", "rels"))}
    index = Index(index_root)
    summaries = document_summaries(index, summary_sentences)
    vector_texts = {layout.summary_vectors: summaries.column("summary").to_pylist()}
    if llm_summaries:
        parts = pa.concat_tables([pq.read_table(layout.part_file("gate_summaries", p.part)) for p in plan])
        # A document's summary is written by the one part its first chunk is in: null where it was rejected.
        llm = parts["summary"].take(pc.index_in(summaries["doc_id"], value_set=parts["doc_id"]))
        summaries = summaries.append_column("llm_summary", llm)
        counts["num_llm_summaries"] = len(llm) - llm.null_count
        counts["num_summary_fallbacks"] = llm.null_count  # rejected replies: the extractive summary stands in
        vector_texts[layout.llm_summary_vectors] = pc.coalesce(llm, summaries["summary"]).to_pylist()
    _write_parquet(summaries, layout.summaries)
    counts["num_summaries"] = summaries.num_rows
    if encoder is None:
        encoder = SentenceEmbedder(on_this_machine(index.embedder_spec)).encode_documents
    vector_texts[layout.node_vectors] = pq.read_table(layout.nodes, columns=["name"]).column("name").to_pylist()
    vector_texts[layout.relation_vectors] = pq.read_table(layout.relations, columns=["relation"]).column("relation").to_pylist()
    for target, texts in vector_texts.items():
        vectors = encoder(texts) if texts else np.zeros((0, index.dimension), np.float32)
        with atomic_path(target) as tmp:
            np.save(tmp, np.asarray(vectors, dtype=np.float32))
    return counts


def document_summaries(index: Index, sentences: int = 2) -> pa.Table:
    """Extractive summaries: each document's title and the first `sentences` sentences of its first chunk."""
    with duckdb.connect() as con:
        rows = con.execute(
            "SELECT doc_id, arg_min(title, position), arg_min(text, position) FROM read_parquet(?) GROUP BY doc_id ORDER BY doc_id",
            [[str(f) for f in index.chunk_files]],
        ).fetchall()
    summaries = []
    for doc_id, title, text in rows:
        title = title or ""
        body = text[len(title):] if title and text.startswith(title) else text
        first = " ".join(s.strip() for s in _SENTENCE.split(body.strip())[:sentences] if s.strip())
        summaries.append((doc_id, title, f"{title}: {first}"[:SUMMARY_CHARS] if title else first[:SUMMARY_CHARS]))
    return pa.Table.from_pylist([dict(zip(SUMMARY_SCHEMA.names, r)) for r in summaries], schema=SUMMARY_SCHEMA)


def assemble_graph_manifest(layout: GraphLayout, identity: dict[str, Any], records: list[GraphPartRecord], counts: dict[str, Any], elapsed_s: float) -> dict[str, Any]:
    return {
        "identity": identity,
        "format_version": GRAPH_FORMAT_VERSION,
        "extractor": written_by(identity["extractor"], RULES_LABEL),
        "summaries": written_by(identity.get("summaries"), EXTRACTIVE_LABEL),
        "num_parts": len(records),
        **{key: sum(getattr(r, key) for r in records) for key in ("num_chunks", "num_triples", "num_rejected", "num_summary_rejected")},
        "workers": sorted({r.worker for r in records if r.worker}),
        **counts,
        "elapsed_s": round(elapsed_s, 3),
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def commit_graph_manifest(layout: GraphLayout, manifest: dict[str, Any]) -> None:
    write_json_atomic(layout.manifest, manifest)
    layout.build_state.unlink(missing_ok=True)
