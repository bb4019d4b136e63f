"""benchmarks/cpu_evaluations/chunk_read_outcomes.py: what an episode's chunk_read calls got back."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from arag.evaluation.rows import EpisodeRow
from arag.evaluation.results import RunStore

REPO = Path(__file__).resolve().parents[2]
SCRIPT = ["-m", "benchmarks.cpu_evaluations.chunk_read_outcomes"]  # run as the docs say, from the checkout


def json_episode() -> dict:
    call = json.dumps({"tool": "chunk_read", "arguments": {"chunk_ids": ["<document>#1"]}})
    return {"messages": [
        {"role": "system", "content": "..."}, {"role": "user", "content": "question"},
        {"role": "assistant", "content": call}, {"role": "user", "content": 'Result of chunk_read:\nUnknown chunk id (not in this index): "<document>#1"'},
        {"role": "assistant", "content": call}, {"role": "user", "content": 'Result of chunk_read:\nUnknown chunk id (not in this index): "<document>#1"'},
        {"role": "assistant", "content": json.dumps({"tool": "chunk_read", "arguments": {"chunk_ids": ["p0#3"]}})},
        {"role": "user", "content": "Result of chunk_read:\n[chunk_id: p0#3 | previous: p0#2 | next: p0#4]\ntext"},
        {"role": "assistant", "content": json.dumps({"tool": "keyword_search", "arguments": {"keywords": ["x"]}})},
        {"role": "user", "content": "Result of keyword_search:\n..."},
        {"role": "assistant", "content": json.dumps({"answer": "a"})},
    ]}


def native_episode() -> dict:
    def call(i: str, ids: list[str]) -> dict:
        return {"id": i, "type": "function", "function": {"name": "chunk_read", "arguments": json.dumps({"chunk_ids": ids})}}

    return {"messages": [
        {"role": "user", "content": "question"},
        {"role": "assistant", "content": "", "tool_calls": [call("c1", ["p0#3"]), call("c2", ["p0#4"])]},
        {"role": "tool", "tool_call_id": "c1", "name": "chunk_read", "content": "[chunk_id: p0#3]\ntext"},
        {"role": "tool", "tool_call_id": "c2", "name": "chunk_read", "content": "[chunk_id: p0#4]\ntext"},
        {"role": "assistant", "content": "", "tool_calls": [call("c3", ["p0#3"])]},
        {"role": "tool", "tool_call_id": "c3", "name": "chunk_read", "content": "[chunk_id: p0#3]\nAlready read in this episode; its text is earlier in the conversation."},
        {"role": "assistant", "content": "a"},
    ]}


def test_counts_repeats_unknown_ids_and_already_read_notes_for_both_protocols(tmp_path):
    results = tmp_path / "results"
    for run_id, method, trajectory in (("r1", "arag_naive", json_episode()), ("r2", "arag_full", native_episode())):
        row = EpisodeRow(run_id=run_id, dataset="2wikimultihopqa", question_id="q0", question="?", gold_answers=["a"], supporting_titles=[],
                         method=method, model="qwen", backend="llamacpp", status="ok", prediction="a", trajectory=json.dumps(trajectory)).to_record()
        with RunStore(results, run_id) as store:
            store.write([row])
    out = subprocess.run([sys.executable, *SCRIPT, str(results)], capture_output=True, text=True, check=True, cwd=REPO).stdout
    rows = [line for line in out.splitlines() if line.startswith("| arag")]
    # episodes, calls, repeats, unknown-id replies, already-read notes, unknown-id share of calls
    assert rows == ["| arag_full | 1 | 3 | 1 | 0 | 1 | 0.0% |", "| arag_naive | 1 | 3 | 1 | 2 | 0 | 66.7% |"]


def test_only_the_first_questions_of_a_file_are_counted(tmp_path):
    """Runs of different lengths compare on the same questions (`--questions FILE --limit N`)."""
    from tests.conftest import write_jsonl

    results = tmp_path / "results"
    with RunStore(results, "r1") as store:
        store.write([EpisodeRow(run_id="r1", dataset="2wikimultihopqa", question_id=q, question="?", gold_answers=["a"], supporting_titles=[], method="arag_naive",
                                model="qwen", backend="llamacpp", status="ok", prediction="a", trajectory=json.dumps(json_episode())).to_record() for q in ("q0", "q1", "q2")])
    questions = write_jsonl(tmp_path / "questions.jsonl", [{"id": q, "question": "?", "answers": ["a"]} for q in ("q2", "q0", "q1")])
    out = subprocess.run([sys.executable, *SCRIPT, str(results), "--questions", str(questions), "--limit", "2"], capture_output=True, text=True, check=True, cwd=REPO).stdout
    assert [line for line in out.splitlines() if line.startswith("| arag")] == ["| arag_naive | 2 | 6 | 2 | 4 | 0 | 66.7% |"]
    done = subprocess.run([sys.executable, *SCRIPT, str(results), "--limit", "2"], capture_output=True, text=True, cwd=REPO)
    assert done.returncode != 0 and "--limit needs --questions" in done.stderr


def test_a_folder_without_episodes_is_named_in_the_error(tmp_path):
    done = subprocess.run([sys.executable, *SCRIPT, str(tmp_path / "nowhere")], capture_output=True, text=True, cwd=REPO)
    assert done.returncode != 0 and f"no episodes under {tmp_path / 'nowhere'}" in done.stderr


def test_a_trajectory_that_is_not_json_is_named_by_run_and_question(tmp_path):
    results = tmp_path / "results"
    row = EpisodeRow(run_id="r1", dataset="2wikimultihopqa", question_id="q7", question="?", gold_answers=["a"], supporting_titles=[],
                     method="arag_full", model="qwen", backend="llamacpp", status="ok", prediction="a", trajectory="{cut off").to_record()
    with RunStore(results, "r1") as store:
        store.write([row])
    done = subprocess.run([sys.executable, *SCRIPT, str(results)], capture_output=True, text=True, cwd=REPO)
    assert done.returncode != 0 and "r1: question q7: its trajectory is not JSON" in done.stderr and "| method |" not in done.stdout
