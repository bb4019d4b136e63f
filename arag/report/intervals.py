"""How much an accuracy could move by chance: the 95% Wilson interval of one accuracy, and for two runs
over their shared questions the exact McNemar test and a paired bootstrap interval of Δ = A − B.
A difference is "within noise" unless p < 0.05 and its interval excludes 0 (docs/evaluation.md,
"Noise: intervals and paired comparisons")."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Mapping, Sequence

Z95 = 1.959963984540054  # the standard normal's 97.5th percentile
ALPHA = 0.05
RESAMPLES = 10_000
SEED = 0
WITHIN_NOISE = "within noise"
DIFFERS = "differs"
# The legend every table with intervals carries once.
LEGEND = "Accuracies in %, each with its 95% Wilson interval [low, high] and n, the questions it averages over."


def wilson(successes: float, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval for `successes` of `n` (both bounds in [0, 1]); (0, 1) for n = 0."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    scale = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / scale
    half = z / scale * math.sqrt(max(p * (1 - p) / n + z * z / (4 * n * n), 0.0))
    # At 0 or n the bound is exactly 0 or 1; the closed form leaves a rounding error there.
    low = 0.0 if successes <= 0 else max(0.0, centre - half)
    high = 1.0 if successes >= n else min(1.0, centre + half)
    return low, high


@dataclass(frozen=True)
class Proportion:
    """An accuracy: `successes` of `n` scored questions, with its 95% Wilson interval."""

    successes: float
    n: int

    @property
    def value(self) -> float | None:
        return self.successes / self.n if self.n else None

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.successes, self.n)

    def text(self, unit: str = "") -> str:
        """'10.0 [2.8, 30.1] n=20' (in %, `unit` after the value: the viewer's "%"); '–' with no scored question."""
        if not self.n:
            return "–"
        low, high = self.interval
        return f"{100 * self.value:.1f}{unit} [{100 * low:.1f}, {100 * high:.1f}] n={self.n}"


def proportion(total: float | None, n: int | None) -> Proportion | None:
    """The accuracy of SQL's sum and count of 0/1 scores; None where nothing was scored."""
    return Proportion(float(total or 0.0), int(n)) if n else None


def failures_text(failed: int | None, causes: Sequence[str] | None = None, noun: str = " failed") -> str:
    """'3 failed (model call failed after 4 attempt(s); +1 other cause)'; '' for none."""
    if not failed:
        return ""
    ranked = [c for c, _ in Counter(causes or ()).most_common()]
    if not ranked:
        return f"{failed}{noun}"
    others = len(ranked) - 1
    more = f"; +{others} other cause{'s' if others > 1 else ''}" if others else ""
    return f"{failed}{noun} ({ranked[0]}{more})"


def cell(total: float | None, n: int | None, failed: int | None = 0, causes: Sequence[str] | None = None) -> str:
    """'66.7 [20.8, 93.9] n=3 · 2 failed (…)' from a score sum and count; the failures alone, or '–'."""
    p = proportion(total, n)
    failures = failures_text(failed, causes)
    return " · ".join(t for t in (p.text() if p else "", failures) if t) or "–"


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """Two-sided exact McNemar p-value for the discordant counts (right only in a, right only in b)."""
    n = a_only + b_only
    k = min(a_only, b_only)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def bootstrap_interval(differences: list[float], resamples: int = RESAMPLES, seed: int = SEED) -> tuple[float, float]:
    """The 95% percentile interval of the mean of `differences` over `resamples` resamplings with replacement
    (drawn as a multinomial over the distinct values: the same distribution)."""
    import numpy as np

    if not differences:
        return 0.0, 0.0
    values, counts = np.unique(np.asarray(differences, dtype=float), return_counts=True)
    n = int(counts.sum())
    draws = np.random.default_rng(seed).multinomial(n, counts / n, size=resamples)
    means = draws @ values / n
    low, high = np.percentile(means, [100 * ALPHA / 2, 100 * (1 - ALPHA / 2)])
    return float(low), float(high)


@dataclass(frozen=True)
class Paired:
    """Run a against run b over their shared scored questions."""

    n: int
    a: float  # run a's accuracy on the shared questions
    b: float
    a_only: int  # questions right in a and wrong in b
    b_only: int
    interval: tuple[float, float]  # paired bootstrap 95% interval of Δ = a − b
    p: float  # exact McNemar

    @property
    def delta(self) -> float:
        return self.a - self.b

    @property
    def within_noise(self) -> bool:
        low, high = self.interval
        return self.p >= ALPHA or low <= 0.0 <= high

    @property
    def verdict(self) -> str:
        return WITHIN_NOISE if self.within_noise else DIFFERS


def paired(a: Mapping[str, float], b: Mapping[str, float]) -> Paired | None:
    """Two runs' scores ({question id: 0/1}) compared over the ids both hold; None when they share none."""
    shared = sorted(a.keys() & b.keys())
    if not shared:
        return None
    sa = [float(a[q]) for q in shared]
    sb = [float(b[q]) for q in shared]
    n = len(shared)
    a_only = sum(x > y for x, y in zip(sa, sb))
    b_only = sum(y > x for x, y in zip(sa, sb))
    return Paired(n, sum(sa) / n, sum(sb) / n, a_only, b_only, bootstrap_interval([x - y for x, y in zip(sa, sb)]), mcnemar_exact(a_only, b_only))


DELTA = "Δ (A − B)"
PAIRED_HEADER = ("n", "A %", "B %", DELTA, "95% CI of Δ", "right only in A / B", "p", "verdict")


def paired_cells(p: Paired) -> list[str]:
    """Table cells (PAIRED_HEADER): n, a, b, Δ = a − b (points), its 95% interval, discordant counts, p, verdict."""
    low, high = p.interval
    return [str(p.n), f"{100 * p.a:.1f}", f"{100 * p.b:.1f}", f"{100 * p.delta:+.1f}", f"[{100 * low:+.1f}, {100 * high:+.1f}]",
            f"{p.a_only} / {p.b_only}", f"{p.p:.3f}", p.verdict]
