"""Where keyword_search's first-time time goes on a many-part index: for each keyword of the queries,
counted with nothing remembered, the time all parts spend in each stage, and the two lowercases
of the text stage timed against each other on the same candidates.

    python -m benchmarks.keyword_stages --index /tmp/kw-449k [--queries 100] [--rounds 3] [--top 8]

The keyword lists are keyword_recurring's (the rehearsal's simulated agent on the first --queries
2Wiki dev questions). Stages, per distinct lowered keyword, summed over the index's parts:
  * words: a keyword without separators, counted from the word postings alone;
  * candidates: a keyword with separators, its candidate chunks chosen from words and pair buckets;
  * text: those candidates' text read, lowered and counted.
Each keyword is timed --rounds times one after the other (the page cache as the first round left
it) and the median kept. Then, for the --top keywords costliest in the text stage, their candidates'
texts are read once and lowered by Arrow's utf8_lower and ascii_lower alternately, --rounds times
each, on the same arrays (what cache format 10 changed for ASCII keywords); the medians are printed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import pyarrow.compute as pc

from arag.index.keyword.words import split_keyword
from arag.index.store import open_index
from arag.tools import ToolContext
from benchmarks.keyword_recurring import QUESTIONS, agent_queries


def median_ms(fn, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1e3 * statistics.median(times)


def stages(parts, keyword: str, rounds: int) -> dict:
    whole, _ = split_keyword(keyword)
    if whole:
        return {"keyword": keyword, "words_ms": median_ms(lambda: [p.words.keyword_counts(keyword) for p in parts], rounds)}
    rows = [p.candidate_rows([keyword]) for p in parts]
    return {
        "keyword": keyword,
        "candidates_ms": median_ms(lambda: [p.candidate_rows([keyword]) for p in parts], rounds),
        "text_ms": median_ms(lambda: [p.keyword_scores(r, [(keyword, 1)]) for p, r in zip(parts, rows)], rounds),
        "rows_read": int(sum(len(r) for r in rows)),
        "rows": rows,
    }


def lowercases(parts, phrase: dict, rounds: int) -> dict:
    texts = [p._read_texts(r)[0] for p, r in zip(parts, phrase["rows"]) if len(r)]
    utf8, ascii_ = [], []
    for _ in range(rounds):
        for side, fn in ((utf8, pc.utf8_lower), (ascii_, pc.ascii_lower)):
            t = time.perf_counter()
            for a in texts:
                fn(a)
            side.append(time.perf_counter() - t)
    u, a = 1e3 * statistics.median(utf8), 1e3 * statistics.median(ascii_)
    return {"keyword": phrase["keyword"], "text_mb": round(sum(a.nbytes for a in texts) / 1e6, 1), "utf8_lower_ms": round(u, 1), "ascii_lower_ms": round(a, 1), "ratio": round(u / a, 2)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", required=True)
    ap.add_argument("--questions", default=str(QUESTIONS))
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--top", type=int, default=8)
    args = ap.parse_args(argv)

    keywords = sorted({k.lower() for kws in agent_queries(args.questions, args.queries) for k in kws})
    store = ToolContext(open_index(args.index)).store
    parts = [p for p in store.parts if p.num_chunks]
    measured = [stages(parts, k, args.rounds) for k in keywords]
    one_word = [m["words_ms"] for m in measured if "words_ms" in m]
    phrases = [m for m in measured if "text_ms" in m]
    text_ms, rows = sum(m["text_ms"] for m in phrases), sum(m["rows_read"] for m in phrases)
    costliest = sorted(phrases, key=lambda m: -(m["candidates_ms"] + m["text_ms"]))
    out = {
        "index": args.index, "parts": len(parts), "chunks": store.num_chunks, "keywords": len(keywords),
        "one_word_keywords": {"n": len(one_word), "total_ms": round(sum(one_word), 1), "per_keyword_ms": round(statistics.mean(one_word), 2),
                              "per_part_ms": round(statistics.mean(one_word) / len(parts), 3)},
        "phrases": {"n": len(phrases), "candidates_ms": round(sum(m["candidates_ms"] for m in phrases), 1), "text_ms": round(text_ms, 1),
                    "rows_read": rows, "text_us_per_row": round(1e3 * text_ms / max(rows, 1), 2),
                    "candidates_per_part_ms": round(statistics.mean(m["candidates_ms"] for m in phrases) / len(parts), 3)},
        "costliest_phrases": [{k: round(v, 1) if isinstance(v, float) else v for k, v in m.items() if k != "rows"} for m in costliest[: args.top]],
        "lowercases": [lowercases(parts, m, args.rounds) for m in sorted(phrases, key=lambda m: -m["text_ms"])[: args.top] if m["keyword"].isascii()],
    }
    print(json.dumps(out, indent=1))
    low = out["lowercases"]
    print(f"keyword_stages: {len(parts)} parts, {len(keywords)} keywords; one-word keywords {out['one_word_keywords']['per_part_ms']} ms a part; "
          f"phrases: candidates {out['phrases']['candidates_ms']} ms, text {out['phrases']['text_ms']} ms ({out['phrases']['text_us_per_row']} µs a row); "
          f"utf8_lower / ascii_lower on the same texts: {round(statistics.median(x['ratio'] for x in low), 2) if low else 'n/a'}x (median over {len(low)} keywords)")


if __name__ == "__main__":
    main()
