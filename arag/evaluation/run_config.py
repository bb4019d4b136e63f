"""From an evaluation's typed settings (arag.config.schemas.EvaluatePipeline) to the run they describe:
its `RunSettings` (whose id names the run's folder) and the description stored in its run.json.
The index or tool server is opened here, once, so a bad one fails before any worker starts."""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arag.config.schemas import EvaluatePipeline, IndexSource
from arag.evaluation.protocol import index_facts, protocol_card
from arag.evaluation.questions import QuestionSet
from arag.evaluation.run_settings import RunSettings, answer_style_for
from arag.index.fingerprint import index_build_fingerprint
from arag.index.store import open_index
from arag.index.tokens import RETRIEVED_TOKENS_TOKENIZER
from arag.methods import method_from_config


@dataclass(frozen=True)
class RunIndex:
    """What a run reads from its index (a folder or a tool server), read once when the run is set up:
    the fingerprint and chunk ids that enter the run id, the manifest's facts for the protocol card,
    and a tool server's description (its connection limit, arag.runtime.evaluate_job.tool_server_caps)."""

    path: str | None = None
    url: str | None = None
    fingerprint: str | None = None
    chunk_ids: dict[str, str] | None = None
    facts: dict[str, Any] | None = None
    server_info: dict[str, Any] | None = None


def open_run_index(index: IndexSource, method: Any) -> RunIndex:
    """Open the index `index` names for `method`, once: fails now, with the path or address named,
    rather than in every worker. A method without retrieval reads none."""
    if not method.needs_index():
        return RunIndex()
    if index.url:
        from arag.serve.client import open_tools, served_run_fingerprint

        with open_tools(index_url=index.url, token_env=index.token_env, require_tools=method.tools) as served:
            # the served index's own fingerprint: the same run as with index.path, unless the server searches it otherwise
            return RunIndex(url=str(index.url), fingerprint=served_run_fingerprint(served.info), chunk_ids=served.chunk_ids.to_json(), facts=served.index_facts, server_info=dict(served.info))
    if not index.path:
        raise ValueError(f"method {method.name} needs an index: give index.path=<dir> or index.url=http://host:port")
    index_path = str(Path(str(index.path)).resolve())
    index = open_index(index_path)
    chunk_ids = index.chunk_ids.to_json()
    # The manifest open_index read gives the fingerprint and the protocol card's facts: one read.
    fingerprint = index_build_fingerprint(index_path, index.manifest)
    facts = index_facts(index_path, manifest=index.manifest)
    graph_fingerprint = getattr(method, "graph_fingerprint", None)  # A2RAG: the graph beside the index decides outcomes too
    if graph_fingerprint is not None:
        fingerprint = f"{fingerprint}+graph-{graph_fingerprint(index_path)}"
        if facts is not None:
            facts["graph_extractor"] = method.graph_extractor(index_path)  # the protocol card's "graph extractor"
    return RunIndex(path=index_path, fingerprint=fingerprint, chunk_ids=chunk_ids, facts=facts)


def run_settings(config: EvaluatePipeline, question_set: QuestionSet) -> RunSettings:
    """The run `config` describes over `question_set` (see `run_setup`)."""
    return run_setup(config, question_set)[0]


def run_setup(config: EvaluatePipeline, question_set: QuestionSet) -> tuple[RunSettings, RunIndex, Any]:
    """The run `config` describes over `question_set`, what was read from its index (folder or
    served), opened once here (its fingerprint and chunk ids enter the run id), and its method."""
    dataset = str(config.corpus["name"]) if config.corpus and config.corpus.get("name") else question_set.name
    method_cfg = dict(config.method)
    # short answers for the multi-hop sets, free-form for GraphRAG-Bench, unless the method sets one
    method_cfg.setdefault("answer_style", answer_style_for(dataset))
    method = method_from_config(method_cfg)
    if method.shows_tool_results():  # what the model reads of the tools' results, recorded with its value
        method_cfg.setdefault("snippets_per_chunk", method.snippets_per_chunk)
        method_cfg.setdefault("result_titles", method.result_titles)
    index = open_run_index(config.index, method)
    judge = dataclasses.asdict(config.judge)
    judge_model = judge.pop("model")
    settings = RunSettings(
        dataset=dataset,
        method=method_cfg,
        model=dict(config.model),
        agent=dataclasses.asdict(config.agent),
        judge=judge,
        judge_model=judge_model,
        questions_path=str(question_set.path.resolve()),
        questions_sha256=question_set.sha256,
        index_path=index.path,
        index_build_fingerprint=index.fingerprint,
        index_url=index.url,
        index_token_env=config.index.token_env,
        index_timeout_s=config.index.timeout_s,
        chunk_ids=index.chunk_ids,
        index_facts=index.facts,
        retrieved_tokens_tokenizer=RETRIEVED_TOKENS_TOKENIZER if method.needs_index() else None,
        built_method=method,  # the texts in the run id are this method's: the identity renders them without building it again
    )
    return settings, index, method


def run_info(settings: RunSettings, question_set: QuestionSet, config: EvaluatePipeline, overrides: list[str], method: Any = None) -> dict[str, Any]:
    """The run's description (RunStore.write_run_info): its id, identity, settings, the questions
    file, the resolved config, as the first command that ran it saw them, and its protocol card
    against the paper its method comes from (not part of the identity); `method`: the run's, built
    once, renders the texts the card checks."""
    info = {
        "run_id": settings.run_id,
        "created": dt.datetime.now(dt.timezone.utc).isoformat(),
        "identity": settings.identity(),
        "settings": settings.to_json(),
        "overrides": overrides,
        "questions": {
            "path": str(question_set.path),
            "sha256": question_set.sha256,
            "count": len(question_set.questions),
            "rejected": [r.describe(question_set.path) for r in question_set.rejects],
        },
        "config": dataclasses.asdict(config),
    }
    return {**info, "protocol": protocol_card(info, built=method).to_json()}
