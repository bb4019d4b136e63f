"""A small 2Wiki corpus for the differential run when the whole 2Wiki index is not at hand (its
sentence index takes the authors' scripts/build_index.py about 20 minutes on two cores): the
passages of the questions' supporting titles, then the corpus's first `others` other passages, in
corpus order, written as a corpus.jsonl that `python -m pipelines.index +corpus=2wikimultihopqa
corpus.path=<file>` indexes like the real one (packed 1,000-token windows). About 1,300 others make
~150k tokens: enough text for an episode that reads until the 128k-token budget forces the answer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def load_jsonl(path: str | Path, limit: int | None = None) -> list[dict[str, Any]]:
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                out.append(json.loads(line))
            if limit is not None and len(out) >= limit:
                break
    return out


def write_small_corpus(questions: list[dict[str, Any]], corpus: str | Path, out: str | Path, others: int) -> int:
    """Writes the small corpus to `out`; returns its number of passages."""
    titles = {t for q in questions for t in q.get("supporting_titles") or []}
    kept, extra = [], 0
    for doc in load_jsonl(corpus):
        if doc["title"] in titles:
            kept.append(doc)
        elif extra < others:
            kept.append(doc)
            extra += 1
    missing = titles - {d["title"] for d in kept}
    if missing:
        raise ValueError(f"{corpus}: no passage titled {sorted(missing)[:3]} (the questions' supporting titles)")
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        for doc in kept:
            f.write(json.dumps(doc, ensure_ascii=False) + "\n")
    return len(kept)
