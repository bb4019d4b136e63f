"""How long the viewer's pages take on a results tree (arag.viewer, in process, no browser).

    python -m benchmarks.viewer_pages benchmarks/cpu_evaluations/results [--episodes 20] [--rounds 3]

Times, in ms: the first listing (reads every run), the listing again (the runs cached), episode
pages (one per run, round-robin, `--episodes` of them), and each dataset's compare page for the
question the most runs share. Each figure is the median over `--rounds` rounds (max beside it).
Run it from a checkout to time that checkout's viewer: `cd <checkout> && python -m benchmarks.viewer_pages <tree>`.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from pathlib import Path


def measure(tree: Path, episodes: int, rounds: int) -> dict[str, tuple[float, float]]:
    from starlette.testclient import TestClient

    from arag.evaluation.results import RunStore, find_run_dirs
    from arag.viewer import create_app

    runs = {d.name: (d, sorted({r["question_id"] for r in RunStore.at(d).read_rows(["question_id"])})) for d in find_run_dirs(tree)}
    datasets = {d.name: str(RunStore.at(d).read_info().get("settings", {}).get("dataset")) for d, _ in runs.values()}
    picks = [(run_id, qids[i % len(qids)]) for i in range(episodes) for run_id, (_, qids) in [list(runs.items())[i % len(runs)]] if qids]
    shared: dict[str, Counter] = {}
    for run_id, (_, qids) in runs.items():
        shared.setdefault(datasets[run_id], Counter()).update(qids)
    compares = [(ds, counts.most_common(1)[0][0]) for ds, counts in sorted(shared.items())]

    timings: dict[str, list[float]] = {}

    def timed(label: str, client, url: str, params: dict | None = None) -> None:
        started = time.perf_counter()
        response = client.get(url, params=params)
        timings.setdefault(label, []).append(1000 * (time.perf_counter() - started))
        assert response.status_code == 200, (url, params, response.status_code)

    for _ in range(rounds):
        with TestClient(create_app(tree)) as client:  # a fresh app: nothing cached
            timed("listing, first", client, "/")
            timed("listing, cached", client, "/")
            for run_id, qid in picks:
                timed("episode", client, "/episode", {"run": run_id, "q": qid})
            for ds, qid in compares:
                timed(f"compare {ds} ({sum(datasets[r] == ds and qid in q for r, (_, q) in runs.items())} runs)", client, "/compare", {"dataset": ds, "q": qid})
    return {label: (statistics.median(values), max(values)) for label, values in timings.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("tree", type=Path)
    p.add_argument("--episodes", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    for label, (median, worst) in measure(args.tree.resolve(), args.episodes, args.rounds).items():
        print(f"{label:40s} median {median:8.1f} ms   max {worst:8.1f} ms")


if __name__ == "__main__":
    main()
