"""How long the sentences an index embeds are, in the embedder's tokens: a corpus's sentences per
second say little across corpora, tokens per second do (a transformer's cost grows with the
tokens it computes). For a built index it also turns each part's record (rows and seconds of its
embedding) into tokens per second.

    python -m benchmarks.sentence_tokens --index <dir>/index --parts 10        # a built index's parts
    python -m benchmarks.sentence_tokens --corpus wiki --include 'wiki_0*.bz2,wiki_1*.bz2,wiki_2*.bz2'

`--index` reads the sentences the pipeline wrote (`sentences/part-*.parquet`); `--corpus` reads a
conf/corpus (and `-o` overrides) with the pipeline's reader and chunker, so the sentences are the
ones `python -m pipelines.index` would embed. Tokens are the embedder's tokenizer's (the index's
embedder; with `--corpus`, conf/embedder and `-o embedder.*`), truncated as the model truncates
(all-MiniLM-L6-v2: 256 word pieces), specials included. Nothing is timed here: the seconds come from the part records.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


def _pipeline_config(corpus: str, include: str, overrides: list[str]):
    """The config `python -m pipelines.index +corpus=<corpus>` would run with these overrides."""
    from benchmarks.pipeline_config import compose_pipeline, include_override

    return compose_pipeline("index", [f"+corpus={corpus}", *overrides, *([include_override(include)] if include else [])])


def _index_embedder(index: Path):
    """The embedder an index was built with: its manifest's, or a build in progress's settings."""
    from arag.index.embedding import EmbedderSpec
    from arag.index.layout import IndexLayout

    layout = IndexLayout(index)
    if layout.manifest.exists():
        return EmbedderSpec(**json.loads(layout.manifest.read_text())["embedding"]["spec"])
    if layout.build_state.exists():
        return EmbedderSpec(**json.loads(layout.build_state.read_text())["settings"]["embedder"])
    raise SystemExit(f"{index}: neither {layout.manifest.name} nor {layout.build_state.name} (not an index built by pipelines.index?)")


def _tokenizing_model(spec):
    """The embedder's model, for its tokenizer and length limit (no OpenVINO conversion: nothing is encoded)."""
    from sentence_transformers import SentenceTransformer

    if spec.static is not None:
        raise SystemExit(f"embedder '{spec.name}' is a static model: its cost is a token lookup, which this count is not for")
    model = SentenceTransformer(spec.resolve_path(), device="cpu")
    if spec.max_seq_length:
        model.max_seq_length = spec.max_seq_length
    return model


def _index_parts(index: Path, parts: list[int] | None):
    """(name, sentences, embedding record or None) of each chunked part: parts are numbered 0, 1, ...
    in the plan, and a build in progress has the records of the parts chunked so far."""
    import pyarrow.parquet as pq

    from arag.index.layout import IndexLayout

    layout = IndexLayout(index)
    if not layout.part_record(0).exists():
        raise SystemExit(f"{index}: no parts/part-00000.json (not an index built by pipelines.index?)")
    part = 0
    while layout.part_record(part).exists():
        if parts is None or part in parts:
            record = layout.vectors_record(part)
            texts = pq.read_table(layout.sentences(part), columns=["text"]).column("text").to_pylist()
            if texts:  # a part of documents without text has nothing to count
                yield f"part {part}", texts, (json.loads(record.read_text()) if record.exists() else None)
        part += 1


def _corpus_sentences(cfg):
    from arag.corpus.documents import Document
    from arag.corpus.readers import corpus_spec_from_config, plan_parts, read_part
    from arag.index.chunking import chunk_document

    if cfg.index.chunking != "per_document":
        raise SystemExit(f"--corpus reads per_document chunking only; corpus '{cfg.corpus.name}' has index.chunking={cfg.index.chunking}")
    spec = corpus_spec_from_config(cfg.corpus)
    sentences: list[str] = []
    for part in plan_parts(spec):
        for doc in read_part(spec, part):
            if isinstance(doc, Document):
                for chunk in chunk_document(doc, cfg.index.chunk_tokens, cfg.index.language):
                    sentences += chunk.sentences
    return sentences


def describe(model, name: str, texts: list[str], record: dict | None = None) -> dict:
    from arag.index.embedding import token_counts

    tokens = token_counts(model, texts)
    chars = np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
    row = {
        "source": name, "sentences": len(texts), "tokens": int(tokens.sum()),
        "tokens_per_sentence": float(tokens.mean()), "median_tokens": float(np.median(tokens)),
        "chars_per_sentence": float(chars.mean()), "truncated": int((tokens >= model.max_seq_length).sum()),
    }
    if record and record.get("seconds"):
        row.update(seconds=record["seconds"], sentences_per_s=record["rows"] / record["seconds"], tokens_per_s=row["tokens"] / record["seconds"])
    return row


def main() -> None:
    from arag.index.embedding import EmbedderSpec

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    source = ap.add_mutually_exclusive_group(required=True)
    source.add_argument("--index", type=Path, help="a built index folder (index.path)")
    source.add_argument("--corpus", help="a conf/corpus name, read as the pipeline reads it")
    ap.add_argument("--parts", default="", help="with --index: comma-separated part numbers (default all)")
    ap.add_argument("--include", default="", help="with --corpus: comma-separated file globs")
    ap.add_argument("-o", "--override", action="append", default=[], help="a pipeline config override (corpus.* or embedder.*), repeatable")
    ap.add_argument("--json", help="also write the rows to this JSON file")
    args = ap.parse_args()

    if args.index:
        try:
            parts = [int(p) for p in args.parts.split(",")] if args.parts else None
        except ValueError:
            ap.error(f"--parts {args.parts!r}: comma-separated part numbers, such as 3,10")
        model = _tokenizing_model(_index_embedder(args.index))
        rows = [describe(model, name, texts, record) for name, texts, record in _index_parts(args.index, parts)]
        if not rows:
            raise SystemExit(f"{args.index}: none of parts {args.parts} has a sentences file")
    else:
        cfg = _pipeline_config(args.corpus, args.include, args.override)
        model = _tokenizing_model(EmbedderSpec.from_config(cfg.embedder))
        rows = [describe(model, f"corpus {args.corpus} {args.include}".strip(), _corpus_sentences(cfg))]

    print("| source | sentences | tokens / sentence | median | characters / sentence | at the length limit (truncated) | sentences/s | tokens/s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        rate = f"{r['sentences_per_s']:.1f} | {r['tokens_per_s']:,.0f}" if "tokens_per_s" in r else " | "
        print(f"| {r['source']} | {r['sentences']:,} | {r['tokens_per_sentence']:.2f} | {r['median_tokens']:.0f} | {r['chars_per_sentence']:.1f} | {r['truncated']:,} | {rate} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
