"""keyword_search on the same chunks in different numbers of parts, alternated: what a part costs.

    python -m benchmarks.keyword_parts --index /tmp/kw-449k --parts 20 8 [--rounds 2] [--queries 100] [--workdir /tmp/arag-keyword-parts]

--index is a text_only index (`python -m benchmarks.keyword_recurring --generate` writes one). For each
--parts N, --workdir/parts-N holds the same chunks and sentences in N parts, each some consecutive
parts of --index whole (tests/support/synthetic_index.py, `write_merged_index`): what a larger
`corpus.part_size_mb` plans from the same files. Each layout is first opened once (its tools caches
built or checked) and checked against the reference loop on --check-queries questions; then, per
round, benchmarks/keyword_recurring.py (`--no-reference`) runs on each layout as a subprocess, the
order reversed every other round. Prints each run's p50/p95/mean of the union baseline, of each
question asked the first time and asked again, then the medians over rounds per layout, and
stops if the layouts' top-5 answers differ.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks.keyword_recurring import QUESTIONS
from tests.support.synthetic_index import write_merged_index

SIDES = ("baseline_union_no_memory", "first_time_asked", "asked_again")
REPO = Path(__file__).resolve().parent.parent


def recurring(index: Path, questions: Path, queries: int, reference: bool) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.keyword_recurring", "--index", str(index), "--questions", str(questions), "--queries", str(queries)]
    out = subprocess.run(cmd + ([] if reference else ["--no-reference"]), cwd=REPO, capture_output=True, text=True, check=True).stdout
    return json.loads(out[: out.index("keyword_recurring:")])


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

    layouts = {len(json.loads((args.index / "manifest.json").read_text())["parts"]): args.index.resolve()}
    for n in args.parts:
        target = args.workdir / f"parts-{n}"
        if not (target / "manifest.json").exists():
            print(f"writing {target}: the chunks of {args.index} in {n} parts", flush=True)
            write_merged_index(args.index, target, n)
        layouts[n] = target.resolve()
    for n, index in layouts.items():  # caches built or checked before any round is timed
        recurring(index, args.questions, args.check_queries, reference=True)
        print(f"  {n} parts ({index}): identical to the reference on {args.check_queries} questions", flush=True)
    runs: dict[int, list[dict]] = {n: [] for n in layouts}
    order = list(layouts)
    for i in range(args.rounds):
        for n in order if i % 2 == 0 else list(reversed(order)):
            printed = recurring(layouts[n], args.questions, args.queries, reference=False)
            runs[n].append(printed)
            print(f"  round {i + 1}, {n} parts: " + "; ".join(f"{s} p50 {printed[s]['p50_ms']} / p95 {printed[s]['p95_ms']} / mean {printed[s]['mean_ms']} ms" for s in SIDES), flush=True)
    answers = {r["answers_sha1"] for rs in runs.values() for r in rs}
    if len(answers) != 1:
        raise SystemExit(f"the layouts' answers differ: {answers}")
    print(f"keyword_parts: {args.queries} questions, {args.rounds} rounds, the same top-5 answers on every layout; medians over rounds:")
    for n, rs in runs.items():
        print(f"  {n} parts: " + "; ".join(
            f"{s} p50 {statistics.median(r[s]['p50_ms'] for r in rs):.1f} / p95 {statistics.median(r[s]['p95_ms'] for r in rs):.1f} ms" for s in SIDES))


if __name__ == "__main__":
    main()
