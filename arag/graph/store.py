"""A built graph opened for retrieval: igraph over the edges, provenance π (node → chunks) and the
vectors for seed alignment and gating (docs/agents.md, "The method")."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from rapidfuzz import fuzz, process

from arag.graph.layout import GraphLayout
from arag.graph.extract import CO_OCCURS, MENTIONS, RULES_LABEL, normalise_name, written_by
from arag.graph.summaries import EXTRACTIVE_LABEL
from arag.index.layout import read_json


# The rule extractor's edges without a relation type (title → entity, sentence co-occurrence): they
# cannot be inconsistent with a relation seed, so Stage 1's relation filter keeps them.
UNTYPED_RELATIONS = frozenset({CO_OCCURS, MENTIONS})


class GraphNotBuiltError(FileNotFoundError):
    pass


@dataclass(frozen=True)
class GraphTriple:
    head: str
    relation: str
    tail: str
    chunk_ids: tuple[str, ...]

    def render(self) -> str:
        return f"({self.head}; {self.relation}; {self.tail})"


@dataclass(frozen=True)
class Seed:
    node_id: int
    name: str
    mention: str
    score: float


class GraphStore:
    def __init__(self, index_root: str | Path):
        import igraph

        self.layout = GraphLayout(index_root)
        if not self.layout.manifest.exists():
            raise GraphNotBuiltError(f"{self.layout.root} has no manifest.json: build the graph first with `python -m pipelines.graph index.path={index_root}`")
        self.manifest = read_json(self.layout.manifest)
        nodes = pq.read_table(self.layout.nodes, columns=["node_id", "name", "degree"])
        self.names: list[str] = nodes.column("name").to_pylist()
        self.degree = np.asarray(nodes.column("degree").to_numpy(), dtype=np.float64)
        edges = pq.read_table(self.layout.edges)
        self.edge_head = edges.column("head").to_numpy()
        self.edge_tail = edges.column("tail").to_numpy()
        self._relation_column = edges.column("relation")
        self.edge_relation = self._relation_column.to_pylist()
        pairs = np.unique(np.sort(np.stack([self.edge_head, self.edge_tail], 1), axis=1), axis=0) if len(edges) else np.zeros((0, 2), np.int64)
        self.graph = igraph.Graph(n=len(self.names), edges=pairs.tolist(), directed=False)
        self._pair_codes = self.pair_code(pairs[:, 0], pairs[:, 1])  # igraph edge i joins pairs[i]
        prov = pq.read_table(self.layout.provenance)
        self._prov_nodes = prov.column("node_id").to_numpy()
        self._prov_chunks = prov.column("chunk_id").to_pylist()
        self._prov_start = np.searchsorted(self._prov_nodes, np.arange(len(self.names) + 1))
        self.by_name = {n: i for i, n in enumerate(self.names)}

    def __getattr__(self, name: str) -> np.ndarray:
        """node_, relation_, summary_ and llm_summary_vectors, memory-mapped on first use."""
        if not name.endswith("_vectors"):
            raise AttributeError(name)
        vectors = np.load(getattr(self.layout, name), mmap_mode="r")
        setattr(self, name, vectors)
        return vectors

    @property
    def extractor(self) -> str:
        """"llm:<model>" (the A2RAG paper's extraction) or "rules" (the CPU substitute)."""
        return self.manifest.get("extractor") or written_by((self.manifest.get("identity") or {}).get("extractor"), RULES_LABEL)

    @property
    def summaries_written_by(self) -> str:
        return self.manifest.get("summaries") or written_by((self.manifest.get("identity") or {}).get("summaries"), EXTRACTIVE_LABEL)

    @cached_property
    def summaries(self):
        return pq.read_table(self.layout.summaries)

    @cached_property
    def relations(self) -> list[str]:
        return pq.read_table(self.layout.relations).column("relation").to_pylist()

    def relation_rows(self, relations: set[str]) -> np.ndarray:
        found = pc.is_in(self._relation_column, value_set=pa.array(sorted(relations), pa.string()))
        return np.flatnonzero(found.to_numpy(zero_copy_only=False))

    def pair_code(self, a, b):
        """One integer per unordered node pair (arrays or ints)."""
        return np.minimum(a, b).astype(np.int64) * len(self.names) + np.maximum(a, b)

    @cached_property
    def shown_names(self) -> list[str]:
        """Each node as written in the corpus (its first alias)."""
        aliases = pq.read_table(self.layout.nodes, columns=["aliases"]).column("aliases").to_pylist()
        return [a[0] if a else n for a, n in zip(aliases, self.names)]

    @cached_property
    def edge_chunks(self) -> list[str]:
        return pq.read_table(self.layout.edges, columns=["chunk_id"]).column("chunk_id").to_pylist()

    @cached_property
    def _edges_by_pair(self) -> tuple[np.ndarray, np.ndarray]:
        codes = self.pair_code(self.edge_head, self.edge_tail) if len(self.edge_head) else np.zeros(0, np.int64)
        order = np.argsort(codes, kind="stable")
        return codes[order], order

    def triples(self, rows, limit: int) -> list[GraphTriple]:
        """The first `limit` distinct (head, relation, tail) of the edges at `rows`, each with its chunks."""
        found: dict[tuple[int, str, int], list[str]] = {}
        for r in rows:
            r = int(r)
            key = (int(self.edge_head[r]), self.edge_relation[r], int(self.edge_tail[r]))
            if key in found or len(found) < limit:
                found.setdefault(key, []).append(self.edge_chunks[r])
        return [GraphTriple(self.shown_names[h], rel, self.shown_names[t], tuple(dict.fromkeys(c))) for (h, rel, t), c in found.items()]

    def local_triples(self, seeds: list[int], hoods: dict[int, set[int]], relations: set[str] | None, limit: int) -> list[GraphTriple]:
        """Stage 1's triples: the subgraph the seeds' neighbourhoods induce (local_hoods' filter); edges
        of two seeds first, then of one, then the others; matching relations before untyped ones."""
        nodes = np.fromiter(set().union(*hoods.values()), np.int64) if hoods else np.zeros(0, np.int64)
        mask = np.isin(self.edge_head, nodes) & np.isin(self.edge_tail, nodes)
        matching = np.zeros(len(mask), bool)
        if relations:
            kept = np.zeros(len(mask), bool)
            kept[self.relation_rows(set(relations) | UNTYPED_RELATIONS)] = True
            matching[self.relation_rows(set(relations) - UNTYPED_RELATIONS)] = True
            mask &= kept
        rows = np.flatnonzero(mask)
        seed_ids = np.asarray(seeds, np.int64)
        touching = np.isin(self.edge_head[rows], seed_ids).astype(int) + np.isin(self.edge_tail[rows], seed_ids)
        return self.triples(rows[np.lexsort((rows, ~matching[rows], -touching))], limit)

    def path_triples(self, paths: list[list[int]], relations: set[str] | None, limit: int) -> list[GraphTriple]:
        """Stage 2's triples: along the bridge paths in order, a matching relation first."""
        codes, order = self._edges_by_pair
        rows: list[int] = []
        for path in paths:
            for u, v in zip(path, path[1:]):
                code = int(self.pair_code(u, v))
                pair_rows = order[np.searchsorted(codes, code, "left") : np.searchsorted(codes, code, "right")].tolist()
                rows += sorted(pair_rows, key=lambda r: (not (relations and self.edge_relation[r] in relations), r))
        return self.triples(rows, limit)

    def chunks_of(self, node: int) -> list[str]:
        return self._prov_chunks[self._prov_start[node] : self._prov_start[node + 1]]

    def rank_chunks(self, node_scores: dict[int, float], limit: int) -> list[str]:
        """Chunks by the summed score of their nodes (π), best first; ties by chunk id."""
        totals: dict[str, float] = {}
        for node, score in node_scores.items():
            for chunk in self.chunks_of(node):
                totals[chunk] = totals.get(chunk, 0.0) + score
        return [c for c, _ in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]]

    def require_llm_summaries(self) -> None:
        if self.summaries_written_by == EXTRACTIVE_LABEL:
            raise GraphNotBuiltError(
                f"{self.layout.root} has extractive gate summaries only, and method.gate_summaries=llm (the A2RAG paper's) needs LLM-written ones: "
                f"rebuild the graph with a model (python -m pipelines.graph index.path={self.layout.index_root} model@graph.extractor.model=<model> "
                "graph.overwrite=true), or set method.gate_summaries=extractive (the CPU substitute)"
            )

    def gate_scores(self, qvec: np.ndarray, top: int = 3, summaries: str = EXTRACTIVE_LABEL) -> list[tuple[str, str, float]]:
        """(doc_id, title, cosine) of the best-matching document summaries."""
        if summaries == "llm":
            self.require_llm_summaries()
            vectors = self.llm_summary_vectors
        else:
            vectors = self.summary_vectors
        if not len(vectors):
            return []
        scores = np.asarray(vectors) @ np.asarray(qvec, dtype=np.float32).reshape(-1)
        order = np.argsort(-scores, kind="stable")[:top]
        docs, titles = self.summaries.column("doc_id"), self.summaries.column("title")
        return [(docs[int(i)].as_py(), titles[int(i)].as_py(), float(scores[i])) for i in order]

    def align(self, mentions: list[str], mention_vectors: np.ndarray | None, edit_weight: float, min_score: float, per_mention: int = 1) -> list[Seed]:
        """Nodes for question entities: edit similarity and embedding cosine mixed by `edit_weight`."""
        seeds: dict[int, Seed] = {}
        vectors = np.asarray(self.node_vectors) if mention_vectors is not None and len(self.names) else None
        for i, mention in enumerate(mentions):
            key = normalise_name(mention)
            if not key:
                continue
            candidates = {idx: score / 100.0 for _, score, idx in process.extract(key, self.names, scorer=fuzz.ratio, limit=10)}
            cos = None
            if vectors is not None:
                cos = vectors @ mention_vectors[i]
                for idx in np.argsort(-cos)[:10]:
                    candidates.setdefault(int(idx), fuzz.ratio(key, self.names[int(idx)]) / 100.0)
            scored = [(edit_weight * edit + (1 - edit_weight) * (float(cos[idx]) if cos is not None else edit), idx)
                      for idx, edit in candidates.items()]
            for score, idx in sorted(scored, reverse=True)[:per_mention]:
                if score >= min_score and (idx not in seeds or seeds[idx].score < score):
                    seeds[idx] = Seed(idx, self.names[idx], mention, round(score, 4))
        return sorted(seeds.values(), key=lambda s: (-s.score, s.node_id))

    def matching_relations(self, words: list[str], vectors: np.ndarray | None, min_score: float) -> set[str]:
        found: set[str] = set()
        for i, word in enumerate(words):
            matches = process.extract(word.lower(), self.relations, scorer=fuzz.partial_ratio, limit=20)
            found.update(name for name, score, _ in matches if score / 100.0 >= min_score)
            if vectors is not None and len(self.relations):
                cos = np.asarray(self.relation_vectors) @ vectors[i]
                found.update(self.relations[int(j)] for j in np.flatnonzero(cos >= min_score))
        return found

    def local_hoods(self, seeds: list[int], relations: set[str] | None = None) -> dict[int, set[int]]:
        """Stage 1 per seed: the seed and its 1-hop neighbours; with relation seeds only over a matching
        or an untyped edge (the paper drops edges whose type is inconsistent with S_R)."""
        hoods = {s: {s} for s in seeds}
        if relations:
            rows = self.relation_rows(set(relations) | UNTYPED_RELATIONS)
            heads, tails = self.edge_head[rows], self.edge_tail[rows]
            for s, hood in hoods.items():
                hood.update(tails[heads == s].tolist(), heads[tails == s].tolist())
            return hoods
        for s, hood in zip(seeds, self.graph.neighborhood(seeds, order=1, mindist=1) if seeds else []):
            hoods[s].update(hood)
        return hoods

    def local(self, seeds: list[int], relations: set[str] | None = None) -> dict[int, float]:
        return hood_scores(seeds, self.local_hoods(seeds, relations))

    def bridges(self, seeds: list[int], hops: int, max_paths: int, relations: set[str] | None = None) -> tuple[dict[int, float], list[list[int]]]:
        """Stage 2: nodes within `hops` of two seeds and up to `max_paths` shortest paths seed → bridge
        (scores: seeds and bridges 1, path nodes 1/2). Fewest-degree bridges first: a hub reached by
        every seed explains nothing; with relation seeds, fewest non-matching edges first."""
        if hops < 2:
            raise ValueError(f"bridge hops must be at least 2, got {hops}")
        if len(seeds) < 2:
            return {}, []
        reached_from: dict[int, list[int]] = {}
        for seed, hood in zip(seeds, self.graph.neighborhood(seeds, order=hops)):
            for n in set(hood):
                reached_from.setdefault(n, []).append(seed)
        bridge_nodes = sorted(n for n, by in reached_from.items() if len(by) >= 2 and n not in seeds)
        rows = self.relation_rows(relations) if relations else []
        consistent = set(self.pair_code(self.edge_head[rows], self.edge_tail[rows]).tolist())  # pair codes joined by a matching edge
        if consistent:
            paths_to, off_relation = self._relation_paths(seeds, bridge_nodes, reached_from, hops, consistent)
            bridge_nodes.sort(key=lambda n: (off_relation[n], self.degree[n], n))
        else:
            paths_to = None
            bridge_nodes.sort(key=lambda n: (self.degree[n], n))
        scores = {s: 1.0 for s in seeds}
        paths: list[list[int]] = []
        for b in bridge_nodes:
            if len(paths) >= max_paths:
                break
            scores[b] = 1.0
            for s in reached_from[b]:  # only seeds within `hops` of it: a path exists
                if len(paths) >= max_paths:
                    break
                path = paths_to[s][b] if paths_to is not None else self.graph.get_shortest_path(s, b)
                if len(path) - 1 <= hops:
                    paths.append(path)
                    for n in path:
                        scores.setdefault(n, 0.5)
        return scores, paths

    def _relation_paths(self, seeds, bridge_nodes, reached_from, hops, consistent):
        """Per seed a path to each bridge, per bridge its non-matching edges. Weights 1 (matching) and
        1 + 1/(hops + 1): over at most `hops` edges the penalties sum to less than one hop, so a
        weighted shortest path has the fewest hops, and among those the most matching edges."""
        penalty = 1.0 + 1.0 / (hops + 1)
        weights = np.where(np.isin(self._pair_codes, np.fromiter(consistent, np.int64, len(consistent))), 1.0, penalty).tolist()
        paths_to: dict[int, dict[int, list[int]]] = {}
        off_relation = dict.fromkeys(bridge_nodes, 0)
        for s in seeds:
            targets = [b for b in bridge_nodes if s in reached_from[b]]
            found = self.graph.get_shortest_paths(s, to=targets, weights=weights, output="vpath") if targets else []
            paths_to[s] = dict(zip(targets, found))
            for b, path in paths_to[s].items():
                off_relation[b] += sum(1 for u, v in zip(path, path[1:]) if int(self.pair_code(u, v)) not in consistent)
        return paths_to, off_relation

    def ppr(self, seeds: list[int], alpha: float, top: int) -> dict[int, float]:
        """Stage 3: r = α·p₀ + (1 − α)·Pᵀr, p₀ ∝ 1/deg over the seeds (igraph damping 1 − α); top nodes."""
        if not seeds:
            return {}
        r = personalized_pagerank(self.graph, seeds, alpha)
        order = np.argsort(-r, kind="stable")[:top]
        return {int(i): float(r[i]) for i in order if r[i] > 0}


def hood_scores(seeds: list[int], hoods: dict[int, set[int]]) -> dict[int, float]:
    scores = {s: 1.0 for s in seeds}
    for hood in hoods.values():
        for n in hood:
            scores.setdefault(n, 0.5)
    return scores


def seeds_connected(hoods: dict[int, set[int]]) -> bool:
    """Whether the seeds' neighbourhoods chain into one group (Stage 1's structural sufficiency)."""
    groups: list[set[int]] = []
    for hood in hoods.values():
        joined = [g for g in groups if g & hood]
        groups = [g for g in groups if not g & hood] + [set(hood).union(*joined)]
    return len(groups) <= 1


def degree_normalised_reset(degrees: np.ndarray, seeds: list[int]) -> np.ndarray:
    """p₀ ∝ deg⁻¹ over the seeds (a seed without edges counts as degree 1)."""
    p0 = np.zeros(len(degrees))
    p0[seeds] = 1.0 / np.maximum(1.0, degrees[seeds])
    return p0 / p0.sum()


def personalized_pagerank(graph, seeds: list[int], alpha: float) -> np.ndarray:
    if not 0 < alpha < 1:
        raise ValueError(f"PPR alpha (restart probability) must be in (0, 1), got {alpha}")
    degrees = np.asarray(graph.degree(), dtype=np.float64)
    p0 = degree_normalised_reset(degrees, seeds)
    return np.asarray(graph.personalized_pagerank(damping=1 - alpha, reset=p0.tolist(), directed=False))
