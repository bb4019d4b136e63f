"""Content digests of input parts: computed while reading, equal to a hash of the part's bytes,
covering every byte, and changed by any edit."""

from __future__ import annotations

import bz2
import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from arag.corpus.digest import InputDigest, corpus_digest
from arag.corpus.readers import CorpusSpec, corpus_root, part_digest, plan_parts, read_part
from tests.conftest import write_jsonl, write_wiki

ROWS = [{"doc_id": str(i), "title": f"T{i}", "text": f"Passage {i} says something about topic {i % 7}. " * (1 + i % 5)} for i in range(300)]
WIKI = [(str(i), f"Title {i}", f"Body of article {i}. It has two sentences.") for i in range(60)]


def corpora(tmp: Path) -> dict[str, CorpusSpec]:
    write_jsonl(tmp / "jsonl" / "a.jsonl", ROWS)
    (tmp / "gz").mkdir()
    (tmp / "gz" / "a.jsonl.gz").write_bytes(gzip.compress(b"".join(json.dumps(r).encode() + b"\n" for r in ROWS)))
    (tmp / "json").mkdir()
    (tmp / "json" / "a.json").write_text(json.dumps(ROWS))
    (tmp / "parquet").mkdir()
    pq.write_table(pa.Table.from_pylist(ROWS), tmp / "parquet" / "a.parquet", row_group_size=64)
    write_wiki(tmp / "wiki" / "wiki_00", WIKI, compress=False)
    write_wiki(tmp / "wikibz2" / "wiki_00.bz2", WIKI)
    whole = bz2.compress("".join(f'<doc id="{i}" title="T">\nT\n\nText {i}.\n</doc>\n' for i in range(500)).encode())
    (tmp / "truncated").mkdir()
    (tmp / "truncated" / "wiki_00.bz2").write_bytes(whole[: len(whole) // 2])
    return {
        "jsonl": CorpusSpec("t", "jsonl", str(tmp / "jsonl"), part_size_mb=0.004),
        "jsonl.gz": CorpusSpec("t", "jsonl", str(tmp / "gz")),
        "json": CorpusSpec("t", "json", str(tmp / "json")),
        "parquet": CorpusSpec("t", "parquet", str(tmp / "parquet")),
        "wikiextractor": CorpusSpec("t", "wikiextractor", str(tmp / "wiki")),
        "wikiextractor.bz2": CorpusSpec("t", "wikiextractor", str(tmp / "wikibz2")),
        "truncated.bz2": CorpusSpec("t", "wikiextractor", str(tmp / "truncated")),
    }


@pytest.mark.parametrize("kind", ["jsonl", "jsonl.gz", "json", "parquet", "wikiextractor", "wikiextractor.bz2", "truncated.bz2"])
def test_the_digest_taken_while_reading_equals_the_digest_of_the_parts_bytes(tmp_path, kind):
    spec = corpora(tmp_path)[kind]
    plan = plan_parts(spec)
    if kind in ("jsonl", "parquet"):
        assert len(plan) > 2
    for part in plan:
        digest = InputDigest()
        items = list(read_part(spec, part, digest))
        assert items  # the reader really read the part
        assert digest.result() == part_digest(spec, part), part
    path = corpus_root(spec) / plan[0].file
    size = path.stat().st_size
    if kind == "jsonl":  # byte ranges: every byte in exactly one part
        assert sum(part_digest(spec, p).bytes for p in plan) == size
    elif kind != "parquet":  # whole files
        assert all(part_digest(spec, p).bytes == size for p in plan)


@pytest.mark.parametrize("kind", ["jsonl", "parquet", "wikiextractor.bz2", "json"])
def test_a_same_size_edit_anywhere_changes_a_part_digest_and_the_corpus_digest(tmp_path, kind):
    spec = corpora(tmp_path)[kind]
    plan = plan_parts(spec)
    path = corpus_root(spec) / plan[0].file

    def digests():
        return [part_digest(spec, p).digest for p in plan_parts(spec)]

    def whole(ds):
        return corpus_digest([(p.file, p.start, p.end, d) for p, d in zip(plan, ds)])

    before = digests()
    data = path.read_bytes()
    # (Parquet's magic bytes and footer length stay: without them it is not a Parquet file.)
    ends = (len(data) // 3, len(data) // 2) if kind == "parquet" else (0, len(data) // 3, len(data) // 2, len(data) - 1)
    for at in ends:
        path.write_bytes(data[:at] + bytes([data[at] ^ 1]) + data[at + 1 :])
        after = digests()
        assert after != before and whole(after) != whole(before), at
        if kind == "jsonl":  # only the part holding the byte
            assert [i for i, (a, b) in enumerate(zip(before, after)) if a != b] == [next(p.part for p in plan if p.start <= at < p.end)]
    path.write_bytes(data)
    assert digests() == before
