"""The results tree: atomic parts, resume keys, failed rows superseded, one row per question."""

from __future__ import annotations

import dataclasses
import os

import duckdb
import pyarrow.parquet as pq
import pytest

from arag.evaluation.rows import ROW_FAILED, OK, row_schema, EpisodeRow
from arag.tools import TOOLS
from arag.tools.failures import FAILURE_KINDS
from arag.evaluation.results import RunLockedError, RunStore


def row(qid: str, status: str = OK, attempt: int = 1, **kw) -> dict:
    r = EpisodeRow(run_id="r1", dataset="d", question_id=qid, question="?", gold_answers=["a"], supporting_titles=[], method="m", model="x", backend="scripted", status=status, attempt=attempt, **kw)
    return r.to_record()


def test_schema_has_a_column_for_every_row_field():
    """Every field is a column, but `calls`, which is a calls_<tool> column per registered tool and
    calls_other, and `tool_error_kinds`, a tool_errors_<kind> column per failure kind."""
    names = row_schema().names
    kinds = [f"tool_errors_{k}" for k in FAILURE_KINDS]
    assert [n for n in names if not n.startswith("calls_") and n not in kinds] == [f.name for f in dataclasses.fields(EpisodeRow) if f.name not in ("calls", "tool_error_kinds")]
    assert [n for n in names if n.startswith("calls_")] == [*(f"calls_{t}" for t in TOOLS), "calls_other"]
    assert names[names.index("tool_errors") + 1 : names.index("tool_errors") + 1 + len(kinds)] == kinds
    assert row("q", calls={"chunk_read": 2, "made_up": 1})["calls_chunk_read"] == 2 and row("q", calls={"made_up": 1})["calls_other"] == 1
    counted = row("q", tool_errors=3, tool_error_kinds={"empty": 2, "unknown_ids": 1})
    assert (counted["tool_errors_empty"], counted["tool_errors_unknown_ids"], counted["tool_errors_refused"]) == (2, 1, 0)
    with pytest.raises(ValueError, match="tool_error_kinds: unknown failure kind"):
        row("q", tool_error_kinds={"made_up": 1})


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
        assert store.failed_files() == [] and store.failed_table() is None


def test_failed_rows_are_appended_in_parts_not_rewritten(tmp_path, monkeypatch):
    """An outage fails every batch: each failed row is written once (the whole failed file per
    batch made the bytes written grow with the square of the failures)."""
    import arag.evaluation.results as results

    written: list[tuple[str, int]] = []
    real = results.atomic_write_table
    monkeypatch.setattr(results, "atomic_write_table", lambda table, path: (written.append((path.name, table.num_rows)), real(table, path)))
    with RunStore(tmp_path, "r1") as store:
        for batch in range(10):
            store.write([row(f"q{batch}-{i}", ROW_FAILED, failure="outage") for i in range(25)])
        assert [n for _, n in written] == [25] * 10 and len({name for name, _ in written}) == 10
        assert len(store.failed_files()) == 10 and store.failed_table().num_rows == 250
        # Claiming rewrites only the file that holds the claimed row.
        written.clear()
        assert store.claim_failed(["q3-7"]) == {"q3-7": 1}
        assert [n for _, n in written] == [24] and store.failed_table().num_rows == 249
    with RunStore(tmp_path, "r1") as store:  # reopened: a newer failure still replaces the stored row
        written.clear()
        store.write([row("q5-0", ROW_FAILED, attempt=2)])
        assert sorted(n for _, n in written) == [1, 24]
        attempts = {q: a for q, a in zip(*store.failed_table().select(["question_id", "attempt"]).to_pydict().values())}
        assert len(attempts) == 249 and attempts["q5-0"] == 2


def test_a_failed_file_of_an_older_version_reads_as_a_part(tmp_path):
    from arag.evaluation.rows import rows_to_table

    with RunStore(tmp_path, "r1") as store:
        pq.write_table(rows_to_table([row("old", ROW_FAILED), row("kept", ROW_FAILED)]), store.failed_dir / "failed.parquet")
        store.write([row("new", ROW_FAILED)])
        assert sorted(store.failed_table().column("question_id").to_pylist()) == ["kept", "new", "old"]
        assert store.claim_failed(["old"]) == {"old": 1}
        assert sorted(store.failed_table().column("question_id").to_pylist()) == ["kept", "new"]
        assert {r["question_id"] for r in store.read_rows(["question_id"])} == {"kept", "new"}


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
