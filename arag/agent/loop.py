"""The agent loop (A-RAG, Algorithm 1; docs/agents.md).

Each step the model calls tools (each result appended as an observation) or answers; after `max_steps`
steps or at `token_budget` tokens it is asked once more, without tools, for a forced answer. Nothing the
model writes crashes the loop; an episode whose model calls fail after retries, or whose tool call fails
for a reason other than its arguments (arag.tools.failures), ends "failed" with the reason, no answer.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any, Sequence

from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from arag.agent.context import ContextManager, Observation, compacts_context, forced_summarize_schema
from arag.agent.protocols import ActionProtocol, AnswerAction, InvalidAction, JsonProtocol, ToolAction
from arag.agent.protocols import describe_actions, get_protocol, shown_ids_only
from arag.agent.episode import ANSWERED, EPISODE_FAILED, Episode, ModelCallRecord, ToolCallRecord
from arag.index.tokens import count_tokens, encoding
from arag.llm.base import LLMBackend, reply_room
from arag.llm.slots import queue_clock
from arag.llm.types import Completion, LLMError, Message
from arag.config.schemas import PAPER_TOKEN_BUDGET, AgentConfig, GuardRails  # noqa: F401  (the agent group's schema; importable from here)

from arag.methods import shows_full_text
from arag.methods.base import Method
from arag.tools.failures import INFRASTRUCTURE, UNKNOWN_TOOL, ToolInfrastructureError, checked
from arag.tools.registry import TOOLS
from arag.tools.render import chunk_header_end

if TYPE_CHECKING:  # the tool context (and its index readers) loads only when an episode needs it
    from arag.tools import ToolContext

# Per-message overhead of chat templates (role markers), for the estimate when a backend reports no counts.
MESSAGE_OVERHEAD_TOKENS = 4
# What the agent reads instead of the result of a second (third, ...) tool call in one reply.
EXTRA_CALL_NOTE = "Not run: only one tool call is carried out per step. Call it again in your next step if you still need it."
# Appended to an observation cut to fit the context window.
TRUNCATION_NOTE = "\n[Result cut here: it did not fit in the remaining context. Read fewer chunks at a time, or answer from what you have.]"
# Room kept free in a model's context window beyond the token budget: the last step's tool results
# (which may cross the budget) and the final-answer request must still fit.
CONTEXT_MARGIN_TOKENS = 1536


def read_first_note(tools: Sequence[str]) -> str:
    """What the read-before-answer guard rail tells the agent: read with the method's tools whose results
    are whole texts (arag.methods.shows_full_text). A text the model sees, so part of the run id."""
    readers = [t for t in tools if shows_full_text(t, False)]
    if readers and all(t in TOOLS and TOOLS[t].unit == "document" for t in readers):
        what, unit = "documents", "document"
    else:
        what, unit = "chunks", "chunk"
    how = f" with {' or '.join(readers)}" if readers else ""
    return f"Do not answer yet: you have not read any {unit} in full. Search results are only snippets: read the relevant {what}{how} first."


def shown_id_arguments(tools: Sequence[str]) -> dict[str, str]:
    """Tool -> its argument that takes chunk ids shown by earlier results (ToolSpec.shown_ids_argument)."""
    return {t: TOOLS[t].shown_ids_argument for t in tools if t in TOOLS and TOOLS[t].shown_ids_argument}


class EpisodeFailed(Exception):
    pass


class Agent:
    """Runs episodes of one method with one backend over one index; `arun` is safe from many tasks at once."""

    def __init__(self, backend: LLMBackend, method: Method, ctx: "ToolContext | None" = None, *, protocol: str | ActionProtocol = "json",
                 config: AgentConfig | None = None):
        self.backend = backend
        # The texts the model reads describe this index's chunk ids (arag.index.chunk_ids).
        self.method = method.for_index(ctx.chunk_ids) if ctx is not None else method
        self.ctx = ctx
        self.protocol = get_protocol(protocol) if isinstance(protocol, str) else protocol
        self.config = fit_budget(config or AgentConfig(), backend)
        if method.needs_index() and ctx is None:
            raise ValueError(f"method {method.name!r} needs an index (a ToolContext)")
        if self.protocol.name not in backend.protocols:
            raise ValueError(f"backend {backend.kind!r} does not support the {self.protocol.name!r} protocol (it offers {', '.join(backend.protocols)})")
        self.tool_schemas = self.method.tool_schemas()
        self.allowed = tuple(method.tools)
        self.shown_id_arguments = shown_id_arguments(self.allowed)
        for rail, why in (("tool_steps", "its schema drops the answer branch"), ("shown_chunk_ids_only", "its schema lists the ids shown")):
            if getattr(self.config.guard_rails, rail) and not isinstance(self.protocol, JsonProtocol):
                raise ValueError(f"guard_rails.{rail} needs the json protocol ({why})")

    def run(self, question: str, question_id: str | None = None) -> Episode:
        return asyncio.run(self.arun(question, question_id))

    async def arun(self, question: str, question_id: str | None = None) -> Episode:
        cfg = self.config
        episode = Episode(
            question=question,
            question_id=question_id,
            method=self.method.name,
            protocol=self.protocol.name,
            backend=self.backend.describe(),
            guard_rails=asdict(cfg.guard_rails),
            # token_budget as fitted to the window; reply_cap: the max_tokens each call sends (the protocol card reads both)
            agent={k: v for k, v in asdict(cfg).items() if k != "guard_rails"} | {"method": self.method.describe(), "reply_cap": reply_cap(cfg, self.backend)},
        )
        started = time.perf_counter()
        messages: list[Message] = []
        try:
            await self._episode(question, episode, self.method.new_episode_state(), messages)
        except EpisodeFailed as exc:
            episode.status, episode.failure, episode.answer = EPISODE_FAILED, str(exc), None
        except Exception as exc:  # a bug in a method or backend: record it, never lose the batch
            episode.status, episode.failure, episode.answer = EPISODE_FAILED, f"{type(exc).__name__}: {str(exc)[:500]}", None
        episode.wall_s = time.perf_counter() - started
        if cfg.keep_messages and messages:
            episode.messages = [m.to_openai() for m in messages]
        return episode

    async def _episode(self, question: str, ep: Episode, tracker: Any, messages: list[Message]) -> None:
        """Fills `messages` in place, so the conversation is kept even when the episode fails midway."""
        cfg = self.config
        if await self.method.run_episode(question, self.ctx, tracker, ep, self._controller_call(ep), messages):
            ep.status = ANSWERED
            return
        initial, pre = await asyncio.to_thread(self.method.initial_messages, question, self.ctx, tracker)
        messages.extend(initial)
        ep.tool_calls.extend(pre)
        if isinstance(self.protocol, JsonProtocol):
            messages[0] = Message("system", messages[0].content + "\n\n" + describe_actions(self.tool_schemas))
        conversation = sum(estimate_tokens(m) for m in messages)
        refusals = 0
        shown: list[str] = []  # chunk ids shown so far, in order (guard_rails.shown_chunk_ids_only)
        manager = self._context_manager()
        # A result cut to fit would have taken the conversation past the budget: the budget is
        # reached, even where the cut (kept short of the ceiling for tokenizer slack) left it under.
        cut = False

        for step in range(1, cfg.max_steps + 1):
            if manager is not None and conversation >= manager.budget:
                conversation = await self._forced_summarize(manager, messages, conversation, step, ep, tracker)
            budget = manager.budget if manager is not None else cfg.token_budget
            if budget is not None and (conversation >= budget or (cut and manager is None)):
                ep.forced_reason = "token_budget"
                break
            ep.steps = step
            tools_only = bool(self.tool_schemas) and step <= cfg.guard_rails.tool_steps
            request = self.protocol.request(self._offered_tools(shown, step, ep), allow_answer=not tools_only)
            completion = await self._call_model(messages, request, step, ep, final=False)
            messages.append(self.protocol.assistant_message(completion))
            conversation = reported_size(completion, conversation + estimate_tokens(messages[-1]))
            answer = None
            ran_tools = 0
            per_step = self.method.tools_per_step
            for action in self.protocol.parse(completion):
                if isinstance(action, InvalidAction):
                    ep.invalid_replies += 1
                    note = self.protocol.feedback(f"Your reply could not be used: {action.reason}. Try again.")
                elif isinstance(action, AnswerAction):
                    if self._refuse_answer(ep, refusals):
                        refusals += 1
                        ep.guard_rail_events.append(f"step {step}: answer refused (no chunk read in full yet)")
                        note = self.protocol.feedback(read_first_note(self.allowed))
                    else:
                        answer = action.text
                        ep.answer_cut_off = action.cut_off
                        break
                elif per_step is not None and ran_tools >= per_step:
                    # One tool per step (A-RAG, the paper's setting): later calls of the same reply are not run.
                    ep.refused_calls += 1
                    note = self.protocol.observation(action, EXTRA_CALL_NOTE)
                else:
                    ran_tools += 1
                    note = await self._run_tool(action, step, ep, tracker)
                    cuts = ep.truncated_observations
                    note = self._fit_observation(action, note, conversation, ep, step)
                    cut = cut or ep.truncated_observations > cuts
                    shown.extend(i for i in (*ep.tool_calls[-1].chunk_ids, *ep.tool_calls[-1].neighbour_ids) if i not in shown)
                    if manager is not None:
                        messages.append(note)
                        conversation = self._after_tool(manager, action, ep.tool_calls[-1], messages, conversation)
                        continue
                messages.append(note)
                conversation += estimate_tokens(note)
            if answer is not None:
                ep.answer, ep.citations = self.method.finish_answer(answer, tracker)
                ep.status = ANSWERED
                return
            if manager is not None and manager.should_warn(conversation):
                ep.context_warnings += 1
                messages.append(manager.warning(conversation))
                conversation += estimate_tokens(messages[-1])

        # Out of steps or tokens: one last call without tools.
        ep.forced = True
        ep.forced_reason = ep.forced_reason or "max_steps"
        messages.append(Message("user", self.method.final_text))
        completion = await self._call_model(messages, self.protocol.request([]), ep.steps + 1, ep, final=True)
        messages.append(self.protocol.assistant_message(completion))
        answers = [a for a in self.protocol.parse(completion) if isinstance(a, AnswerAction)]
        if not answers:
            ep.invalid_replies += 1
            raise EpisodeFailed(f"the forced final reply was not an answer: {(completion.text or '')[:200]!r}")
        ep.answer, ep.citations = self.method.finish_answer(answers[0].text, tracker)
        ep.answer_cut_off = answers[0].cut_off
        ep.status = ANSWERED

    def _context_manager(self) -> ContextManager | None:
        if not (self.method.manages_context and self.tool_schemas):
            return None
        budgets = [b for b in (getattr(self.method, "context_budget", None), self.config.token_budget) if b is not None]
        return ContextManager(budget=min(budgets), warn_fraction=getattr(self.method, "warn_fraction", 0.9)) if budgets else None

    def _after_tool(self, manager: Any, action: ToolAction, record: ToolCallRecord, messages: list[Message], conversation: int) -> int:
        """Register the observation just appended; a successful summarize compacts the conversation."""
        manager.observations[len(messages) - 1] = Observation(record.name, record.ref_ids, lambda text, a=action: self.protocol.observation(a, text), record.text)
        if compacts_context(record.name) and not record.error:
            manager.compact(messages, set(record.ref_ids))
            return sum(estimate_tokens(m) for m in messages)
        return conversation + estimate_tokens(messages[-1])

    async def _forced_summarize(self, manager: Any, messages: list[Message], conversation: int, step: int, ep: Episode, tracker: Any) -> int:
        """At the budget: ask for a summarize (the only tool offered) and compact; without a valid one,
        every referenced result is removed. The loop then goes on."""
        ep.forced_summaries += 1
        shown = manager.shown_ref_ids()
        messages.append(manager.force_request(conversation, shown))
        schemas = [forced_summarize_schema(s, shown) for s in self.tool_schemas if compacts_context(s["function"]["name"])]
        completion = await self._call_model(messages, self.protocol.request(schemas, allow_answer=False), step, ep, final=False)
        messages.append(self.protocol.assistant_message(completion))
        summarized = False
        for action in self.protocol.parse(completion):
            if isinstance(action, ToolAction) and compacts_context(action.name) and not summarized:
                note = await self._run_tool(action, step, ep, tracker)
                messages.append(note)
                self._after_tool(manager, action, ep.tool_calls[-1], messages, conversation)
                summarized = not ep.tool_calls[-1].error
            elif isinstance(action, ToolAction):  # a native reply must answer every call it made
                messages.append(self.protocol.observation(action, EXTRA_CALL_NOTE))
        if not summarized:
            ep.guard_rail_events.append(f"step {step}: no valid summarize when the context was full; every referenced result removed")
            manager.compact(messages, set())
        return sum(estimate_tokens(m) for m in messages)

    def _fit_observation(self, action: ToolAction, note: Message, conversation: int, ep: Episode, step: int) -> Message:
        """An observation must leave room in the model's context window for the forced-answer prompt
        and a reply (without a known window: cross the budget by at most CONTEXT_MARGIN_TOKENS); a
        larger one is cut to fit, with a note to the agent, so the forced answer always happens."""
        if self.config.token_budget is None:
            return note
        window = getattr(self.backend, "context_window", None)
        ceiling = window - reply_room(self.config.max_reply_tokens or self.backend.max_tokens, window) if window else self.config.token_budget + CONTEXT_MARGIN_TOKENS
        room = ceiling - conversation - estimate_tokens(Message("user", self.method.final_text))
        size = estimate_tokens(note)
        if size <= room:
            return note
        room = int(room * 0.9) - 16  # the backend's tokenizer may count the cut text higher than cl100k does
        record = ep.tool_calls[-1]  # the call `note` shows
        text = record.text
        text_tokens = count_tokens(text)
        keep = max(0, room - (size - text_tokens) - count_tokens(TRUNCATION_NOTE))
        kept = truncate_tokens(text, keep)
        cut = self.protocol.observation(action, kept + TRUNCATION_NOTE)
        while keep > 0 and estimate_tokens(cut) > room:  # token counts of joined pieces are not additive
            keep = max(0, keep - (estimate_tokens(cut) - room))
            kept = truncate_tokens(text, keep)
            cut = self.protocol.observation(action, kept + TRUNCATION_NOTE)
        ep.truncated_observations += 1
        ep.guard_rail_events.append(f"step {step}: {action.name} result cut from {size} to {estimate_tokens(cut)} tokens to fit the context window")
        # The record says what the model was shown: retrieved tokens count the text put into the
        # context, so a cut result counts the share of its retrieved text that was kept.
        record.retrieved_tokens = round(record.retrieved_tokens * count_tokens(kept) / max(1, text_tokens))
        record.chunk_ids = chunk_ids_shown(record.chunk_ids, text, len(kept))
        record.neighbour_ids = [n for n in record.neighbour_ids if f": {n}" in kept]
        record.text = kept + TRUNCATION_NOTE
        return cut

    def _controller_call(self, ep: Episode):
        """The model call of a method that drives its own episode (a step per call; a schema only under json)."""

        async def call(messages: list[Message], response_schema: dict[str, Any] | None = None, final: bool = False) -> Completion:
            ep.steps += 1
            request = {"response_schema": response_schema} if response_schema and isinstance(self.protocol, JsonProtocol) else {}
            return await self._call_model(messages, request, ep.steps, ep, final=final)

        return call

    def _offered_tools(self, shown: list[str], step: int, ep: Episode) -> list[dict[str, Any]]:
        """The tool schemas of this step: under guard_rails.shown_chunk_ids_only, the ids a tool takes
        from earlier results (chunk_read's) restricted to the ids shown (as a forced summarize restricts
        its reference ids), and such a tool left out while none has been shown."""
        restricted = self.shown_id_arguments if self.config.guard_rails.shown_chunk_ids_only else {}
        if not restricted:
            return self.tool_schemas
        if not shown:
            ep.guard_rail_events += [f"step {step}: {name} not offered (no chunk id shown yet)" for name in restricted]
        return [
            shown_ids_only(s, restricted[s["function"]["name"]], shown) if s["function"]["name"] in restricted else s
            for s in self.tool_schemas
            if shown or s["function"]["name"] not in restricted
        ]

    def _refuse_answer(self, ep: Episode, refusals: int) -> bool:
        rails = self.config.guard_rails
        if not (rails.require_read_before_answer and self.allowed and refusals < rails.max_refusals):
            return False
        return not any(c.retrieved_tokens and not c.error and shows_full_text(c.name, self.method.full_text) for c in ep.tool_calls)

    async def _call_model(self, messages: list[Message], request: dict[str, Any], step: int, ep: Episode, final: bool) -> Completion:
        cfg = self.config
        attempts = 0
        started = time.perf_counter()

        def record_call(*usage: int | None, **fields: Any) -> None:
            latency_s = time.perf_counter() - started - queued.seconds
            ep.model_calls.append(ModelCallRecord(step, *usage, latency_s, attempts, final=final, queued_s=queued.seconds, **fields))

        retrying = AsyncRetrying(
            stop=stop_after_attempt(max(1, cfg.llm_attempts)),
            wait=wait_exponential_jitter(multiplier=cfg.backoff_initial_s, max=cfg.backoff_max_s, jitter=cfg.backoff_jitter_s),
            retry=retry_if_exception(lambda e: isinstance(e, LLMError) and e.retryable),
            reraise=True,
        )
        try:
            with queue_clock() as queued:  # a backend's wait for a slot is not time at the model
                async for attempt in retrying:
                    with attempt:
                        attempts += 1
                        completion = await self.backend.acomplete(list(messages), max_tokens=cfg.max_reply_tokens, **request)
        except Exception as exc:
            reason = f"{type(exc).__name__}: {str(exc)[:300]}"
            record_call(None, None, None, error=reason)
            raise EpisodeFailed(f"model call failed after {attempts} attempt(s): {reason}") from exc
        if not isinstance(completion, Completion):
            raise EpisodeFailed(f"backend returned {type(completion).__name__}, not a Completion")
        usage = (completion.prompt_tokens, completion.completion_tokens, completion.reasoning_tokens)
        record_call(*usage, finish_reason=completion.finish_reason, raw=completion.text or "")
        return completion

    async def _run_tool(self, action: ToolAction, step: int, ep: Episode, tracker: Any) -> Message:
        started = time.perf_counter()
        record = ToolCallRecord(step=step, name=str(action.name)[:200], arguments=recorded_arguments(action.arguments), text="")
        if action.name not in self.allowed:
            allowed = ", ".join(self.allowed) or "none (answer directly)"
            record.error, record.failure = "unknown tool", UNKNOWN_TOOL
            record.text = f"Error: there is no tool named {str(action.name)[:100]!r}. The tools you can use are: {allowed}."
        else:
            try:
                result = checked(await self.method.acall_tool(self.ctx, action.name, action.arguments, tracker))
            except Exception as exc:
                # Only a tool's refusal of its arguments (an error result) is the model's to read;
                # anything else (a tool server gone, a lost worker, a tool's own failure) fails the
                # episode with the cause, kept in the record and never shown to the model.
                cause = str(exc) if isinstance(exc, ToolInfrastructureError) else f"{type(exc).__name__}: {str(exc)[:300]}"
                record.error, record.failure, record.latency_s = cause, INFRASTRUCTURE, time.perf_counter() - started
                ep.tool_calls.append(record)
                raise EpisodeFailed(f"step {step}: the {record.name} call failed: {cause}") from exc
            record.text, record.error, record.failure, record.retrieved_tokens = result.text, result.error, result.failure, result.retrieved_tokens
            record.unknown_id_count = len(result.details.get("unknown_ids") or ())
            record.chunk_ids = [h.chunk_id for h in result.results]
            record.neighbour_ids = [n for h in result.results for n in (h.prev_id, h.next_id) if n]
            record.ref_ids = list(result.details.get("ref_ids", []))
        record.latency_s = time.perf_counter() - started
        ep.tool_calls.append(record)
        return self.protocol.observation(action, record.text)


def fit_budget(config: AgentConfig, backend: LLMBackend) -> AgentConfig:
    """Within a known context window, the token budget capped so the forced answer still fits (None: all it allows)."""
    window = getattr(backend, "context_window", None)
    return replace(config, token_budget=fitted_token_budget(config.token_budget, window, reply_cap(config, backend))) if window else config


def reply_cap(config: AgentConfig, backend: LLMBackend) -> int:
    """The reply cap each model call of an episode sends (`max_tokens`): the agent's, else the backend's."""
    return int(config.max_reply_tokens or backend.max_tokens)


def fitted_token_budget(token_budget: int | None, window: int, cap: int) -> int:
    """The token budget an episode runs under in a `window`-token context with replies capped at
    `cap`: what the window holds beside the reply room and CONTEXT_MARGIN_TOKENS, or the budget
    set when smaller (None: as much as the window allows). The protocol card derives it the same
    way for runs that did not record it (arag.evaluation.protocol)."""
    limit = max(256, window - reply_room(cap, window) - CONTEXT_MARGIN_TOKENS)
    return limit if token_budget is None else min(token_budget, limit)


def chunk_ids_shown(chunk_ids: list[str], text: str, kept_chars: int) -> list[str]:
    """The chunks of a result cut to `kept_chars` characters whose header kept its whole id
    (arag.tools.render.chunk_header_end); an id without a header (document tools' lines) stays."""
    return [chunk_id for chunk_id in chunk_ids if chunk_header_end(text, chunk_id) <= kept_chars]


def truncate_tokens(text: str, max_tokens: int) -> str:
    """The first `max_tokens` tokens of `text` (cl100k_base, the budget's tokenizer)."""
    tokens = encoding().encode_ordinary(text)
    return text if len(tokens) <= max_tokens else encoding().decode(tokens[:max_tokens])


def recorded_arguments(arguments: Any) -> Any:
    """Arguments as JSON for the record: the parsed object when the model's text parses, else the raw text."""
    if isinstance(arguments, (str, bytes)):
        try:
            return json.loads(arguments)
        except (ValueError, RecursionError):
            return arguments if isinstance(arguments, str) else arguments.decode("utf-8", "replace")
    return arguments


def estimate_tokens(message: Message) -> int:
    text = message.content or ""
    text += "".join(c.name + c.arguments for c in message.tool_calls)
    try:
        return count_tokens(text) + MESSAGE_OVERHEAD_TOKENS
    except Exception:  # text the tokenizer rejects (e.g. lone surrogates from a broken model): rough size
        return len(text) // 3 + MESSAGE_OVERHEAD_TOKENS


def reported_size(completion: Completion, fallback: int) -> int:
    """The conversation's size after this reply: exact when the backend reported both counts."""
    if completion.prompt_tokens is not None and completion.completion_tokens is not None:
        return completion.prompt_tokens + completion.completion_tokens
    return fallback
