"""Answer metrics over every gold answer (the best match counts), normalised as the SQuAD v1.1
evaluation script does (lower case, no punctuation, no articles a/an/the, single spaces), so
numbers compare with published EM/F1 (docs/evaluation.md, "Metrics").

contain_acc is the A-RAG paper's evaluation code's Contain-Acc: raw substrings, so "1946" is found
in "19460" and "no" in "not known", as there; contain_acc_token is our stricter whole-token column
beside it. A gold answer that normalises to nothing (e.g. "The") is compared lower-cased and
stripped instead; a missing prediction (a failed episode) scores 0 on every metric.
"""

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
    n = normalize_answer(text)
    return n if n else " ".join(text.lower().split())


def _golds(golds: Iterable[str]) -> list[str]:
    out = [_norm(g) for g in golds]
    return [g for g in out if g]


def _best(prediction: str | None, golds: Iterable[str], score: Callable[[str, str], float]) -> float:
    """The best `score` of the normalised prediction against a normalised gold answer."""
    if not prediction:
        return 0.0
    p = _norm(prediction)
    return max((score(p, g) for g in _golds(golds)), default=0.0)


def token_f1(prediction: str, gold: str) -> float:
    """F1 of two already-normalised strings."""
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
    """The paper code's rule: normalised gold is a substring of the normalised prediction."""
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
