import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from arag.corpus.readers import CorpusError, CorpusSpec, FieldNames, plan_parts, read_part
from arag.corpus.documents import Document, Reject
from tests.conftest import write_jsonl, write_wiki


def read_all(spec: CorpusSpec):
    items = [item for part in plan_parts(spec) for item in read_part(spec, part)]
    return [i for i in items if isinstance(i, Document)], [i for i in items if isinstance(i, Reject)]


def test_jsonl_documents_keep_ids_titles_and_lines(passages_corpus):
    docs, rejects = read_all(CorpusSpec("t", "jsonl", str(passages_corpus)))
    assert rejects == []
    assert [d.doc_id for d in docs] == ["0", "1", "2", "3", "4"]
    assert docs[1].title == "Lothair II" and docs[1].line == 2 and docs[1].source == "corpus.jsonl"


def test_prepend_title_makes_title_the_first_line(passages_corpus):
    docs, _ = read_all(CorpusSpec("t", "jsonl", str(passages_corpus), prepend_title=True))
    assert docs[0].text.startswith("Teutberga\nTeutberga (died")


def test_configurable_field_names_and_generated_ids(tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [{"body": "Alpha beta."}, {"body": "Gamma delta."}])
    spec = CorpusSpec("t", "jsonl", str(path), fields=FieldNames(id=None, title=None, text="body"))
    docs, rejects = read_all(spec)
    assert rejects == []
    assert [d.doc_id for d in docs] == ["c.jsonl:1", "c.jsonl:2"]


def test_bad_rows_are_rejected_with_file_line_and_reason(tmp_path):
    path = write_jsonl(
        tmp_path / "bad.jsonl",
        [
            {"doc_id": "a", "text": "Fine text."},
            '{"doc_id": "b", "text": ',  # truncated JSON
            b'{"doc_id": "c", "text": "caf\xe9"}',  # Latin-1 byte, not UTF-8
            {"doc_id": "d"},  # no text
            {"doc_id": "e", "text": "   "},  # blank text
            {"doc_id": "f", "text": 42},  # wrong type
            "[1, 2]",  # not an object
            {"text": "No id here."},  # id field configured but missing
            {"doc_id": "g", "text": "Also fine."},
        ],
    )
    docs, rejects = read_all(CorpusSpec("t", "jsonl", str(path)))
    assert [d.doc_id for d in docs] == ["a", "g"]
    by_line = {r.line: r.reason for r in rejects}
    assert set(by_line) == {2, 3, 4, 5, 6, 7, 8}
    assert all(r.source == "bad.jsonl" for r in rejects)
    assert "invalid JSON" in by_line[2]
    assert "invalid UTF-8" in by_line[3]
    assert "missing field 'text'" in by_line[4]
    assert "empty" in by_line[5]
    assert "not a string" in by_line[6]
    assert "JSON object" in by_line[7]
    assert "missing field 'doc_id'" in by_line[8]


def test_missing_path_and_unknown_format_fail_up_front(tmp_path):
    with pytest.raises(CorpusError, match="does not exist: .*nowhere"):
        plan_parts(CorpusSpec("t", "jsonl", str(tmp_path / "nowhere")))
    (tmp_path / "x.txt").write_text("hi")
    with pytest.raises(CorpusError, match="unknown format 'csv'"):
        plan_parts(CorpusSpec("t", "csv", str(tmp_path / "x.txt")))
    with pytest.raises(CorpusError, match="no input files"):
        plan_parts(CorpusSpec("t", "jsonl", str(tmp_path)))


def test_jsonl_parts_cover_every_line_once_with_true_line_numbers(tmp_path):
    rows = [{"doc_id": str(i), "text": f"Sentence number {i}. " * (1 + i % 7)} for i in range(3000)]
    path = write_jsonl(tmp_path / "big.jsonl", rows)
    spec = CorpusSpec("t", "jsonl", str(path), part_size_mb=0.02)
    parts = plan_parts(spec)
    assert len(parts) > 5
    docs, rejects = read_all(spec)
    assert rejects == []
    assert [d.doc_id for d in docs] == [str(i) for i in range(3000)]
    assert [d.line for d in docs] == list(range(1, 3001))
    assert plan_parts(spec) == parts  # deterministic plan: stable ids across runs


def test_a_file_a_little_over_the_part_size_is_one_part_not_a_part_and_a_sliver(tmp_path):
    rows = [{"doc_id": str(i), "text": "A sentence of some length. " * 3} for i in range(1000)]
    path = write_jsonl(tmp_path / "c.jsonl", rows)
    size = path.stat().st_size

    def sizes(part_bytes: float) -> list[int]:
        return [p.end - p.start for p in plan_parts(CorpusSpec("t", "jsonl", str(path), part_size_mb=part_bytes / 2**20))]

    assert sizes(size / 1.2) == [size]  # 20% over: no 0.2 sliver
    halves = sizes(size / 2.0)  # cut at the first line end past half: what is left is just under half
    assert len(halves) == 2 and sum(halves) == size and min(halves) > 0.45 * size
    assert len(sizes(size / 2.5)) == 3  # a half-part tail is over the slack: its own part
    docs, _ = read_all(CorpusSpec("t", "jsonl", str(path), part_size_mb=size / 1.2 / 2**20))
    assert [d.doc_id for d in docs] == [str(i) for i in range(1000)]


def test_json_list_and_parquet_inputs(tmp_path):
    (tmp_path / "c.json").write_text(json.dumps([{"doc_id": "x", "text": "One."}, {"doc_id": "y", "text": ""}]))
    docs, rejects = read_all(CorpusSpec("t", "json", str(tmp_path / "c.json")))
    assert [d.doc_id for d in docs] == ["x"] and rejects[0].line == 2

    table = pa.table({"id": [str(i) for i in range(10)], "body": [f"Text {i}." for i in range(10)]})
    pq.write_table(table, tmp_path / "c.parquet", row_group_size=4)
    spec = CorpusSpec("t", "parquet", str(tmp_path / "c.parquet"), fields=FieldNames(id="id", title=None, text="body"))
    assert len(plan_parts(spec)) == 3  # one part per row group
    docs, rejects = read_all(spec)
    assert [d.doc_id for d in docs] == [str(i) for i in range(10)] and docs[9].line == 10


def test_wikiextractor_folder_plain_and_bz2(tmp_path):
    root = tmp_path / "wiki"
    write_wiki(root / "AA" / "wiki_00.bz2", [("12", "Anarchism", "Anarchism is a political philosophy.\nIt opposes authority."), ("25", "Autism", "Autism is a condition.")])
    write_wiki(root / "AB" / "wiki_00", [("39", "Albedo", "Albedo is reflectivity.")], compress=False)
    (root / "AA" / "README.txt").write_text("not a corpus file")
    docs, rejects = read_all(CorpusSpec("wiki", "wikiextractor", str(root)))
    assert rejects == []
    assert [(d.doc_id, d.title) for d in docs] == [("12", "Anarchism"), ("25", "Autism"), ("39", "Albedo")]
    assert docs[0].text == "Anarchism is a political philosophy.\nIt opposes authority."  # title line removed
    assert docs[0].source == "AA/wiki_00.bz2" and docs[0].line == 1


def test_truncated_bz2_keeps_complete_documents_and_rejects_the_rest(tmp_path):
    path = write_wiki(tmp_path / "wiki_00.bz2", [(str(i), f"T{i}", f"Body of article {i}. " * 200) for i in range(50)], level=1)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    docs, rejects = read_all(CorpusSpec("wiki", "wikiextractor", str(path)))
    assert 0 < len(docs) < 50
    assert [d.doc_id for d in docs] == [str(i) for i in range(len(docs))]
    assert len(rejects) == 1 and rejects[0].source == "wiki_00.bz2"
    assert "truncated or corrupt" in rejects[0].reason and rejects[0].line > 0


def test_wiki_non_utf8_line_rejects_that_document_only(tmp_path):
    raw = ('<doc id="1" url="u" title="A">\nA\n\nGood text.\n</doc>\n'
           '<doc id="2" url="u" title="B">\nB\n\n').encode() + b"Bad \xff byte.\n</doc>\n"
    (tmp_path / "wiki_00").write_bytes(raw)
    docs, rejects = read_all(CorpusSpec("wiki", "wikiextractor", str(tmp_path / "wiki_00")))
    assert [d.doc_id for d in docs] == ["1"]
    assert len(rejects) == 1 and "invalid UTF-8" in rejects[0].reason and "document 2" in rejects[0].reason


def test_wiki_unclosed_document_is_rejected(tmp_path):
    (tmp_path / "wiki_00").write_text('<doc id="1" url="u" title="A">\nA\n\nText without end.\n')
    docs, rejects = read_all(CorpusSpec("wiki", "wikiextractor", str(tmp_path / "wiki_00")))
    assert docs == [] and "no closing </doc>" in rejects[0].reason
