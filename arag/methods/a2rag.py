"""A2RAG: gated, adaptive graph retrieval with Triple-Check and failure-aware rewrites, the A2RAG
paper's Full method; `a2rag_node_only` is its Node-only ablation. The method drives its own episode
(`run_episode`): gate, seeds, monotone escalation (local 1-hop → bridges → PPR), answer, Triple-Check,
rewrites (docs/agents.md, "The method")."""

from __future__ import annotations

# arag.graph (its extractor, store, rapidfuzz) is imported where a graph is used: `import arag.methods`,
# which every method and the viewer load, stays without it.

import asyncio
import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import numpy as np

from arag.index.tokens import count_tokens
from arag.llm.types import Completion, Message
from arag.methods.base import Method
from arag.methods.tool_calls import ToolCallRecord
from arag.tools.base import READ, SNIPPET

RETRIEVAL_RECORD = "graph_retrieval"  # Stage 3: the passages PPR maps back to, their whole texts shown
TRIPLES_RECORD = "graph_triples"  # Stages 1–2: triples shown, their source chunks only seen
STAGES = ("local", "bridge", "ppr")
CHECKS = ("evidence_relevance", "answer_grounding", "query_resolution")
# The keys of `trace["calls"]`.
CALL_PURPOSES = ("sufficiency", "answer", "triple_check", "rewrite")
SUFFICIENCY_MODES = ("structural", "llm")
GATE_SUMMARIES = ("llm", "extractive")
FULL_METHOD, NODE_ONLY_METHOD = "a2rag", "a2rag_node_only"
_YES_NO = {"type": "string", "enum": ["yes", "no"]}
VERDICT_SCHEMA = {"type": "object", "properties": {"verdict": _YES_NO}, "required": ["verdict"]}
TRIPLE_CHECK_SCHEMA = {"type": "object", "properties": dict.fromkeys(CHECKS, _YES_NO), "required": list(CHECKS)}
ANSWER_SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
QUERY_SCHEMA = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
_QUESTION_WORDS = frozenset("who what when where which whose whom why how is was are were did does do the a an of in on at to for by from and or with as that this".split())

# (messages, response schema or None, final) -> completion: the agent loop's model call.
ModelCall = Callable[[list[Message], "dict[str, Any] | None", bool], Awaitable[Completion]]


@dataclass
class A2RagMethod(Method):
    # Stage 3 puts its chunks' whole texts into the answer prompt; Stages 1–2 show triples extracted
    # from their chunks (a snippet of each, as a search result is).
    evidence_records = {RETRIEVAL_RECORD: READ, TRIPLES_RECORD: SNIPPET}
    answer_scoring = "the answer field of the answer call Triple-Check accepted (else abstain_answer)"  # the answer the paper scores EM/F1 on (Table II)
    gate_threshold: float = 0.3
    gate_summaries: str = "llm"  # llm: the graph's LLM-written document summaries (the paper's); extractive: title + first sentences
    seed_min_score: float = 0.6
    seed_edit_weight: float = 0.5
    relation_seeds: bool = True
    relation_min_score: float = 0.8
    bridge_hops: int = 2
    max_paths: int = 8
    ppr_alpha: float = 0.15
    ppr_top_nodes: int = 20
    triples_per_stage: int = 20
    chunks_per_stage: int = 5
    max_evidence_chunks: int = 8
    sufficiency: str = "structural"  # structural | llm: how each stage's evidence is judged sufficient
    max_rewrites: int = 2
    exhausted: str = "abstain"  # abstain | last: what a question whose checks keep failing answers
    abstain_answer: str = "I don't know"
    sufficiency_prompt: str = ""
    answer_prompt: str = ""
    triple_check_prompt: str = ""
    rewrite_prompts: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for key, least in (("triples_per_stage", 1), ("bridge_hops", 2)):
            if getattr(self, key) < least:
                raise ValueError(f"method.{key} must be at least {least}, got {getattr(self, key)}")
        for key, allowed in (("exhausted", ("abstain", "last")), ("gate_summaries", GATE_SUMMARIES), ("sufficiency", SUFFICIENCY_MODES)):
            if getattr(self, key) not in allowed:
                raise ValueError(f"method.{key} must be {' or '.join(allowed)}, got {getattr(self, key)!r}")
        # The report labels a2rag as the paper's Full method: it cannot run as the Node-only ablation.
        if self.name == FULL_METHOD and not self.relation_seeds:
            raise ValueError(f"method {FULL_METHOD} is the A2RAG paper's Full method (relation seeds on); its Node-only ablation is method={NODE_ONLY_METHOD}")
        if self.name == NODE_ONLY_METHOD and self.relation_seeds:
            raise ValueError(f"method {NODE_ONLY_METHOD} is the A2RAG paper's Node-only ablation (relation_seeds: false); the Full method is method={FULL_METHOD}")
        if missing := [k for k in CHECKS if not self.rewrite_prompts.get(k)]:
            raise ValueError(f"method.rewrite_prompts lacks {', '.join(missing)}")
        for key in ("answer_prompt", "triple_check_prompt", *(("sufficiency_prompt",) if self.sufficiency == "llm" else ())):
            if not getattr(self, key):
                raise ValueError(f"method.{key} is empty")
        self._graphs: dict[str, Any] = {}
        self._lock = threading.Lock()

    def needs_index(self) -> bool:
        return True

    def describe(self) -> dict[str, Any]:
        keys = ("gate_threshold", "gate_summaries", "seed_min_score", "seed_edit_weight", "relation_seeds", "relation_min_score", "bridge_hops", "max_paths", "ppr_alpha", "ppr_top_nodes", "triples_per_stage", "chunks_per_stage", "max_evidence_chunks", "sufficiency", "max_rewrites", "exhausted")
        return {**super().describe(), **{k: getattr(self, k) for k in keys}}

    def graph_fingerprint(self, index_root: str) -> str:
        """The graph's identity for the run id; checks the graph and its gate summaries before any episode."""
        graph = _graph_store(index_root)
        if self.gate_summaries == "llm":
            graph.require_llm_summaries()
        return hashlib.sha256(json.dumps(graph.manifest.get("identity"), sort_keys=True, default=str).encode()).hexdigest()[:16]

    def graph_extractor(self, index_root: str) -> str:
        return _graph_store(index_root).extractor

    def graph_for(self, ctx: Any) -> Any:
        root = getattr(getattr(ctx, "index", None), "root", None)
        if root is None:
            raise ValueError("method a2rag reads the index's graph from disk: give index.path (a tool server is not supported)")
        with self._lock:
            if str(root) not in self._graphs:
                self._graphs[str(root)] = _graph_store(root)
            return self._graphs[str(root)]

    async def run_episode(self, question: str, ctx: Any, tracker: Any, episode: Any, call: ModelCall, messages: list[Message]) -> bool:
        graph = await asyncio.to_thread(self.graph_for, ctx)
        calls = dict.fromkeys(CALL_PURPOSES, 0)
        trace: dict[str, Any] = {"outcome": None, "stage_reached": None, "stages": [], "gate": None, "checks": [], "rewrites": [], "sufficiency": [], "calls": calls}
        episode.trace = trace
        trace["graph"] = {"extractor": graph.extractor, "summaries": graph.summaries_written_by}
        model_call = call

        async def call(messages_: list[Message], schema: "dict[str, Any] | None", final: bool, purpose: str) -> Completion:
            calls[purpose] += 1  # counted before the call: a call that fails is still one made
            return await model_call(messages_, schema, final)

        qvec = await asyncio.to_thread(ctx.encode_query, question)
        top_docs = graph.gate_scores(qvec[0], top=3, summaries=self.gate_summaries)
        best = top_docs[0][2] if top_docs else 0.0
        trace["gate"] = {"score": round(best, 4), "threshold": self.gate_threshold, "summaries": self.gate_summaries, "documents": [t for _, t, _ in top_docs]}
        if best < self.gate_threshold:
            trace["outcome"] = "abstain"
            episode.answer = self.abstain_answer
            return True

        query, evidence, answer = question, Evidence(), None
        stage = 0  # index into STAGES of the next stage to run
        for attempt in range(self.max_rewrites + 1):
            failure = trace["rewrites"][-1]["failure"] if trace["rewrites"] else None
            if failure != "answer_grounding":
                # A new query restarts retrieval at the stage reached (monotone), never below it.
                stage = max(0, stage - 1) if attempt else 0
                if failure == "evidence_relevance":
                    evidence = Evidence()  # judged off topic: start the evidence afresh
                evidence, stage = await self._escalate(query, question, top_docs, graph, ctx, episode, call, messages, evidence, stage)
            answer = await self._answer(question, query, evidence, call, messages, grounded=failure == "answer_grounding")
            verdicts = await self._triple_check(question, answer, evidence, call, messages)
            trace["checks"].append({"attempt": attempt, "answer": answer, **verdicts})
            failed = next((c for c in CHECKS if not verdicts[c]), None)
            if failed is None:
                trace["outcome"] = "answered"
                episode.answer = answer
                return True
            if attempt == self.max_rewrites:
                break
            query = await self._rewrite(question, query, answer, failed, evidence, call, messages)
            trace["rewrites"].append({"failure": failed, "query": query})
        trace["outcome"] = "fail"
        episode.answer = answer if self.exhausted == "last" else self.abstain_answer
        return True

    async def _escalate(self, query, question, top_docs, graph, ctx, episode, call, messages, evidence: "Evidence", stage):
        """Stages 1–2 add triples, Stage 3 provenance passages, as the paper's retriever state (Sec. III-C)."""
        seeds, relations = await asyncio.to_thread(self._seeds, query, top_docs, graph, ctx)
        trace = episode.trace
        seed_ids = [s.node_id for s in seeds]
        while stage < len(STAGES):
            name = STAGES[stage]
            started = time.perf_counter()
            if name == "ppr":
                scores, extra, connected = graph.ppr(seed_ids, self.ppr_alpha, self.ppr_top_nodes), {}, True
                have = {c for c, _ in evidence.passages}
                new = [c for c in graph.rank_chunks(scores, self.chunks_per_stage + len(have)) if c not in have][: self.chunks_per_stage]
                text, chunk_ids, tokens, texts = await asyncio.to_thread(_render_chunks, ctx, new)
                evidence.passages = (evidence.passages + [(c, texts[c]) for c in chunk_ids])[: self.max_evidence_chunks]
                record, added = RETRIEVAL_RECORD, len(chunk_ids)
            else:
                triples, extra, connected, scores = self._graph_stage(name, graph, seed_ids, relations)
                new_triples = [t for t in triples if t.render() not in evidence.triples]
                evidence.triples += [t.render() for t in new_triples]
                text = "\n".join(t.render() for t in new_triples)
                chunk_ids = list(dict.fromkeys(c for t in triples for c in t.chunk_ids))
                tokens, record, added = count_tokens(text) if text else 0, TRIPLES_RECORD, len(new_triples)
            episode.tool_calls.append(
                ToolCallRecord(
                    step=episode.steps, name=record, text=text, retrieved_tokens=tokens, chunk_ids=chunk_ids, latency_s=time.perf_counter() - started,
                    arguments={"stage": name, "query": query, "seeds": [s.name for s in seeds], "relations": sorted(relations or ()), **extra},
                )
            )
            trace["stages"].append({"stage": name, "seeds": len(seeds), "nodes": len(scores), ("new_chunks" if name == "ppr" else "new_triples"): added})
            trace["stage_reached"] = name
            stage += 1
            if stage == len(STAGES):
                break
            if self.sufficiency == "llm":
                sufficient = await self._yes_no(self.sufficiency_prompt, question, evidence, call, messages)
            else:
                sufficient = bool(evidence.triples or evidence.passages) and connected  # the graph evidence joins the seeds
            trace["sufficiency"].append({"stage": name, "sufficient": sufficient})
            if sufficient:
                break
        return evidence, stage

    def _seeds(self, query: str, top_docs, graph, ctx):
        from arag.graph.extract import sentence_entities

        mentions = list(dict.fromkeys(t for _, _, t in sentence_entities(query)))
        vectors = _encode(ctx, mentions) if mentions else None
        seeds = graph.align(mentions, vectors, self.seed_edit_weight, self.seed_min_score) if mentions else []
        if not seeds:  # no entity in the question matched: the documents the gate found
            titles = [t for _, t, _ in top_docs if t]
            seeds = graph.align(titles, None, 1.0, 0.99)
        relations = None
        if self.relation_seeds:
            entity_words = {w.lower() for m in mentions for w in m.split()}
            words = [w for w in re.findall(r"[a-z]+", query.lower()) if w not in _QUESTION_WORDS and w not in entity_words and len(w) > 2]
            relations = graph.matching_relations(words, _encode(ctx, words) if words else None, self.relation_min_score) if words else set()
        return seeds, relations

    def _graph_stage(self, name: str, graph, seeds: list[int], relations):
        """Stage 1 or 2: (triples, extra record arguments, structurally sufficient, node scores)."""
        from arag.graph.store import hood_scores, seeds_connected

        if name == "local":
            hoods = graph.local_hoods(seeds, relations)
            return graph.local_triples(seeds, hoods, relations, self.triples_per_stage), {}, seeds_connected(hoods), hood_scores(seeds, hoods)
        scores, paths = graph.bridges(seeds, self.bridge_hops, self.max_paths, relations)
        triples = graph.path_triples(paths, relations, self.triples_per_stage)
        return triples, {"paths": [[graph.names[n] for n in p] for p in paths]}, bool(paths), scores

    @staticmethod
    async def _ask(call, messages, system: str, user: str, schema: dict[str, Any], final: bool, purpose: str) -> str:
        turn = [Message("system", system), Message("user", user)]
        completion = await call(turn, schema, final, purpose)
        messages.extend(turn + [Message("assistant", completion.text or "")])
        return completion.text or ""

    async def _answer(self, question, query, evidence, call, messages, grounded: bool) -> str:
        note = "\nUse only facts stated in the evidence." if grounded else ""
        prompt = f"{evidence.render()}\n\nQuestion: {question}" + (f"\n(Rewritten as: {query})" if query != question else "") + note
        return parse_field(await self._ask(call, messages, self.answer_prompt, prompt, ANSWER_SCHEMA, True, "answer"), "answer")

    async def _triple_check(self, question, answer, evidence, call, messages) -> dict[str, bool]:
        """The three validators in one call: the paper's 2.0–2.3 calls per question leave room for one
        answer and one check."""
        prompt = f"{evidence.render()}\n\nQuestion: {question}\n\nAnswer: {answer}"
        return parse_verdicts(await self._ask(call, messages, self.triple_check_prompt, prompt, TRIPLE_CHECK_SCHEMA, False, "triple_check"))

    async def _rewrite(self, question, query, answer, failure, evidence, call, messages) -> str:
        prompt = f"Question: {question}\nCurrent query: {query}\nRejected answer: {answer}"
        return parse_field(await self._ask(call, messages, self.rewrite_prompts[failure], prompt, QUERY_SCHEMA, False, "rewrite"), "query") or query

    async def _yes_no(self, instruction, question, evidence, call, messages) -> bool:
        prompt = f"{evidence.render()}\n\nQuestion: {question}"
        return parse_verdict(await self._ask(call, messages, instruction, prompt, VERDICT_SCHEMA, False, "sufficiency"))


@dataclass
class Evidence:
    """The retriever's evidence: triples (Stages 1–2), passages (chunk id, text; Stage 3)."""

    triples: list[str] = field(default_factory=list)
    passages: list[tuple[str, str]] = field(default_factory=list)

    def render(self) -> str:
        parts = []
        if self.triples:
            parts.append("Facts from the knowledge graph (subject; relation; object):\n" + "\n".join(self.triples))
        if self.passages:
            parts.append("Passages:\n" + "\n\n".join(f"[{i}] {text}" for i, (_, text) in enumerate(self.passages, 1)))
        return "\n\n".join(parts) if parts else "Evidence: (none)"


def _render_chunks(ctx: Any, chunk_ids: list[str]) -> tuple[str, list[str], int, dict[str, str]]:
    if not chunk_ids:
        return "", [], 0, {}
    rows = ctx.sql("SELECT chunk_id, text FROM chunks WHERE chunk_id IN (SELECT unnest(?))", [chunk_ids])
    texts = dict(rows)
    ordered = [c for c in chunk_ids if c in texts]
    text = "\n\n".join(f"[{c}] {texts[c]}" for c in ordered)
    return text, ordered, count_tokens(text), texts


def _encode(ctx: Any, texts: list[str]):
    return np.concatenate([ctx.encode_query(t) for t in texts]) if texts else None


def parse_verdict(text: str) -> bool:
    """yes → True; anything else → False (a check that cannot be read fails)."""
    value = parse_field(text, "verdict").strip().lower()
    return bool(re.match(r"yes\b", value))


def parse_verdicts(text: str) -> dict[str, bool]:
    """Each validator's yes → True, anything else False; a reply that is not JSON as "<check>: yes" lines."""
    data = _json_object(text) or {c: m.group(1) for c in CHECKS if (m := re.search(rf"{c}\W+(yes|no)\b", text, re.IGNORECASE))}
    return {c: bool(re.match(r"yes\b", str(data.get(c, "")).strip().lower())) for c in CHECKS}


def parse_field(text: str, key: str) -> str:
    """`key` of a JSON reply, or the whole reply when it is not JSON (native-protocol backends)."""
    data = _json_object(text)
    return str(data[key]).strip() if data is not None and key in data else text.strip()


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _graph_store(root: Any) -> Any:
    from arag.graph.store import GraphStore

    return GraphStore(root)
