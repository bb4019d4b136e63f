"""keyword_search at this checkout and at an earlier commit, alternated on the same index shape:
each version runs benchmarks/keyword_recurring.py (`--no-reference`) as a subprocess on its own view
of the index, since a tools cache holds one format and each version builds its own; the order is
reversed every other round (benchmarks/code_versions.py).

    python -m benchmarks.keyword_formats --index /tmp/kw-449k --commit 6bf560b [--rounds 2] [--queries 100] [--workdir /tmp/arag-keyword-formats]

The earlier commit's view is --workdir/index: links to the index's files but its own tools_cache
(built on first opening, by that commit's code: minutes at 449k chunks). Prints, per round and side,
keyword_recurring's p50/p95/mean of the union baseline, of each question asked the first time and
of each asked again, then the medians over rounds per side.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from benchmarks.code_versions import Code, alternate, checkout, this_checkout
from benchmarks.keyword_recurring import QUESTIONS, medians_line, run_printed, sides_line


def linked_view(index: Path, view: Path) -> Path:
    """`view` holding a link to each of the index's files and folders but its tools cache."""
    view.mkdir(parents=True, exist_ok=True)
    for entry in index.iterdir():
        if entry.name != "tools_cache" and not (view / entry.name).exists():
            (view / entry.name).symlink_to(entry.resolve())
    return view


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", type=Path, required=True)
    ap.add_argument("--commit", required=True, help="the earlier code to compare with")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--questions", type=Path, default=QUESTIONS)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/arag-keyword-formats"))
    args = ap.parse_args(argv)

    new, old = this_checkout(), checkout(args.commit, args.workdir / "code")
    indexes = {new: args.index, old: linked_view(args.index, args.workdir / "index")}
    runs: dict[Code, list[dict]] = {new: [], old: []}

    def measure(code: Code) -> float:
        started = time.perf_counter()
        runs[code].append(run_printed(code, indexes[code], args.questions, args.queries))
        print(f"    {code.label}: {sides_line(runs[code][-1])}", flush=True)
        return time.perf_counter() - started

    for code in (old, new):  # each cache built (or checked) before any round is timed
        run_printed(code, indexes[code], args.questions, 1)
    alternate([new, old], args.rounds, measure)
    print(f"keyword_formats: {args.queries} questions, {args.rounds} rounds, medians over rounds:")
    for code in (old, new):
        print(f"  {code.label}: {medians_line(runs[code])}")


if __name__ == "__main__":
    main()
