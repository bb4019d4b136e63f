"""keyword_search on the same chunks in different numbers of parts, alternated: what a part costs.

    python -m benchmarks.keyword_parts --index /tmp/kw-449k --parts 20 8 [--rounds 2] [--queries 100] [--workdir /tmp/arag-keyword-parts]

--index is a text_only index (`python -m benchmarks.keyword_recurring --generate` writes one). For each
--parts N, --workdir/parts-N holds the same chunks and sentences in N parts, each some consecutive
parts of --index whole (tests/support/synthetic_index.py, `write_merged_index`): what a larger
`corpus.part_size_mb` plans from the same files. Each layout is first opened once (its tools caches
built or checked) and checked against the reference loop on --check-queries questions; then, per
round, benchmarks/keyword_recurring.py (`--no-reference`) runs on each layout as a subprocess, the
order reversed every other round (`alternate` of benchmarks/code_versions.py). Prints each run's p50/p95/mean of the union baseline, of each
question asked the first time and asked again, then the medians over rounds per layout, and
stops if the layouts' top-5 answers differ.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from benchmarks.code_versions import Code, alternate, this_checkout
from benchmarks.keyword_recurring import QUESTIONS, medians_line, run_printed, sides_line
from tests.support.synthetic_index import write_merged_index


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", type=Path, required=True)
    ap.add_argument("--parts", type=int, nargs="+", required=True, help="part counts to merge --index into")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--check-queries", type=int, default=10, help="questions checked against the reference loop on each layout first")
    ap.add_argument("--questions", type=Path, default=QUESTIONS)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/arag-keyword-parts"))
    args = ap.parse_args(argv)

    code = this_checkout()
    layouts = {Code(f"{len(json.loads((args.index / 'manifest.json').read_text())['parts'])} parts", code.root): args.index.resolve()}
    for n in args.parts:
        target = args.workdir / f"parts-{n}"
        if not (target / "manifest.json").exists():
            print(f"writing {target}: the chunks of {args.index} in {n} parts", flush=True)
            write_merged_index(args.index, target, n)
        layouts[Code(f"{n} parts", code.root)] = target.resolve()
    for layout, index in layouts.items():  # caches built or checked before any round is timed
        run_printed(layout, index, args.questions, args.check_queries, reference=True)
        print(f"  {layout.label} ({index}): identical to the reference on {args.check_queries} questions", flush=True)
    runs: dict[Code, list[dict]] = {layout: [] for layout in layouts}

    def measure(layout: Code) -> float:
        started = time.perf_counter()
        runs[layout].append(run_printed(layout, layouts[layout], args.questions, args.queries))
        print(f"    {layout.label}: {sides_line(runs[layout][-1])}", flush=True)
        return time.perf_counter() - started

    alternate(list(layouts), args.rounds, measure)
    answers = {r["answers_sha1"] for rs in runs.values() for r in rs}
    if len(answers) != 1:
        raise SystemExit(f"the layouts' answers differ: {answers}")
    print(f"keyword_parts: {args.queries} questions, {args.rounds} rounds, the same top-5 answers on every layout ({code.label}); medians over rounds:")
    for layout, rs in runs.items():
        print(f"  {layout.label}: {medians_line(rs)}")


if __name__ == "__main__":
    main()
