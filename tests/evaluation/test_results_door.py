"""What readers ask the results store instead of spelling its layout: the run folders of a tree,
its row files, a run's files, and a run's summary over them."""

from __future__ import annotations

from arag.evaluation.rows import EpisodeRow
from arag.evaluation.results import RunStore, find_run_dirs, row_files
from arag.evaluation.summary import format_summary, summarize_run


def rows(run_id: str, statuses: str) -> list[dict]:
    return [
        EpisodeRow(run_id=run_id, dataset="d", question_id=f"q{i}", question="?", gold_answers=["a"], supporting_titles=[], method="m", model="x",
                   backend="b", status="ok" if s == "o" else "failed", contain_acc=1.0 if s == "o" else 0.0, steps=2).to_record()
        for i, s in enumerate(statuses)
    ]


def test_readers_find_runs_rows_and_summaries_through_the_store(tmp_path):
    with RunStore(tmp_path, "flat") as flat:
        flat.write_run_info({"run_id": "flat"})
        flat.write(rows("flat", "oof"))
    with RunStore(tmp_path / "sweep", "nested") as nested:
        nested.write_run_info({"run_id": "nested"})
        nested.write(rows("nested", "o"))
    with RunStore(tmp_path, "no-info") as bare:  # rows without a description still count as results
        bare.write(rows("no-info", "f"))
    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "plot.parquet").write_bytes(b"not a results file")

    assert find_run_dirs(tmp_path) == [tmp_path / "flat", tmp_path / "sweep" / "nested"]
    assert find_run_dirs(tmp_path, nested=False) == [tmp_path / "flat"]
    assert RunStore(tmp_path, "flat").has_info() and not RunStore(tmp_path, "no-info").has_info()
    files = row_files(tmp_path)
    assert sorted(files) == sorted([*flat.row_files(), *nested.row_files(), *bare.row_files()]) and len(files) == 4
    assert RunStore.at(tmp_path / "flat").files() == [flat.info_path, *flat.row_files()]

    summary = summarize_run(flat)
    assert (summary["questions"], summary["stored"], summary["ok"], summary["failed"]) == (3, 3, 2, 1)
    assert summary["run_id"] == "flat" and summary["path"] == str(tmp_path / "flat")
    chosen = summarize_run(flat, ["q0", "q2", "q9"])  # q9: selected, never stored
    assert (chosen["questions"], chosen["stored"], chosen["contain_acc"]) == (3, 2, 0.5)
    assert format_summary(chosen).splitlines()[0] == "evaluated 2/3 questions: 1 answered, 1 failed"
    empty = summarize_run(RunStore(tmp_path, "never-ran"), ["q0"])
    assert (empty["questions"], empty["stored"]) == (1, 0) and "contain-acc" not in format_summary(empty)
