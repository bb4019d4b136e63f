"""Indexes written without the Ray pipeline, for benchmarks and test fixtures, in the pipeline's format.

`commit_parts` writes the manifest with the pipeline's own `assemble_manifest`/`commit_manifest`
over Parquet files written with its own schemas (`arag.index.parts`), so what the tools are
tested and measured on is what `pipelines.index` writes; only the chunking is given instead of
computed. `write_synthetic_index` streams a corpus of any size: real Wikipedia sentences or
random text shaped like encyclopedia prose (Zipf-distributed pseudo-words, capitalised names,
years), grouped into sentences and chunks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from arag.corpus.readers import CorpusSpec, InputPart
from arag.index.build import EMBEDDED, TEXT_ONLY, IndexSettings, assemble_manifest, commit_manifest
from arag.index.embedding import EmbedderSpec
from arag.index.layout import IndexLayout, sentence_id, write_json_atomic
from arag.index.part_vectors import VectorsRecord
from arag.index.vectors import read_shard
from arag.index.parts import CHUNK_SCHEMA, ROW_GROUP_SIZE, SENTENCE_SCHEMA, ChunkingSettings, PartRecord
from arag.index.tokens import count_tokens

ROW_GROUP = ROW_GROUP_SIZE


def commit_parts(
    root: Path,
    corpus_file: Path,
    records: list[PartRecord],
    dimension: int,
    factory: str = "Flat",
    embedder: EmbedderSpec | None = None,
    chunking: ChunkingSettings | None = None,
    vectors: str = EMBEDDED,
) -> dict:
    """Write the manifest of an index whose parts' files are written: the pipeline's own manifest.

    `corpus_file` is what the index says it was made from (its identity hashes the file), e.g.
    the documents as JSON Lines, or a description of a generated corpus.
    """
    layout = IndexLayout(root)
    for r in records:
        _record_part_files(layout, r)
    corpus = CorpusSpec(name=corpus_file.stem, format="jsonl", path=str(corpus_file))
    settings = IndexSettings(corpus=corpus, embedder=embedder or EmbedderSpec(name="synthetic"), chunking=chunking or ChunkingSettings(), faiss_factory=factory)
    plan = [InputPart(part=r.part, file=corpus_file.name) for r in records]
    manifest = assemble_manifest(layout, settings, plan, records, dimension, elapsed_s=0.0, vectors=vectors)
    commit_manifest(layout, manifest)
    return manifest


def _record_part_files(layout: IndexLayout, record: PartRecord) -> None:
    """What the pipeline's workers record as they commit a part: its files' sizes, and the vectors
    record of its shard (a part is complete only with both)."""
    root = layout.root
    for path in (layout.chunks(record.part), layout.sentences(record.part), layout.rejects(record.part)):
        record.files[str(path.relative_to(root))] = path.stat().st_size
    shard = layout.vectors(record.part)
    if record.num_sentences and shard.exists():
        vectors = VectorsRecord(
            part=record.part, path=str(shard.relative_to(root)), bytes=shard.stat().st_size, rows=record.num_sentences,
            dimension=int(read_shard(shard, mmap=True).d), input_digest=record.input_digest, seconds=0.0, node="", host="",
        )
        write_json_atomic(layout.vectors_record(record.part), vectors.to_json())


def part_record(part: int, corpus_file: Path, num_documents: int, num_chunks: int, num_sentences: int) -> PartRecord:
    return PartRecord(part=part, input=corpus_file.name, num_documents=num_documents, num_chunks=num_chunks, num_sentences=num_sentences, num_rejected=0, seconds=0.0)


def write_rejects(layout: IndexLayout, part: int) -> None:
    from arag.index.parts import REJECT_SCHEMA

    pq.write_table(REJECT_SCHEMA.empty_table(), layout.rejects(part))

_SYLLABLES = "ka lo ther an mi ro sen tu vel dor is en ar qu zy pha ol ri ne sta bar gen mon tal fer wick ham ton ley burg".split()


class Vocabulary:
    """Pseudo-words (Zipf frequencies), names and years, reproducible from a seed."""

    def __init__(self, seed: int = 0, words: int = 100_000, names: int = 200_000):
        rng = np.random.default_rng(seed)
        self.rng = rng
        self.words = self._pseudo_words(rng, words, 1, 4)
        p = 1.0 / np.arange(1, words + 1) ** 1.07
        self.word_p = p / p.sum()
        first = [w.capitalize() for w in self._pseudo_words(rng, 5_000, 2, 3)]
        last = [w.capitalize() for w in self._pseudo_words(rng, 20_000, 2, 4)]
        fi, li = rng.integers(0, len(first), names), rng.integers(0, len(last), names)
        self.names = [f"{first[a]} {last[b]}" for a, b in zip(fi, li)]
        q = 1.0 / np.arange(1, names + 1) ** 0.5  # a few names are common, most are rare
        self.name_p = q / q.sum()

    @staticmethod
    def _pseudo_words(rng: np.random.Generator, n: int, lo: int, hi: int) -> list[str]:
        out, seen = [], set()
        while len(out) < n:
            w = "".join(rng.choice(_SYLLABLES, size=int(rng.integers(lo, hi + 1))))
            if w not in seen:
                seen.add(w)
                out.append(w)
        return out

    def sentences(self, n: int, words_per_sentence: float = 16.0) -> list[str]:
        """`n` sentences: mostly pseudo-words, with a name and sometimes a year in each."""
        rng = self.rng
        lengths = np.maximum(4, rng.poisson(words_per_sentence, n))
        word_ids = rng.choice(len(self.words), size=int(lengths.sum()), p=self.word_p)
        name_ids = rng.choice(len(self.names), size=n, p=self.name_p)
        years = rng.integers(1500, 2025, size=n)
        use_year = rng.random(n) < 0.4
        W, out, pos = self.words, [], 0
        for i, ln in enumerate(lengths.tolist()):
            ws = [W[j] for j in word_ids[pos : pos + ln]]
            pos += ln
            ws[0] = ws[0].capitalize()
            ws.insert(min(2, len(ws)), self.names[name_ids[i]])
            if use_year[i]:
                ws.append(f"in {years[i]}")
            out.append(" ".join(ws) + ".")
        return out


def wiki_sentences(folder: Path, limit: int = 400_000) -> tuple[list[str], list[str]]:
    """Real sentences and article titles from a WikiExtractor folder (e.g. shared/data/wiki)."""
    import bz2
    import re

    split = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
    sentences: list[str] = []
    titles: list[str] = []
    for path in sorted(folder.rglob("wiki_*")):
        raw = path.read_bytes()
        text = (bz2.decompress(raw) if path.suffix == ".bz2" else raw).decode("utf-8", "replace")
        for doc in text.split("</doc>"):
            m = re.search(r'title="([^"]+)"', doc)
            if not m:
                continue
            titles.append(m.group(1))
            body = doc[doc.find(">") + 1 :].strip().split("\n", 1)[-1]
            for line in body.split("\n"):
                for sent in split.split(line.strip()):
                    if 40 <= len(sent) <= 400:
                        sentences.append(sent)
        if len(sentences) >= limit:
            break
    return sentences[:limit], titles


def write_synthetic_index(
    root: Path,
    num_chunks: int,
    sentences_per_chunk: int = 7,
    parts: int = 4,
    seed: int = 0,
    sentence_pool: int = 400_000,
    wiki: Path | None = None,
    log=print,
    pool: list[str] | None = None,
) -> dict:
    """Write chunks and sentences Parquet (no vectors) for `num_chunks` chunks; return the manifest.

    Each chunk = `sentences_per_chunk` sentences drawn from a pool plus one sentence unique to it
    (with its document's own name), so texts differ while generation stays fast. The pool is real
    Wikipedia sentences when `wiki` (a WikiExtractor folder) is given, the sentences given as `pool`,
    else pseudo-word prose.
    """
    vocab = Vocabulary(seed)
    pool_source = "given" if pool is not None else "wiki" if wiki else "pseudo-words"
    if pool is None:
        pool = wiki_sentences(wiki, sentence_pool)[0] if wiki else vocab.sentences(sentence_pool)
    rng = np.random.default_rng(seed + 1)
    layout = IndexLayout(root)
    layout.make_dirs()
    corpus_file = root / "generated-corpus.json"
    corpus_file.write_text(
        json.dumps({"generator": "tests/support/synthetic_index.py", "chunks": num_chunks, "sentences_per_chunk": sentences_per_chunk, "parts": parts, "seed": seed, "pool": len(pool), "pool_source": pool_source, "wiki": str(wiki) if wiki else None}) + "\n"
    )
    per_part = -(-num_chunks // parts)
    records = []
    doc = 0
    done = 0
    for p in range(parts):
        n_part = min(per_part, num_chunks - done)
        if n_part <= 0:
            break
        cw = pq.ParquetWriter(layout.chunks(p), CHUNK_SCHEMA, compression="zstd")
        sw = pq.ParquetWriter(layout.sentences(p), SENTENCE_SCHEMA, compression="zstd")
        srow = 0
        first_doc = doc
        for start in range(0, n_part, ROW_GROUP):
            n = min(ROW_GROUP, n_part - start)
            picks = rng.integers(0, len(pool), size=(n, sentences_per_chunk))
            doc_sizes = rng.integers(1, 6, size=n)  # chunks per document, consumed in order
            c = {k: [] for k in CHUNK_SCHEMA.names}
            s = {k: [] for k in SENTENCE_SCHEMA.names}
            i = 0
            while i < n:
                size = min(int(doc_sizes[i]), n - i)
                did, title = f"d{doc}", vocab.names[doc % len(vocab.names)] + f" ({doc})"
                for pos in range(size):
                    cid = f"{did}#{pos}"
                    sents = [pool[j] for j in picks[i]]
                    sents.insert(int(picks[i][0]) % (sentences_per_chunk + 1), f"{title} is item {doc * 7 + pos} of the register.")
                    text = " ".join(sents)
                    for k, v in zip(CHUNK_SCHEMA.names, (cid, did, title, pos, text, count_tokens(text))):  # n_tokens as the chunker writes it (chunk_read reads it)
                        c[k].append(v)
                    for j, st in enumerate(sents):
                        s["sentence_id"].append(sentence_id(p, srow))
                        s["chunk_id"].append(cid)
                        s["text"].append(st)
                        s["doc_id"].append(did)
                        s["doc_title"].append(title)
                        s["doc_sentence"].append(pos * (sentences_per_chunk + 1) + j)
                        srow += 1
                    i += 1
                doc += 1
            cw.write_table(pa.table(c, schema=CHUNK_SCHEMA))
            sw.write_table(pa.table(s, schema=SENTENCE_SCHEMA))
        cw.close()
        sw.close()
        done += n_part
        write_rejects(layout, p)
        records.append(part_record(p, corpus_file, doc - first_doc, n_part, srow))
        log(f"  part {p}: {n_part} chunks, {srow} sentences")
    # Keyword-only: a text_only index, without sentence vectors (semantic search is refused on it).
    return commit_parts(root, corpus_file, records, dimension=0, factory="Flat", embedder=EmbedderSpec(name="none (keyword-only synthetic index)"), vectors=TEXT_ONLY)


def write_merged_index(source: Path, target: Path, parts: int) -> dict:
    """`source` (a text_only index) again at `target` in `parts` parts, each some consecutive parts of
    `source` whole (as a larger `corpus.part_size_mb` would plan them): the same chunks and sentences
    in the same order, sentence ids renumbered part<<32|row. Returns the manifest."""
    from arag.index.store import open_index

    index = open_index(source)
    described_parts = index.manifest["parts"]  # in index order, as index.parts
    if index.manifest.get("vectors") != TEXT_ONLY:
        raise ValueError(f"{source}: only a text_only index can be merged here (its shards would need renumbering)")
    layout = IndexLayout(target)
    layout.make_dirs()
    corpus_file = target / "generated-corpus.json"
    described = json.loads((Path(source) / "generated-corpus.json").read_text())
    corpus_file.write_text(json.dumps({**described, "parts": parts, "merged_from": str(source)}) + "\n")
    records = []
    for p, group in enumerate(np.array_split(np.arange(len(index.parts)), parts)):
        row = documents = 0
        with pq.ParquetWriter(layout.chunks(p), CHUNK_SCHEMA, compression="zstd") as cw, pq.ParquetWriter(layout.sentences(p), SENTENCE_SCHEMA, compression="zstd") as sw:
            for s in group.tolist():
                for batch in pq.ParquetFile(index.parts[s].chunks).iter_batches(batch_size=ROW_GROUP):
                    cw.write_batch(batch)
                for batch in pq.ParquetFile(index.parts[s].sentences).iter_batches(batch_size=ROW_GROUP):
                    ids = pa.array([sentence_id(p, r) for r in range(row, row + batch.num_rows)], pa.int64())
                    sw.write_batch(batch.set_column(batch.schema.get_field_index("sentence_id"), "sentence_id", ids))
                    row += batch.num_rows
                documents += described_parts[s]["num_documents"]
        write_rejects(layout, p)
        records.append(part_record(p, corpus_file, documents, sum(index.parts[s].num_chunks for s in group.tolist()), row))
    return commit_parts(target, corpus_file, records, dimension=0, factory="Flat", embedder=EmbedderSpec(name="none (keyword-only synthetic index)"), vectors=TEXT_ONLY)

def iter_chunk_texts(index_root: Path, batch: int = 65536) -> Iterator[list[str]]:
    """Chunk texts of an index in index order, in batches (for reference implementations)."""
    manifest = json.loads((index_root / "manifest.json").read_text())
    for p in manifest["parts"]:
        if p["num_chunks"]:
            for b in pq.ParquetFile(index_root / p["chunks"]).iter_batches(batch_size=batch, columns=["text"]):
                yield b.column("text").to_pylist()


def write_register_questions(path: Path, index: Path, n: int) -> None:
    """`n` questions naming a synthetic index's titles (of its first chunk file), distinct ids: what the
    concurrency benchmarks ask when the answers do not matter."""
    from arag.index.store import open_index

    titles = sorted(set(pq.read_table(open_index(index).chunk_files[0], columns=["title"]).column("title").to_pylist()))
    with path.open("w") as f:
        for i in range(n):
            title = titles[i % len(titles)]
            f.write(json.dumps({"id": f"q{i}", "question": f"Which register item is {title}?", "answers": ["item"], "supporting_titles": [title]}) + "\n")
