"""LLM-Acc: an LLM judge decides whether a prediction means the gold answer (docs/evaluation.md,
"Judges"). No usable verdict after `attempts` tries is `failed`: LLM-Acc unknown, never "wrong".
With `skip_exact` a normalised exact match is correct unasked: the judge could only agree."""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass
from typing import Any, Sequence

from arag.config.schemas import TEMPLATE_FIELDS, JudgeConfig  # noqa: F401 (the judge's settings; callers take them from here too)
from arag.llm.base import JSON, LLMBackend
from arag.llm.types import LLMError, Message

CORRECT = "correct"
INCORRECT = "incorrect"
VERDICT_FAILED = "failed"  # the judge gave no usable verdict: LLM-Acc unknown
SKIPPED = "skipped"  # judging disabled
NO_ANSWER = "no_answer"  # the episode produced no prediction (scored 0, the judge is not asked)
EXACT_MATCH = "exact_match"  # normalised exact match: correct without a judge call
# LLM-Acc by verdict status: 0 for no answer; unknown (None) when the judge failed or was off.
LLM_ACC = {CORRECT: 1.0, EXACT_MATCH: 1.0, INCORRECT: 0.0, NO_ANSWER: 0.0}

VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"verdict": {"type": "string", "enum": [CORRECT, INCORRECT]}},
    "required": ["verdict"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class Verdict:
    status: str
    reply: str | None = None
    error: str | None = None
    latency_s: float = 0.0

    @property
    def llm_acc(self) -> float | None:
        return LLM_ACC.get(self.status)

    def columns(self) -> dict[str, Any]:
        return {"llm_acc": self.llm_acc, "judge_status": self.status, "judge_error": self.error, "judge_reply": self.reply, "judge_s": self.latency_s}


class Judge:
    def __init__(self, backend: LLMBackend, config: JudgeConfig):
        self.backend = backend
        self.config = config
        self.structured = JSON in backend.protocols

    def messages(self, question: str, golds: Sequence[str], prediction: str) -> list[Message]:
        gold = " | ".join(golds)
        return [
            Message("system", self.config.system_prompt.strip()),
            Message("user", self.config.user_template.format(question=question, gold=gold, prediction=prediction).strip()),
        ]

    async def judge(self, question: str, golds: Sequence[str], prediction: str | None, *, exact: bool = False) -> Verdict:
        if not self.config.enabled:  # no judge: LLM-Acc is unknown for every row, never 0 or 1 by a shortcut
            return Verdict(SKIPPED)
        if prediction is None or not prediction.strip():
            return Verdict(NO_ANSWER)
        if self.config.skip_exact and exact:
            return Verdict(EXACT_MATCH)
        started = time.perf_counter()
        messages = self.messages(question, golds, prediction)
        problem = "no attempt"
        reply: str | None = None
        schema = VERDICT_SCHEMA if self.structured else None
        for attempt in range(max(1, self.config.attempts)):
            try:
                completion = await self.backend.acomplete(messages, response_schema=schema, max_tokens=self.config.max_tokens)
            except LLMError as exc:
                problem = f"LLMError: {str(exc)[:300]}"
                if not exc.retryable:
                    break
                await asyncio.sleep(min(8.0, 0.5 * 2**attempt))
                continue
            except Exception as exc:  # a backend bug: a judge failure, not a lost episode
                problem = f"{type(exc).__name__}: {str(exc)[:300]}"
                break
            reply = completion.text or ""
            if (status := parse_verdict(reply)) is not None:
                return Verdict(status, reply[:500], None, time.perf_counter() - started)
            problem = f"unusable judge reply: {reply[:200]!r}"
        return Verdict(VERDICT_FAILED, reply[:500] if reply else None, problem, time.perf_counter() - started)


_WORD = re.compile(r"[a-z]+")


def parse_verdict(text: str) -> str | None:
    """`{"verdict": "correct"}` (or a bare correct/incorrect/yes/no) → CORRECT/INCORRECT; None if unusable."""
    text = (text or "").strip()
    try:
        obj = json.loads(text)
        value = obj.get("verdict", obj.get("equivalent")) if isinstance(obj, dict) else obj
    except (ValueError, RecursionError):
        words = _WORD.findall(text.lower())
        value = words[0] if words else None
    if isinstance(value, bool):
        return CORRECT if value else INCORRECT
    value = str(value).strip().lower() if value is not None else ""
    if value in ("correct", "yes", "true", "equivalent"):
        return CORRECT
    if value in ("incorrect", "no", "false", "wrong"):
        return INCORRECT
    return None
