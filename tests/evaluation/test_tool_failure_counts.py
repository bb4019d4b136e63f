"""Failure modes counted (issue 39, item 4): a tool call whose result the model cannot use is a tool
error of a kind (arag.tools.failures), in the tool result, the call's record, the row, the report and
the viewer; a call identical to an earlier one of the episode is a repeated call."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from arag.evaluation.questions import Question
from arag.evaluation.rows import EpisodeRow, rows_to_table
from arag.evaluation.episode_facts import repeated_flags
from arag.report.build import build_report
from tests.support.report_tables import table
from arag.evaluation.results import RUN_INFO, RunStore
from arag.evaluation.runner import EpisodeRunner
from arag.llm.scripted import ScriptedBackend
from arag.tools import DocumentSession
from arag.tools.tracker import ReadTracker
from tests.support.scripted_evaluation import QUESTIONS, base_overrides, compose_evaluate, read_rows
from tests.evaluation.test_runner import settings

# Every kind the model can cause, and two repeats: the second empty search (top_k given as its
# default) and the second read of 2#0 and nope#9 (nothing new, an id unknown).
SCRIPT = [
    {"tool": "chunk_read", "arguments": {"chunk_ids": ["nope#9"]}},
    {"tool": "keyword_search", "arguments": {"keywords": ["zzzqqq"]}},
    {"tool": "keyword_search", "arguments": {"keywords": [" zzzqqq"], "top_k": 5}},
    {"tool": "chunk_read", "arguments": {"chunk_ids": ["2#0", "nope#9"]}},
    {"tool": "chunk_read", "arguments": {"chunk_ids": ["2#0", "nope#9"]}},
    {"tool": "chunk_read", "arguments": {"chunk_ids": ["2#0"]}},
    {"tool": "keyword_search", "arguments": {"keywords": "not a list"}},
    {"tool": "no_such_tool", "arguments": {}},
    {"answer": "20 March 851"},
]
KINDS = {"unknown_ids": 2, "empty": 2, "already_read": 1, "refused": 1, "unknown_tool": 1}
FAILURES = ["unknown_ids", "empty", "empty", None, "unknown_ids", "already_read", "refused", "unknown_tool"]
REPEATED = [False, False, True, False, True, False, False, False]
# The same script in Hydra's override syntax.
HYDRA_SCRIPT = (
    "[{tool:chunk_read,arguments:{chunk_ids:['nope#9']}},{tool:keyword_search,arguments:{keywords:[zzzqqq]}},"
    "{tool:keyword_search,arguments:{keywords:[' zzzqqq'],top_k:5}},{tool:chunk_read,arguments:{chunk_ids:['2#0','nope#9']}},"
    "{tool:chunk_read,arguments:{chunk_ids:['2#0','nope#9']}},"
    "{tool:chunk_read,arguments:{chunk_ids:['2#0']}},{tool:keyword_search,arguments:{keywords:'not a list'}},"
    "{tool:no_such_tool,arguments:{}},{answer:'20 March 851'}]"
)


def test_each_unusable_result_carries_its_kind_and_its_text_is_unchanged(ctx):
    unknown = ctx.call("chunk_read", {"chunk_ids": ["nope#9", "nope#8"]})
    assert (unknown.failure, unknown.error, unknown.details["unknown_ids"]) == ("unknown_ids", None, ["nope#9", "nope#8"])
    assert "nope#9" in unknown.text and not unknown.text.startswith("Error")  # the model reads what it read before
    partly = ctx.call("chunk_read", {"chunk_ids": ["2#0", "nope#9"]})
    assert partly.failure is None and partly.details["unknown_ids"] == ["nope#9"] and partly.retrieved_tokens > 0
    tracker = ReadTracker()
    assert ctx.call("chunk_read", {"chunk_ids": ["2#0"]}, tracker=tracker).failure is None
    again = ctx.call("chunk_read", {"chunk_ids": ["2#0"]}, tracker=tracker)
    assert again.failure == "already_read" and again.results[0].already_read
    assert ctx.call("chunk_read", {"chunk_ids": ["2#0", "nope#9"]}, tracker=tracker).failure == "unknown_ids"  # nothing new, an id unknown
    assert ctx.call("keyword_search", {"keywords": ["zzzqqq"]}).failure == "empty"
    assert ctx.call("keyword_search", {"keywords": ["Lothair"]}).failure is None
    assert ctx.call("semantic_search", {"query": "mother of Lothair"}).failure is None
    refused = ctx.call("keyword_search", {"keywords": "Lothair"})
    assert refused.failure == "refused" and refused.error and refused.to_json()["details"]["failure"] == "refused"
    assert ctx.call("no_such_tool", {}).failure == "unknown_tool"


def test_document_tools_name_unknown_references_and_empty_finds(ctx):
    session = DocumentSession()
    assert ctx.call("open", {"ref_id": "turn9search9"}, tracker=session).failure == "unknown_ids"
    found = ctx.call("search", {"queries": ["Lothair"]}, tracker=session)
    assert found.failure is None
    ref = found.details["ref_ids"][0]
    assert ctx.call("find", {"ref_id": ref, "patterns": ["zzzqqq"]}, tracker=session).failure == "empty"
    assert ctx.call("open", {"ref_id": ref}, tracker=session).failure is None
    assert ctx.call("summarize", {"notes": "n", "keep_ref_ids": ["turn9search9"]}, tracker=session).failure == "unknown_ids"
    assert ctx.call("summarize", {"notes": "n", "keep_ref_ids": []}, tracker=session).failure is None  # notes, not a search


def test_repeats_compare_normalised_arguments():
    flags = repeated_flags([
        ("keyword_search", {"keywords": ["Lothair"]}),
        ("keyword_search", {"top_k": 5.0, "keywords": [" Lothair  "]}),  # defaults, key order, 5.0, whitespace
        ("keyword_search", {"keywords": ["lothair"]}),  # case counts
        ("keyword_search", {"keywords": ["Lothair"], "top_k": 6}),
        ("semantic_search", {"keywords": ["Lothair"]}),  # another tool
        ("chunk_read", '{"chunk_ids": ['),  # raw text, not JSON
        ("chunk_read", '{"chunk_ids": [ '),
    ])
    assert flags == [False, True, False, False, False, False, True]


def run_episode(ctx, script=SCRIPT):
    runner = EpisodeRunner(settings(agent={"max_steps": 10}), backend=ScriptedBackend(script, replay=True), ctx=ctx)
    return asyncio.run(runner.run(Question("q0", "When did Lothair II's mother die?", ("20 March 851",), ("Ermengarde of Tours",))))


def test_the_row_counts_tool_errors_by_kind_and_repeated_calls(ctx):
    row = run_episode(ctx)
    assert row.status == "ok" and row.tool_calls == 8
    assert (row.tool_errors, row.tool_error_kinds, row.repeated_calls) == (7, KINDS, 2)
    record = row.to_record()
    assert (record["tool_errors_unknown_ids"], record["tool_errors_empty"], record["tool_errors_infrastructure"]) == (2, 2, 0)
    calls = json.loads(row.trajectory)["tool_calls"]
    assert [c["failure"] for c in calls] == FAILURES
    assert [c["unknown_id_count"] for c in calls] == [1, 0, 0, 1, 1, 0, 0, 0]


def old_run(root: Path, run_id: str, method: str, trajectory: str = "{}") -> None:
    """A run stored before failure kinds were recorded: its files lack the new columns, its
    tool_errors counted refusals only; `trajectory`: its one episode's. Its dataset is another than
    the scripted run's, so the viewer's page of one question across runs shows that run alone."""
    row = EpisodeRow(run_id=run_id, dataset="bench-old", question_id="q0", question="?", gold_answers=["a"], supporting_titles=[], method=method,
                     model="scripted", backend="scripted", status="ok", prediction="a", tool_calls=8, tool_errors=1, calls={"chunk_read": 8},
                     trajectory=trajectory)
    table = rows_to_table([row.to_record()])
    table = table.drop_columns([c for c in table.column_names if c.startswith("tool_errors_") or c == "repeated_calls"])
    (root / run_id / "episodes").mkdir(parents=True)
    pq.write_table(table, root / run_id / "episodes" / "part-0.parquet")
    (root / run_id / RUN_INFO).write_text(json.dumps({"run_id": run_id, "settings": {"dataset": "bench-old", "method": {"name": method}}}))


def as_stored_before_kinds(trajectory: str) -> str:
    """A trajectory as runs stored it before failure kinds and unknown-id counts were recorded."""
    old = json.loads(trajectory)
    for call in old["tool_calls"]:
        del call["failure"], call["unknown_id_count"]
    return json.dumps(old)


def failure_rows(markdown: str) -> dict[str, dict[str, str]]:
    """Per method, the tool-use tables' cells by header (the errors table and the kinds table merged)."""
    out: dict[str, dict[str, str]] = {}
    for title in ("Tool errors, repeated calls", "Tool errors by kind"):
        for record in table(markdown, title, section="Tool use").records:
            out.setdefault(record["method"], {}).update(record)
    return out


@pytest.fixture(scope="module")
def tree(ctx, tmp_path_factory):
    """A results tree with the scripted episode's run, the same episode stored before kinds were
    recorded (run "legacy", A-RAG (Naive)) and a run stored without a trajectory (run "bare", Naive RAG)."""
    root = tmp_path_factory.mktemp("failures") / "results"
    row = run_episode(ctx)
    with RunStore(root, row.run_id) as store:
        store.write_run_info({"run_id": row.run_id, "settings": json.loads(row.settings)})
        store.write([row.to_record()])
    old_run(root, "legacy", "arag_naive", as_stored_before_kinds(row.trajectory))
    old_run(root, "bare", "naive_rag")
    return {"root": root, "run_id": row.run_id}


COUNTED = ["unusable calls", "refused", "unknown tool", "unknown ids", "empty", "already read", "infrastructure", "repeated calls"]


def test_the_report_counts_errors_by_kind_and_repeats_from_the_trajectories_of_old_and_new_runs(tree):
    rows = failure_rows(build_report(tree["root"]).markdown)
    new, legacy, bare = rows["A-RAG (Full)"], rows["A-RAG (Naive)"], rows["Naive RAG"]
    assert [new[c] for c in COUNTED] == ["7 of 8 (87.5%)", "1", "1", "2", "2", "1", "0", "2 of 8 (25.0%)"]
    assert new["tool errors"] == "7.00"
    # Stored before kinds (its row says 1 tool error, refusals only): the same counts, read from what the calls returned.
    assert [legacy[c] for c in COUNTED] == [new[c] for c in COUNTED] and legacy["tool errors"] == "7.00"
    assert {bare[c] for c in [*COUNTED, "tool errors"]} == {"n/a"}  # no trajectory: not 0, never counted


def test_the_report_and_the_viewer_agree_on_every_count_of_the_three_runs(tree):
    from tests.support.facts_agreement import both_sides

    pairs = both_sides(tree["root"], build_report(tree["root"]).markdown)
    for report, viewer in pairs:
        assert report.cells == viewer.cells, report.run_id
    cells = {report.run_id: report.cells for report, _ in pairs}
    counted = {"tool errors": "7.00", "unusable calls": "7 of 8 (87.5%)", "repeated calls": "2 of 8 (25.0%)", "refused": "1", "unknown tool": "1",
               "unknown ids": "2", "empty": "2", "already read": "1", "infrastructure": "0"}
    assert cells[tree["run_id"]] == {**counted, "evidence read": "100.0", "evidence seen": "100.0"}  # Ermengarde's chunk read
    assert cells["legacy"] == {**counted, "evidence read": "–", "evidence seen": "–"}  # its question lists no supporting titles
    assert cells["bare"] == {**{c: "n/a" for c in [*counted, "unusable calls"]}, "evidence read": "–", "evidence seen": "–"}


def test_the_facts_of_a_trajectory_stored_before_kinds_match_the_recorded_ones(tree):
    from arag.evaluation.episode_facts import row_facts, trajectory_facts

    (row,) = RunStore.at(tree["root"] / tree["run_id"]).read_rows()
    recorded = trajectory_facts(json.loads(row["trajectory"]), row["supporting_titles"])
    assert list(recorded.failures) == FAILURES and list(recorded.repeated) == REPEATED
    assert (recorded.tool_errors, recorded.tool_error_kinds, recorded.repeated_calls, recorded.tool_calls) == (7, KINDS, 2, 8)
    inferred = row_facts({**row, "trajectory": as_stored_before_kinds(row["trajectory"])})
    assert (list(inferred.failures), list(inferred.repeated)) == (FAILURES, REPEATED)
    # The evidence counts come from the chunk titles the trajectory recorded: Ermengarde's chunk 2#0 was read.
    assert (recorded.evidence_supporting, recorded.evidence_seen, recorded.evidence_read) == (1, 1, 1) == (row["evidence_supporting"], row["evidence_seen"], row["evidence_read"])
    bare = row_facts({**row, "trajectory": "{}", "tool_calls": 8})
    assert (bare.counted, bare.tool_errors, bare.repeated_calls, bare.evidence_seen) == (False, None, None, 1)  # the row's evidence stands


def test_the_viewer_marks_unusable_results_and_repeated_calls(tree):
    from starlette.testclient import TestClient

    from arag.viewer import create_app
    from tests.viewer.test_viewer import Dom

    with TestClient(create_app(tree["root"])) as client:
        response = client.get(f"/episode?run={tree['run_id']}&q=q0")
        assert response.status_code == 200
        dom = Dom(response.text)
        calls = [a["class"].split() for _, a, _ in dom.having("tool-call")]
        assert ["unusable" in c for c in calls] == [f is not None for f in FAILURES]
        assert ["repeated" in c for c in calls] == REPEATED
        assert [x for _, _, x in dom.having("call-label")] == ["tool error: unknown ids", "tool error: empty", "tool error: empty", "repeated call", "1 unknown id",
                                                                 "tool error: unknown ids", "repeated call", "tool error: already read", "tool error: refused",
                                                                 "tool error: unknown tool"]
        assert "· 1 unknown id ·" in [x for _, _, x in dom.having("tool-call")][3]  # the partly unknown read
        assert dom.by_id("tool-errors") == "7 (refused 1, unknown tool 1, unknown ids 2, empty 2, already read 1) · 2"  # kinds in their list order
        compare = Dom(client.get("/compare?dataset=bench&q=q0").text)
        assert ["repeated" in a["class"].split() for _, a, _ in compare.having("tool-call")] == REPEATED


def test_the_evaluation_pipeline_stores_the_kinds(ray_local, eval_index, questions_file, tmp_path):
    """Through pipelines.evaluate (Ray workers, the results store): the row's columns by kind."""
    from arag.runtime.evaluate import evaluate

    results = tmp_path / "results"
    overrides = [o for o in base_overrides(eval_index.path, questions_file, results, "limit=1", "agent.max_steps=10") if not o.startswith("model.script=")]
    evaluate(compose_evaluate(*overrides, f"model.script={HYDRA_SCRIPT}"), out=io.StringIO())
    (row,) = read_rows(results)
    assert (row["question_id"], row["status"], row["tool_errors"], row["repeated_calls"]) == (QUESTIONS[0]["id"], "ok", 7, 2)
    assert {k: row[f"tool_errors_{k}"] for k in KINDS} == KINDS and row["tool_errors_infrastructure"] == 0
