"""Answer metrics over every gold answer (the best match counts), normalised as the SQuAD v1.1
evaluation script does, so numbers compare with published EM/F1 (docs/evaluation.md, "Metrics").
contain_acc is the A-RAG paper code's raw substring rule ("1946" is found in "19460", as there)."""

from __future__ import annotations

import re
import string
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    text = text.lower().translate(_PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _norm(text: str) -> str:
    """A gold answer that normalises to nothing (e.g. "The") is compared lower-cased instead."""
    n = normalize_answer(text)
    return n if n else " ".join(text.lower().split())


def _best(prediction: str | None, golds: Iterable[str], score: Callable[[str, str], float]) -> float:
    if not prediction:
        return 0.0
    p = _norm(prediction)
    return max((score(p, g) for g in map(_norm, golds) if g), default=0.0)


def token_f1(prediction: str, gold: str) -> float:
    p, g = prediction.split(), gold.split()
    common = Counter(p) & Counter(g)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


def exact_match(prediction: str | None, golds: Iterable[str]) -> float:
    return _best(prediction, golds, lambda p, g: float(p == g))


def f1(prediction: str | None, golds: Iterable[str]) -> float:
    return _best(prediction, golds, token_f1)


def contain_acc(prediction: str | None, golds: Iterable[str]) -> float:
    return _best(prediction, golds, lambda p, g: float(g in p))


def contain_acc_token(prediction: str | None, golds: Iterable[str]) -> float:
    """Whole-token containment: the gold's tokens appear as a contiguous run of the prediction's."""
    return _best(prediction, golds, lambda p, g: float(f" {g} " in f" {p} "))


@dataclass(frozen=True)
class AnswerScores:
    contain_acc: float
    exact_match: float
    f1: float
    contain_acc_token: float


def score_answer(prediction: str | None, golds: Iterable[str]) -> AnswerScores:
    golds = list(golds)
    return AnswerScores(contain_acc(prediction, golds), exact_match(prediction, golds), f1(prediction, golds), contain_acc_token(prediction, golds))
