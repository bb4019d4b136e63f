"""Generate the rehearsal corpus (issue 34): at least `--sentences` sentences of real text as sharded
JSON Lines files that `conf/corpus/jsonl.yaml` reads, for `python -m pipelines.index` at 10M sentences.

    python -m benchmarks.rehearsal_corpus --out outputs/rehearsal/corpus --sentences 10000000
    python -m pipelines.index +corpus=jsonl corpus.name=rehearsal corpus.path=outputs/rehearsal/corpus/shards ...

Text. Everything comes from the data we have (ARAG_DATA_DIR, default ../shared/data): the passages of
2WikiMultiHopQA first (so its questions find their evidence at any size), then GraphRAG-Bench medical
and novel, then the WikiExtractor Wikipedia sample. Copy 0 is that text unchanged, document by
document, with its own ids; when the sources run out before the target, copies 1, 2, ... of the whole
pool follow, each document under a distinct id (`<source>/<doc id>~c<copy>`) and its title unchanged
(a title is what a 2Wiki question's gold evidence names, and every copy of a passage is that passage).

Perturbation. A copy changes one word per sentence: either one word is dropped or two neighbouring
words are swapped, never the first or the last word (the first carries the capital and the last the
full stop that sentence segmentation keys on) and only plain words move (letters, digits, inner
hyphens and apostrophes: brackets and quotes, which the segmenter also reads, stay in place), so a
copy splits into the sentences of its original: all but 3 of 12,909 copied documents in a check on
the real sources, and the rehearsal reports the index's own count. With p plain interior words
(q pairs of neighbouring ones) a sentence has p + q variants; a copy takes variant
`(hash(doc, sentence) + copy - 1) mod (p + q)`, so copies of a sentence differ from each other and
from the original while there are fewer copies than variants (a 20-word sentence of plain words has
35); sentences with no plain interior word (headings such as "Career") repeat as
they do in real corpora. Why this change and not another: one word of ~20 keeps every other word,
so keyword search still finds a copy by the words the original has and BM25-like statistics scale
with the copies; the embedding moves a little (near-duplicates, as web corpora have) instead of
not at all, so the IVF-PQ trains on clusters of close but distinct vectors and ANN recall is
measured on ties that exact scores resolve; and no marker token is added, which would be a word
shared by millions of sentences that no real corpus has.

Streaming. Documents are written as they are read; nothing holds more than one source document.
Copy 0 also writes each document's sentence spans to `pool.jsonl` beside the shards (segmented once
with the index's segmenter, arag.index.sentences), which later copies stream again. Shards are
written under a temporary name and renamed when complete; `done.json` records the arguments and
counts, and a rerun with the same arguments reuses the corpus.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import time
from pathlib import Path
import re
from typing import Iterator


from arag.corpus.readers import CorpusSpec, FieldNames, plan_parts, read_part
from arag.corpus.documents import Document
from arag.index.sentences import sentence_spans

PLAIN_WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")
# (source name, corpus folder under the data dir, format, file or folder)
SOURCES = (
    ("2wiki", "2wikimultihopqa", "jsonl", "corpus.jsonl"),
    ("medical", "graphrag-bench-medical", "jsonl", "corpus.jsonl"),
    ("novel", "graphrag-bench-novel", "jsonl", "corpus.jsonl"),
    ("wiki", "wiki", "wikiextractor", ""),
)


def source_documents(data_dir: Path) -> Iterator[tuple[str, Document]]:
    """Every source document, in the order above, streamed part by part."""
    for name, folder, fmt, file in SOURCES:
        path = data_dir / folder / file if file else data_dir / folder
        if not path.exists():
            raise SystemExit(f"error: source {name}: {path} does not exist (set ARAG_DATA_DIR or --data-dir)")
        spec = CorpusSpec(name=name, format=fmt, path=str(path), fields=FieldNames(), part_size_mb=64)
        for part in plan_parts(spec):
            for doc in read_part(spec, part):
                if isinstance(doc, Document):
                    yield name, doc


def variant(words: list[str], key: str, copy: int) -> list[str]:
    """Copy `copy` (>= 1) of a sentence's words: one interior plain word dropped, or two neighbouring
    interior plain words swapped (plain: letters, digits, hyphens, apostrophes; punctuation, brackets
    and quotes stay where they are, since sentence segmentation reads them)."""
    plain = [i for i in range(1, len(words) - 1) if PLAIN_WORD.fullmatch(words[i])]
    swaps = [i for i in plain if i + 1 in plain]
    count = len(plain) + len(swaps)
    if not count:
        return words
    h = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "little")
    v = (h + copy - 1) % count
    if v < len(plain):
        j = plain[v]
        return words[:j] + words[j + 1 :]
    j = swaps[v - len(plain)]
    return words[:j] + [words[j + 1], words[j]] + words[j + 2 :]


def perturb(text: str, spans: list[list[int]], doc_key: str, copy: int) -> str:
    """The text with every sentence replaced by its copy; the white space between sentences kept."""
    out, pos = [], 0
    for i, (a, b) in enumerate(spans):
        out.append(text[pos:a])
        out.append(" ".join(variant(text[a:b].split(" "), f"{doc_key}|{i}", copy)))
        pos = b
    out.append(text[pos:])
    return "".join(out)


class ShardWriter:
    """JSON Lines shards of about `shard_mb` each, published by rename when complete."""

    def __init__(self, folder: Path, shard_mb: float):
        self.folder, self.limit = folder, int(shard_mb * 2**20)
        self.index, self.file, self.tmp, self.size = 0, None, None, 0

    def write(self, record: dict) -> None:
        if self.file is None:
            self.tmp = self.folder / f".shard-{self.index:05d}.jsonl.tmp"
            self.file = open(self.tmp, "w", encoding="utf-8")
        line = json.dumps(record, ensure_ascii=False) + "\n"
        self.file.write(line)
        self.size += len(line)
        if self.size >= self.limit:
            self.close()

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            os.replace(self.tmp, self.folder / f"shard-{self.index:05d}.jsonl")
            self.index, self.file, self.size = self.index + 1, None, 0


def generate(out: Path, target: int, data_dir: Path, shard_mb: float, pool_limit: int | None = None) -> dict:
    """Write the corpus; `pool_limit` caps the distinct source text (sentences), so that a small
    corpus is made of perturbed copies too."""
    args = {"sentences": target, "data_dir": str(data_dir.resolve()), "shard_mb": shard_mb, "pool_sentences": pool_limit}
    done_file = out / "done.json"
    if done_file.exists():
        done = json.loads(done_file.read_text())
        if done.get("args") == args:
            return {**done, "reused": True}
    if out.exists():
        shutil.rmtree(out)
    shards = out / "shards"
    shards.mkdir(parents=True)
    started = time.perf_counter()
    writer = ShardWriter(shards, shard_mb)
    sentences = documents = copies = 0
    pool = out / "pool.jsonl"
    with open(pool, "w", encoding="utf-8") as pool_file:
        for name, doc in source_documents(data_dir):
            spans = [[s.start, s.end] for s in sentence_spans(doc.text)]
            if not spans:
                continue
            key = f"{name}/{doc.doc_id}"
            writer.write({"doc_id": key, "title": doc.title, "text": doc.text})
            pool_file.write(json.dumps({"key": key, "title": doc.title, "text": doc.text, "spans": spans}, ensure_ascii=False) + "\n")
            sentences += len(spans)
            documents += 1
            if sentences >= min(target, pool_limit or target):
                break
    pool_sentences = sentences
    while sentences < target:
        copies += 1
        with open(pool, encoding="utf-8") as pool_file:
            for line in pool_file:
                doc = json.loads(line)
                writer.write({"doc_id": f"{doc['key']}~c{copies}", "title": doc["title"], "text": perturb(doc["text"], doc["spans"], doc["key"], copies)})
                sentences += len(doc["spans"])
                documents += 1
                if sentences >= target:
                    break
    writer.close()
    pool.unlink()
    done = {"args": args, "sentences": sentences, "documents": documents, "pool_sentences": pool_sentences,
            "perturbed_copies": copies, "shards": writer.index, "seconds": round(time.perf_counter() - started, 1)}
    done_file.write_text(json.dumps(done, indent=1))
    return {**done, "reused": False}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="output folder (shards under <out>/shards)")
    p.add_argument("--sentences", type=int, default=10_000_000, help="at least this many sentences")
    p.add_argument("--data-dir", type=Path, default=Path(os.environ.get("ARAG_DATA_DIR", "../shared/data")))
    p.add_argument("--shard-mb", type=float, default=64.0, help="size of one JSON Lines shard")
    p.add_argument("--pool-sentences", type=int, default=None, help="distinct source text, in sentences (default: all sources)")
    args = p.parse_args(argv)
    if args.sentences <= 0 or args.shard_mb <= 0 or (args.pool_sentences is not None and args.pool_sentences <= 0):
        p.error("--sentences, --shard-mb and --pool-sentences must be positive")
    done = generate(args.out, args.sentences, args.data_dir, args.shard_mb, args.pool_sentences)
    print(json.dumps(done))


if __name__ == "__main__":
    main()
