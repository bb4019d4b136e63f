"""The results tree: atomic parts, resume keys, failed rows superseded, one row per question."""

from __future__ import annotations

import dataclasses
import os

import duckdb
import pyarrow.parquet as pq
import pytest

from arag.evaluation.records import ROW_FAILED, OK, row_schema, EpisodeRow
from arag.tools import TOOLS
from arag.evaluation.results import RunLockedError, RunStore


def row(qid: str, status: str = OK, attempt: int = 1, **kw) -> dict:
    r = EpisodeRow(run_id="r1", dataset="d", question_id=qid, question="?", gold_answers=["a"], supporting_titles=[], method="m", model="x", backend="scripted", status=status, attempt=attempt, **kw)
    return r.to_record()


def test_schema_has_a_column_for_every_row_field():
    """Every field is a column, but `calls`, which is a calls_<tool> column per registered tool and calls_other."""
    names = row_schema().names
    assert [n for n in names if not n.startswith("calls_")] == [f.name for f in dataclasses.fields(EpisodeRow) if f.name != "calls"]
    assert [n for n in names if n.startswith("calls_")] == [*(f"calls_{t}" for t in TOOLS), "calls_other"]
    assert row("q", calls={"chunk_read": 2, "made_up": 1})["calls_chunk_read"] == 2 and row("q", calls={"made_up": 1})["calls_other"] == 1


def test_write_splits_ok_and_failed_and_resume_reads_ok_ids(tmp_path):
    with RunStore(tmp_path, "r1") as store:
        assert store.write([row("a"), row("b", ROW_FAILED, failure="boom"), row("c")]) == (2, 1)
        assert store.write([row("d")]) == (1, 0)
        assert store.done_ids() == {"a", "c", "d"}
        assert len(store.part_files()) == 2
        failed = store.failed_table()
        assert failed.column("question_id").to_pylist() == ["b"] and failed.schema == row_schema()
        assert not list(tmp_path.glob("**/*.tmp"))


def test_claim_failed_removes_retried_rows_and_returns_attempts(tmp_path):
    with RunStore(tmp_path, "r1") as store:
        store.write([row("a", ROW_FAILED), row("b", ROW_FAILED, attempt=2), row("c", ROW_FAILED)])
        assert store.claim_failed(["b", "c", "zzz"]) == {"b": 2, "c": 1}
        assert store.failed_table().column("question_id").to_pylist() == ["a"]
        # A newer failure of the same question replaces the older row.
        store.write([row("a", ROW_FAILED, attempt=2)])
        assert store.failed_table().column("attempt").to_pylist() == [2]
        assert store.claim_failed(["a"]) == {"a": 2}
        assert not store.failed_file.exists()


def test_every_question_is_counted_once_across_the_tree(tmp_path):
    with RunStore(tmp_path, "r1") as store:
        store.write([row("a"), row("b", ROW_FAILED)])
        attempts = store.claim_failed(["b"])
        store.write([row("b", attempt=attempts["b"] + 1)])
    ((n, distinct),) = duckdb.sql(f"SELECT count(*), count(DISTINCT question_id) FROM '{tmp_path}/**/*.parquet'").fetchall()
    assert n == distinct == 2


def test_open_removes_temp_files_of_a_killed_writer_and_locks_the_run(tmp_path):
    store = RunStore(tmp_path, "r1").open()
    store.write([row("a")])
    stale = store.episodes / ".part-x.parquet.999.tmp"
    stale.write_bytes(b"half a file")
    with pytest.raises(RunLockedError, match="another evaluation is writing"):
        RunStore(tmp_path, "r1").open()
    store.close()
    with RunStore(tmp_path, "r1") as again:
        assert not stale.exists() and again.done_ids() == {"a"}


def test_run_info_is_written_once_and_checked(tmp_path):
    with RunStore(tmp_path, "r1") as store:
        store.write_run_info({"run_id": "r1", "n": 1})
        store.write_run_info({"run_id": "r1", "n": 2})
        assert '"n": 1' in (store.root / "run.json").read_text()
        store.log_invocation({"ran": 3})
        store.log_invocation({"ran": 0})
        assert len((store.root / "invocations.jsonl").read_text().splitlines()) == 2
    os.replace(tmp_path / "r1" / "run.json", tmp_path / "r1" / "run.json.bak")
    (tmp_path / "r1" / "run.json").write_text('{"run_id": "other"}')
    with RunStore(tmp_path, "r1") as store, pytest.raises(ValueError, match="belongs to run 'other'"):
        store.write_run_info({"run_id": "r1"})


def test_parts_are_complete_parquet_files(tmp_path):
    with RunStore(tmp_path, "r1") as store:
        store.write([row(str(i)) for i in range(50)])
        (part,) = store.part_files()
    assert pq.read_metadata(part).num_rows == 50
