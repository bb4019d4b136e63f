"""One question end to end: the agent's episode, the judge, the metrics → an `EpisodeRow`.

`EpisodeRunner` is built once per evaluation worker: it opens the index once (a `ToolContext`) and
builds the backend once, then runs any number of questions, concurrently if asked (`run` is async
and keeps no per-question state outside the call). Ray actors wrap it (arag.runtime.evaluate_job);
tests and benchmarks use it directly. It never raises for one question: whatever goes wrong comes
back as a `failed` row with the reason.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from arag.agent import ANSWERED, Agent, AgentConfig, Episode
from arag.agent.episode import pack_messages
from arag.evaluation.episode_facts import EVIDENCE_FACTS, trajectory_facts
from arag.evaluation.evidence import citation_recall, evidence_recall
from arag.evaluation.judge import NO_ANSWER, SKIPPED, Judge, JudgeConfig, Verdict
from arag.evaluation.metrics import score_answer
from arag.evaluation.questions import Question
from arag.evaluation.rows import ROW_FAILED, OK, EpisodeRow
from arag.evaluation.run_settings import RunSettings
from arag.llm.base import LLMBackend
from arag.llm.factory import make_backend
from arag.llm.instrument import at_model_defaults
from arag.methods import method_from_config
from arag.tools.failures import ToolInfrastructureError

if TYPE_CHECKING:
    from arag.serve.client import RemoteTools
    from arag.tools import ToolContext

# Row columns that hold the episode's, and the counted facts', values of the same name.
FROM_EPISODE = ("protocol", "forced", "forced_reason", "steps", "invalid_replies", "retrieved_tokens", "refused_calls",
                "truncated_observations", "answer_cut_off", "forced_summaries", "context_warnings")
FROM_FACTS = ("tool_calls", "calls", "tool_errors", "tool_error_kinds", "repeated_calls", *EVIDENCE_FACTS)


class EpisodeRunner:
    """settings: the run; backend/ctx: already built ones (tests, benchmarks), else built here.
    episode_timeout_s: wall-clock cap per episode (the episode is then `failed`); None: no cap."""

    def __init__(self, settings: RunSettings, *, overrides: list[str] | None = None, backend: LLMBackend | None = None,
                 ctx: "ToolContext | RemoteTools | None" = None, model_overrides: dict[str, Any] | None = None,
                 episode_timeout_s: float | None = None, episodes_at_once: int | None = None):
        self.settings = settings
        self.overrides = list(overrides or [])
        self.episode_timeout_s = episode_timeout_s
        method = method_from_config(settings.method)
        self._own_ctx = ctx is None and method.needs_index()
        if self._own_ctx:
            if not settings.index_path and not settings.index_url:
                raise ValueError(f"method {method.name} needs an index: give index.path=<dir> or index.url=http://host:port")
            from arag.serve.client import index_timeout, open_tools

            # A served index: one pooled connection per episode in flight, so no episode waits for another's.
            ctx = open_tools(settings.index_path, settings.index_url, token_env=settings.index_token_env, require_tools=method.tools, calls_at_once=episodes_at_once, timeout_s=index_timeout(settings.index_timeout_s))
        self.ctx = ctx
        found = ctx.chunk_ids.to_json() if ctx is not None and settings.chunk_ids is not None else None
        if found is not None and found != settings.chunk_ids:
            # The run id holds the texts with the chunk ids of the index the run was set up with.
            if self._own_ctx:
                ctx.close()
            raise ValueError(f"the index's chunk ids {found} are not those the run was set up with {settings.chunk_ids}: a different index")
        self._own_backend = backend is None
        self.backend = backend or make_backend({**settings.model, **(model_overrides or {})})
        self.agent = Agent(self.backend, method, ctx, protocol=settings.model.get("protocol", "json"), config=AgentConfig.from_dict(settings.agent))
        # By default the judge is the agent's model at the model's defaults, over the same engine (one
        # model in memory per worker): the swept effort, temperature and reply cap never reach it.
        self.judge_backend = at_model_defaults(self.backend) if settings.judge_model is None else make_backend(settings.judge_model)
        self.judge = Judge(self.judge_backend, JudgeConfig.from_dict(settings.judge))

    async def run(self, question: Question, attempt: int = 1, worker: str | None = None) -> EpisodeRow:
        try:
            episode = await asyncio.wait_for(self.agent.arun(question.question, question.id), self.episode_timeout_s or None)
        except asyncio.TimeoutError:
            return self.failed_row(question, f"episode timed out after {self.episode_timeout_s:g}s", attempt, worker)
        except Exception as exc:  # Agent.arun records its own failures; this is a last resort
            return self.failed_row(question, f"{type(exc).__name__}: {str(exc)[:500]}", attempt, worker)
        try:
            return await self.score(question, episode, attempt, worker)
        except Exception as exc:
            return self.failed_row(question, f"scoring failed: {type(exc).__name__}: {str(exc)[:500]}", attempt, worker)

    async def score(self, question: Question, episode: Episode, attempt: int, worker: str | None) -> EpisodeRow:
        answered = episode.status == ANSWERED and episode.answer is not None
        prediction = episode.answer if answered else None
        scores = score_answer(prediction, question.answers)
        verdict = await self.judge.judge(question.question, question.answers, prediction, exact=scores.exact_match == 1.0)
        try:
            evidence = await asyncio.to_thread(evidence_recall, episode, question.supporting_titles, self.titles_of if self.ctx is not None else None)
        except ToolInfrastructureError:
            if answered:
                raise  # not scored without its evidence: a failed row, run again by the next run
            # The episode failed already (the tool server gone, say): its row keeps its own cause
            # and trajectory, with no chunk titles to count evidence by.
            evidence = await asyncio.to_thread(evidence_recall, episode, question.supporting_titles, None)
        # The chunks' titles go with the trajectory: a viewer marks gold evidence without the index,
        # and the facts below are counted from it as the report and the viewer count them.
        trajectory = {**episode.to_json(), "chunk_titles": evidence.chunk_titles}
        facts = trajectory_facts(trajectory, question.supporting_titles)
        row = base_row(self.settings, question, attempt, worker, self.overrides, self.backend)
        copied = {**{c: getattr(episode, c) for c in FROM_EPISODE}, **{c: getattr(facts, c) for c in FROM_FACTS},
                  **asdict(scores), **episode.token_totals(), **verdict.columns()}
        for column, value in copied.items():
            setattr(row, column, value)
        row.status = OK if answered else ROW_FAILED
        row.prediction = prediction
        row.failure = None if answered else (episode.failure or f"episode status {episode.status}")
        row.model_calls = len(episode.model_calls)
        row.evidence_recall_at_2, row.evidence_recall_at_5 = (evidence.at_k or {}).get(2), (evidence.at_k or {}).get(5)
        cited = citation_recall(episode, question.supporting_titles)
        row.citation_recall_at_1, row.citation_recall_at_3 = cited[1], cited[3]
        row.wall_s = episode.wall_s + verdict.latency_s
        row.llm_s = sum(m.latency_s for m in episode.model_calls)
        row.tool_s = sum(c.latency_s for c in episode.tool_calls)
        trajectory["messages"] = pack_messages(trajectory["messages"], trajectory["tool_calls"])  # each tool result once
        row.trajectory = json.dumps(trajectory, ensure_ascii=False, default=str)
        return row

    def failed_row(self, question: Question, reason: str, attempt: int = 1, worker: str | None = None) -> EpisodeRow:
        return failed_row(self.settings, question, reason, attempt, worker, self.overrides, self.backend)

    def titles_of(self, chunk_ids: list[str]) -> dict[str, str]:
        from arag.serve.client import RemoteTools
        from arag.tools.chunk_read import chunk_titles

        return self.ctx.titles_of(chunk_ids) if isinstance(self.ctx, RemoteTools) else chunk_titles(self.ctx, chunk_ids)

    def close(self) -> None:
        if self._own_backend:
            self.backend.close()
        if self.judge_backend is not self.backend:
            self.judge_backend.close()
        if self._own_ctx and self.ctx is not None:
            self.ctx.close()


def base_row(settings: RunSettings, question: Question, attempt: int = 1, worker: str | None = None, overrides: list[str] | None = None,
             backend: LLMBackend | None = None) -> EpisodeRow:
    """The columns every row of a run shares, plus the question's own; metrics at their defaults."""
    described: dict[str, Any] = backend.describe() if backend is not None else {}
    return EpisodeRow(
        run_id=settings.run_id,
        dataset=settings.dataset,
        question_id=question.id,
        question=question.question,
        gold_answers=list(question.answers),
        supporting_titles=list(question.supporting_titles),
        method=settings.method_name,
        model=str(described.get("model") or settings.model.get("model")),
        backend=str(described.get("backend") or settings.model.get("backend")),
        protocol=settings.model.get("protocol"),
        attempt=attempt,
        settings=settings.identity_json,
        overrides=list(overrides or []),
        worker=worker,
        finished_at=dt.datetime.now(dt.timezone.utc).replace(tzinfo=None),
        evidence_supporting=len({t for t in question.supporting_titles if t.strip()}),
        **settings.swept(),
    )


def failed_row(settings: RunSettings, question: Question, reason: str, attempt: int = 1, worker: str | None = None,
               overrides: list[str] | None = None, backend: LLMBackend | None = None) -> EpisodeRow:
    """A row for an episode that left no record (timeout, a worker that died, a bug): no answer,
    nothing read, every answer metric 0."""
    row = base_row(settings, question, attempt, worker, overrides, backend)
    row.status, row.failure = ROW_FAILED, reason
    # A run without a judge has no LLM-Acc, failed rows included (a 0 would be its only value).
    verdict = Verdict(NO_ANSWER if (settings.judge or {}).get("enabled", True) else SKIPPED)
    row.llm_acc, row.judge_status = verdict.llm_acc, verdict.status
    if row.evidence_supporting:
        # Nothing retrieved: every recall is 0, so a failed episode counts in the means like any other.
        row.evidence_recall_seen = row.evidence_recall_read = 0.0
        row.evidence_recall_at_2 = row.evidence_recall_at_5 = 0.0
    return row
