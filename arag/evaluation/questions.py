"""Benchmark questions: JSON Lines `{id, question, answers, supporting_titles, ...}` → `Question`s.
A bad line fails as `<file>:<line>: <reason>`, or with `on_bad_line="skip"` is kept in
`QuestionSet.rejects` for the caller to report: never dropped silently."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ON_BAD_LINE = ("error", "skip")


class QuestionFileError(ValueError):
    """The questions file is missing, unreadable, or has a bad line (named as file:line)."""


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    answers: tuple[str, ...]  # every accepted gold answer; metrics take the best match
    supporting_titles: tuple[str, ...] = ()  # corpus titles holding the evidence (may be empty)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "question": self.question, "answers": list(self.answers), "supporting_titles": list(self.supporting_titles)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Question":
        return cls(str(data["id"]), str(data["question"]), tuple(data["answers"]), tuple(data.get("supporting_titles") or ()))


@dataclass(frozen=True)
class RejectedLine:
    line: int
    reason: str

    def describe(self, path: Path) -> str:
        return f"{path}:{self.line}: {self.reason}"


@dataclass
class QuestionSet:
    path: Path
    sha256: str  # of the file's bytes: part of the run identity, so an edited file starts a new run
    questions: list[Question]
    rejects: list[RejectedLine] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The benchmark folder for `<benchmark>/questions.jsonl`, else the file stem."""
        return self.path.parent.name if self.path.stem == "questions" and self.path.parent.name else self.path.stem


def load_questions(path: str | Path, on_bad_line: str = "error") -> QuestionSet:
    if on_bad_line not in ON_BAD_LINE:
        raise ValueError(f"on_bad_line must be one of {', '.join(ON_BAD_LINE)}, got {on_bad_line!r}")
    path = Path(path)
    if not path.is_file():
        raise QuestionFileError(f"questions file not found: {path}" + (" (it is a directory)" if path.is_dir() else ""))
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise QuestionFileError(f"cannot read questions file {path}: {exc}") from exc
    questions: list[Question] = []
    rejects: list[RejectedLine] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue  # blank lines (and the final newline) are not records
        try:
            q = parse_line(raw)
            if q.id in seen:
                raise ValueError(f"duplicate question id {q.id!r} (first on line {seen[q.id]})")
        except ValueError as exc:
            reject = RejectedLine(number, str(exc))
            if on_bad_line == "error":
                raise QuestionFileError(reject.describe(path) + " (questions.on_bad_line=skip counts such lines and goes on)") from None
            rejects.append(reject)
            continue
        seen[q.id] = number
        questions.append(q)
    if not questions:
        raise QuestionFileError(f"no questions in {path}" + (f" ({len(rejects)} bad lines, first: {rejects[0].describe(path)})" if rejects else ""))
    return QuestionSet(path, hashlib.sha256(data).hexdigest(), questions, rejects)


def parse_line(raw: bytes) -> Question:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"not valid JSON ({str(exc)[:120]})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    qid = obj.get("id")
    if isinstance(qid, bool) or not isinstance(qid, (str, int)) or not str(qid).strip():
        raise ValueError("missing or empty 'id' (a string or an integer)")
    question = obj.get("question")
    if not isinstance(question, str) or not question.strip():
        raise ValueError("missing or empty 'question'")
    answers = obj.get("answers")
    if isinstance(answers, str):
        answers = [answers]
    if not isinstance(answers, list) or not answers or not all(isinstance(a, (str, int, float)) and not isinstance(a, bool) for a in answers):
        raise ValueError("'answers' must be a non-empty list of strings")
    answers = [str(a) for a in answers]
    if not any(a.strip() for a in answers):
        raise ValueError("'answers' holds only empty strings")
    titles = obj.get("supporting_titles") or []
    if not isinstance(titles, list) or not all(isinstance(t, str) for t in titles):
        raise ValueError("'supporting_titles' must be a list of strings")
    return Question(str(qid), question, tuple(answers), tuple(titles))
