"""The report's time over a results tree, this checkout beside an earlier commit in the same run.

    python -m benchmarks.report_speed [--results benchmarks/cpu_evaluations/results] [--commit f415985] [--rounds 5]

Each side runs `python -m pipelines.report results.path=<its own copy of the tree>` as a subprocess
(imports, Hydra, reading the files, every table and plot: what a person waits for), alternating
which goes first (benchmarks/code_versions.py). Prints each run's wall time, the medians and the
ratio. The copies keep the committed tree free of report files.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from arag.evaluation.results import RunStore, find_run_dirs
from benchmarks.code_versions import Code, alternate, arguments, checkout, summary, this_checkout


def main() -> None:
    args = arguments(__doc__.split("\n")[0])
    with tempfile.TemporaryDirectory(prefix="report-speed-") as tmp:
        work = Path(tmp)
        codes = [this_checkout(), checkout(args.commit, work / "previous")]
        trees = {}
        for i, code in enumerate(codes):
            trees[code] = work / f"results-{i}"
            shutil.copytree(args.results, trees[code], ignore=shutil.ignore_patterns("report"))

        def measure(code: Code) -> float:
            started = time.perf_counter()
            done = subprocess.run(code.command("pipelines.report", f"results.path={trees[code]}", f"hydra.run.dir={work / 'outputs'}"),
                                  cwd=code.root, env=code.env(), capture_output=True, text=True)
            seconds = time.perf_counter() - started
            if done.returncode != 0:
                raise SystemExit(f"{code.label}: the report failed:\n{done.stderr[-3000:]}")
            return seconds

        n = sum(len(RunStore.at(run).part_files()) for run in find_run_dirs(args.results))
        print(f"pipelines.report over {args.results} ({n} episode files), {args.rounds} rounds", flush=True)
        print(summary(alternate(codes, args.rounds, measure), "report wall time"))


if __name__ == "__main__":
    main()
