"""A stored trajectory holds each tool result once (in its tool call's `text`); the message that
showed it keeps the words around it and a pointer, and `unpack_messages` gives the conversation
back exactly as the model saw it."""

from __future__ import annotations

import asyncio
import json

from arag.agent.episode import CONTENT_FROM, pack_messages, unpack_messages
from arag.evaluation.questions import Question, load_questions
from arag.evaluation.run_config import run_settings
from arag.evaluation.runner import EpisodeRunner
from tests.support.scripted_evaluation import QUESTIONS, base_overrides, compose_evaluate

LONG_A = "chunk_id: 0:3 | title: Lothair II\nLothair II was the son of Emperor Lothair I and Ermengarde of Tours."
LONG_B = "chunk_id: 0:7 | title: Ermengarde of Tours\nErmengarde of Tours was the wife of Emperor Lothair I."


def calls(*texts: str) -> list[dict]:
    return [{"step": i + 1, "name": "chunk_read", "text": t} for i, t in enumerate(texts)]


def test_json_and_native_results_are_stored_once_and_come_back_exactly():
    tool_calls = calls(LONG_A, LONG_B, LONG_A, "no match")
    messages = [
        {"role": "system", "content": "You answer questions. " + LONG_A},  # not a tool result: kept
        {"role": "user", "content": "Who was Lothair II's mother?"},
        {"role": "assistant", "content": '{"tool": "chunk_read", "arguments": {"chunk_ids": ["0:3"]}}'},
        {"role": "user", "content": f"Result of chunk_read:\n{LONG_A}"},  # JSON protocol
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c2", "type": "function", "function": {"name": "chunk_read", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c2", "name": "chunk_read", "content": LONG_B},  # native protocol
        {"role": "user", "content": f"Result of chunk_read:\n{LONG_A}"},  # the same result again: its own call
        {"role": "user", "content": "Result of chunk_read:\nno match"},  # too short to point at
        {"role": "user", "content": f"Result of chunk_read:\n{LONG_B[:40]} [cut to fit the context window]"},  # not a call's text
    ]
    packed = pack_messages(messages, tool_calls)
    refs = [m[CONTENT_FROM] for m in packed if CONTENT_FROM in m]
    assert [r["tool_call"] for r in refs] == [0, 1, 2]
    assert refs[0]["before"] == "Result of chunk_read:\n" and refs[0]["after"] == ""
    assert packed[0] == messages[0] and packed[7] == messages[7] and packed[8] == messages[8]
    stored = json.dumps({"tool_calls": tool_calls, "messages": packed})
    assert stored.count("Lothair II was the son") == 3  # the system prompt, the calls 0 and 2; none in the messages
    assert unpack_messages(json.loads(stored)) == messages


def test_trajectories_stored_before_packing_read_as_they_are():
    old = {"tool_calls": calls(LONG_A), "messages": [{"role": "user", "content": f"Result of chunk_read:\n{LONG_A}"}]}
    assert unpack_messages(old) == old["messages"]
    assert unpack_messages({}) == []


def test_an_evaluated_row_stores_each_tool_result_once(eval_index, questions_file, tmp_path):
    cfg = compose_evaluate(*base_overrides(eval_index.path, questions_file, tmp_path / "results"))
    runner = EpisodeRunner(run_settings(cfg, load_questions(str(questions_file), "error")))
    try:
        q = QUESTIONS[0]
        row = asyncio.run(runner.run(Question(**{**q, "answers": tuple(q["answers"]), "supporting_titles": tuple(q["supporting_titles"])})))
    finally:
        runner.close()
    assert row.status == "ok", row.failure
    trajectory = json.loads(row.trajectory)
    texts = [c["text"] for c in trajectory["tool_calls"]]
    assert texts and all(len(t) > 100 for t in texts)
    for text in texts:
        assert row.trajectory.count(json.dumps(text)[1:-1]) == 1
    conversation = unpack_messages(trajectory)
    shown = "\n".join(m.get("content") or "" for m in conversation)
    assert all(text in shown for text in texts)
    assert sum(CONTENT_FROM in m for m in trajectory["messages"]) == len(texts)
