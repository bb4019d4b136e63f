"""Synthetic indexes for benchmarks: streamed straight to the index format, at any size.

The text is random but shaped like encyclopedia prose: Zipf-distributed pseudo-words, capitalised
multi-word names, years and numbers, grouped into sentences and chunks. Nothing here is used by
the tools themselves.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from arag.index.layout import FORMAT_VERSION, PART_SHIFT

CHUNK_SCHEMA = pa.schema(
    [("chunk_id", pa.string()), ("doc_id", pa.string()), ("title", pa.string()), ("position", pa.int32()), ("text", pa.string()), ("n_tokens", pa.int32())]
)
SENTENCE_SCHEMA = pa.schema([("sentence_id", pa.int64()), ("chunk_id", pa.string()), ("text", pa.string())])
ROW_GROUP = 8192

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
) -> dict:
    """Write chunks and sentences Parquet (no vectors) for `num_chunks` chunks; return the manifest.

    Each chunk = `sentences_per_chunk` sentences drawn from a pool plus one sentence unique to it
    (with its document's own name), so texts differ while generation stays fast. The pool is real
    Wikipedia sentences when `wiki` (a WikiExtractor folder) is given, else pseudo-word prose.
    """
    vocab = Vocabulary(seed)
    pool = wiki_sentences(wiki, sentence_pool)[0] if wiki else vocab.sentences(sentence_pool)
    rng = np.random.default_rng(seed + 1)
    root.mkdir(parents=True, exist_ok=True)
    for sub in ("chunks", "sentences", "vectors", "rejects", "parts"):
        (root / sub).mkdir(exist_ok=True)
    per_part = -(-num_chunks // parts)
    entries = []
    doc = 0
    done = 0
    for p in range(parts):
        n_part = min(per_part, num_chunks - done)
        if n_part <= 0:
            break
        name = f"part-{p:05d}"
        cw = pq.ParquetWriter(root / "chunks" / f"{name}.parquet", CHUNK_SCHEMA, compression="zstd")
        sw = pq.ParquetWriter(root / "sentences" / f"{name}.parquet", SENTENCE_SCHEMA, compression="zstd")
        srow = 0
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
                    for k, v in zip(CHUNK_SCHEMA.names, (cid, did, title, pos, text, len(text) // 4)):
                        c[k].append(v)
                    for st in sents:
                        s["sentence_id"].append((p << PART_SHIFT) | srow)
                        s["chunk_id"].append(cid)
                        s["text"].append(st)
                        srow += 1
                    i += 1
                doc += 1
            cw.write_table(pa.table(c, schema=CHUNK_SCHEMA))
            sw.write_table(pa.table(s, schema=SENTENCE_SCHEMA))
        cw.close()
        sw.close()
        done += n_part
        entries.append(
            {
                "part": p,
                "chunks": f"chunks/{name}.parquet",
                "sentences": f"sentences/{name}.parquet",
                "rejects": f"rejects/{name}.parquet",
                "vectors": f"vectors/{name}.faiss",
                "faiss_factory": "none",
                "num_documents": 0,
                "num_chunks": n_part,
                "num_sentences": srow,
                "num_rejected": 0,
            }
        )
        log(f"  part {p}: {n_part} chunks, {srow} sentences")
    manifest = write_manifest(root, entries, dimension=384, factory="none")
    return manifest


def write_manifest(root: Path, entries: list[dict], dimension: int, factory: str, spec: dict | None = None) -> dict:
    spec = spec or {"name": "synthetic"}
    manifest = {
        "format_version": FORMAT_VERSION,
        "embedding": {"model": spec["name"], "dimension": dimension, "normalized": True, "spec": spec},
        "faiss": {"factory": factory, "metric": "inner_product", "ids": "sentence_id"},
        "num_documents": 0,
        "num_chunks": sum(e["num_chunks"] for e in entries),
        "num_sentences": sum(e["num_sentences"] for e in entries),
        "num_parts": len(entries),
        "parts": entries,
        "synthetic": True,
    }
    (root / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return manifest


def iter_chunk_texts(index_root: Path, batch: int = 65536) -> Iterator[list[str]]:
    """Chunk texts of an index in index order, in batches (for reference implementations)."""
    manifest = json.loads((index_root / "manifest.json").read_text())
    for p in manifest["parts"]:
        if p["num_chunks"]:
            for b in pq.ParquetFile(index_root / p["chunks"]).iter_batches(batch_size=batch, columns=["text"]):
                yield b.column("text").to_pylist()
