"""Noise shown (arag.report.intervals, arag.report.paired): every accuracy with its n and
95% Wilson interval, paired comparisons of runs over their shared questions (exact McNemar, paired
bootstrap) with a "within noise" verdict, intervals drawn in the sweep plots, and the committed
2Wiki re-run of the first 20 questions read through all of it."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from arag.report.intervals import DIFFERS, WITHIN_NOISE, Proportion, bootstrap_interval, mcnemar_exact, paired, wilson
from arag.report.build import build_report
from arag.report.episodes import connect, method_label, varying_settings
from arag.report.figures import accuracy_figure
from arag.report.paired import comparisons
from arag.report.figures import paper_figure
from arag.report.sweeps import paper_figure_panels
from tests.report.test_report_layouts import one_at_a_time, section, write_run
from tests.support.report_tables import table

COMMITTED = Path(__file__).resolve().parents[2] / "benchmarks" / "cpu_evaluations" / "results"
# The 2Wiki runs of A-RAG (Naive) and (Full) before (50 questions, commit a058428) and after (the
# first 20 again, commit 9161588): benchmarks/cpu_evaluations/README.md.
BEFORE = {"arag_naive": "2wiki/50522084c0aceef9", "arag_full": "2wiki/063553b6ed351115"}
AFTER = {"arag_naive": "2wiki20/5de53ded0077342a", "arag_full": "2wiki20/d45a26133a83ba16"}


def test_wilson_interval_by_hand_and_at_the_edges():
    # 2 of 20: centre (0.1 + 1.96²/40) / (1 + 1.96²/20) = 0.1644, half-width 0.1366.
    assert Proportion(2, 20).text() == "10.0 [2.8, 30.1] n=20"
    assert Proportion(0, 1).text() == "0.0 [0.0, 79.3] n=1" and Proportion(1, 1).text() == "100.0 [20.7, 100.0] n=1"
    assert Proportion(0, 0).text() == "–" and wilson(0, 0) == (0.0, 1.0)
    for k in range(0, 31):  # inside [0, 1], around the estimate, mirror-symmetric
        low, high = wilson(k, 30)
        assert 0.0 <= low <= k / 30 <= high <= 1.0
        assert (low, high) == pytest.approx(tuple(1 - b for b in reversed(wilson(30 - k, 30))))
    assert wilson(50, 100)[1] - wilson(50, 100)[0] < wilson(5, 10)[1] - wilson(5, 10)[0]  # more questions, a narrower interval


def test_mcnemar_exact_is_the_binomial_tail_of_the_discordant_questions():
    assert mcnemar_exact(0, 0) == 1.0 and mcnemar_exact(1, 0) == 1.0
    assert mcnemar_exact(0, 6) == pytest.approx(2 / 64)
    assert mcnemar_exact(2, 8) == pytest.approx(2 * (1 + 10 + 45) / 1024)
    assert mcnemar_exact(8, 2) == mcnemar_exact(2, 8)


def test_the_paired_bootstrap_is_seeded_and_paired():
    diffs = [1.0] * 6 + [0.0] * 10 + [-1.0] * 2
    assert bootstrap_interval(diffs) == bootstrap_interval(diffs)  # the same inputs, the same interval
    low, high = bootstrap_interval(diffs)
    assert low < sum(diffs) / len(diffs) < high
    assert bootstrap_interval([0.0] * 20) == (0.0, 0.0)
    # Only the shared questions count: q0..q4 against q2..q6 is three questions.
    result = paired({f"q{i}": 1.0 for i in range(5)}, {f"q{i}": float(i != 2) for i in range(2, 7)})
    assert (result.n, result.a, result.a_only, result.b_only) == (3, 1.0, 1, 0) and result.verdict == WITHIN_NOISE
    assert paired({"q0": 1.0}, {"q1": 1.0}) is None
    # 40 questions, 5 right against 35: far outside chance.
    clear = paired({f"q{i}": float(i < 5) for i in range(40)}, {f"q{i}": float(i < 35) for i in range(40)})
    assert clear.delta == -0.75 and clear.p < 1e-6 and clear.interval[1] < -0.5 and clear.verdict == DIFFERS  # Δ = A − B


def exact_bootstrap_interval(differences: list[float], level: float = 0.95) -> tuple[float, float]:
    """The reference: the bootstrap distribution of the mean enumerated exactly (every count of each
    distinct value a resample of n questions can hold, with its multinomial probability), and its 2.5th
    and 97.5th percentiles as the smallest means whose cumulative probability reaches them."""
    import math
    from collections import Counter

    n, counts = len(differences), Counter(differences)
    values, probs = list(counts), [c / len(differences) for c in counts.values()]
    dist: dict[float, float] = {}

    def draws(left: int, k: int):
        if k == len(values) - 1:
            yield (left,)
            return
        for c in range(left + 1):
            for rest in draws(left - c, k + 1):
                yield (c, *rest)

    for held in draws(n, 0):
        prob = math.exp(math.lgamma(n + 1) + sum(c * math.log(p) - math.lgamma(c + 1) for p, c in zip(probs, held)))
        mean = round(sum(v * c for v, c in zip(values, held)) / n, 12)
        dist[mean] = dist.get(mean, 0.0) + prob
    cdf, low, high = 0.0, None, None
    for mean in sorted(dist):
        cdf += dist[mean]
        low = mean if low is None and cdf >= (1 - level) / 2 else low
        high = mean if high is None and cdf >= (1 + level) / 2 else high
    return low, high


@pytest.mark.parametrize("differences", [
    [1.0] * 40 + [0.0] * 140 + [-1.0] * 20,
    [1.0] * 15 + [0.0] * 50 + [-1.0] * 35,
    [1.0] * 30 + [0.0] * 90 + [-1.0] * 3,
])
def test_the_bootstrap_interval_is_the_exact_bootstraps(differences):
    """Against the exactly enumerated bootstrap distribution (not a second sampler): 10,000 seeded
    resamplings land on its percentiles, or on the neighbouring mean where the exact cumulative
    probability sits within sampling error of 2.5% or 97.5% (the means are multiples of 1/n)."""
    step = 1 / len(differences)
    low, high = exact_bootstrap_interval(differences)
    got = bootstrap_interval(differences)
    assert abs(got[0] - low) <= step + 1e-9 and abs(got[1] - high) <= step + 1e-9, (got, (low, high))
    assert low < sum(differences) / len(differences) < high
    # the tolerance still tells a 95% interval from a 90% or 99% one on these inputs
    for level in (0.90, 0.99):
        other = exact_bootstrap_interval(differences, level)
        assert abs(other[0] - got[0]) > step + 1e-9 or abs(other[1] - got[1]) > step + 1e-9, level


def test_the_committed_2wiki20_before_and_after_is_within_noise(tmp_path):
    """The stop note's comparison: A-RAG (Naive) 15.0 before against 10.0 after on the same first 20
    2Wiki questions (one question apart) is marked within noise, not as a difference."""
    results = tmp_path / "results"
    for run in [*BEFORE.values(), *AFTER.values()]:
        shutil.copytree(COMMITTED / run, results / Path(run).name)
    ((ids,),) = duckdb.sql(f"SELECT list(DISTINCT question_id ORDER BY question_id) FROM read_parquet('{COMMITTED / AFTER['arag_naive']}/episodes/*.parquet')").fetchall()
    assert len(ids) == 20
    where = "question_id IN (" + ", ".join(f"'{q}'" for q in ids) + ")"
    text = build_report(results, tmp_path / "report", where=where, paper_columns=True).markdown
    main = section(text, "## Main results")
    assert "| A-RAG (Naive) | 15.0 [5.2, 36.0] n=20 | 15.0 [5.2, 36.0] n=20 |" in main and "| A-RAG (Naive) | 10.0 [2.8, 30.1] n=20 | 10.0 [2.8, 30.1] n=20 |" in main
    by = {(r["method"], r["metric"]): r for r in table(text, "Within one method", "Paired comparisons").records}
    naive = by[("A-RAG (Naive)", "LLM-Acc")]
    assert naive["runs A → B"] == f"{Path(BEFORE['arag_naive']).name} → {Path(AFTER['arag_naive']).name}"
    assert (naive["n"], naive["A %"], naive["B %"], naive["Δ (A − B)"]) == ("20", "15.0", "10.0", "+5.0")
    assert naive["verdict"] == WITHIN_NOISE and float(naive["p"]) >= 0.05
    assert "max_steps 10 → 15" in naive["differs in"] and "code a058428 → 9161588" in naive["differs in"]
    assert all(r["verdict"] == WITHIN_NOISE for r in by.values()) and len(by) == 4  # both methods, both accuracies
    # Without the filter the same pair is compared over the 20 questions both runs answered.
    unfiltered = [c for c in comparisons(connect(results), varying_settings(connect(results))) if c.table is None and c.a.method == "arag_naive" and c.metric == "LLM-Acc"]
    assert [(c.result.n, round(100 * c.result.a, 1), round(100 * c.result.b, 1), c.result.verdict) for c in unfiltered] == [(20, 15.0, 10.0, WITHIN_NOISE)]


def test_sweep_neighbours_are_paired_and_a_clear_difference_differs(tmp_path):
    results = tmp_path / "results"
    one_at_a_time(results)  # steps 5..20 at effort medium; effort minimal..high at 10 steps
    con = connect(results)
    found = {(c.a.run_id, c.b.run_id) for c in comparisons(con, varying_settings(con))}
    assert found == {("steps5", "steps10"), ("steps10", "steps15"), ("steps15", "steps20"),
                     ("effort-minimal", "effort-low"), ("effort-low", "steps10"), ("steps10", "effort-high")}
    clear = tmp_path / "clear"
    write_run(clear, "few", "arag_full", 5, max_steps=5, n=40)
    write_run(clear, "many", "arag_full", 35, max_steps=20, n=40)
    write_run(clear, "naive", "arag_naive", 5, n=40)  # another method: never paired with these
    rows = table(build_report(clear).markdown, "Within one method", "Paired comparisons").records
    assert [(r["runs A → B"], r["differs in"], r["metric"], r["Δ (A − B)"], r["verdict"]) for r in rows] == [
        ("few → many", "max_steps 5 → 20", "LLM-Acc", "-75.0", DIFFERS), ("few → many", "max_steps 5 → 20", "Cont-Acc", "-75.0", DIFFERS)]


def test_the_sweep_plots_draw_each_points_interval(tmp_path):
    results = tmp_path / "results"
    for steps, good in ((5, 2), (10, 6)):
        write_run(results, f"s{steps}", "arag_full", good, max_steps=steps, contained=good + 1)
    fig = accuracy_figure(connect(results), "max_steps")
    bars = {c.get_label(): c for c in fig.axes[0].containers}
    llm = bars["A-RAG (Full) · reasoning_effort=medium (LLM-Acc)"]
    spans = sorted(v for seg in llm.lines[2][0].get_segments() for v in sorted(seg[:, 1]))
    assert spans == pytest.approx(sorted(100 * b for g in (2, 6) for b in wilson(g, 10)))
    assert "A-RAG (Full) · reasoning_effort=medium (Cont-Acc)" in bars
    con = connect(results)
    panels, _ = paper_figure_panels(con, varying_settings(con), method_label, official_steps=10)
    (ax,) = paper_figure(panels, 10).axes
    (band,) = ax.collections  # the 95% band around the LLM-Acc line
    ys = band.get_paths()[0].vertices[:, 1]
    assert (min(ys), max(ys)) == pytest.approx((100 * wilson(2, 10)[0], 100 * wilson(6, 10)[1]))
