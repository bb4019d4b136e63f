"""What the agent's chunk_read calls got back, per method, from stored episodes' trajectories.

The report counts chunk_read calls; this says what became of them: how many repeat an earlier call of
the same episode, how many were answered "Unknown chunk id(s)" (ids not in the index, e.g. made up by
the model) and how many carry an "Already read in this episode" note. It reads the JSON-protocol
trajectories the evaluation stores, and the native protocol's tool calls.

    python benchmarks/cpu_evaluations/chunk_read_outcomes.py benchmarks/cpu_evaluations/results/2wiki
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import duckdb

from arag.agent.protocols import JsonProtocol, ToolAction
from arag.llm.types import Completion

UNKNOWN = "Unknown chunk id"  # arag.tools.render.chunk_read_text's note for ids not in the index
ALREADY_READ = "Already read in this episode"


def chunk_read_calls(trajectory: dict) -> list[tuple[str, str]]:
    """(arguments as canonical JSON, the tool's reply) for every chunk_read call of one episode; the
    messages are stored in OpenAI form (`Message.to_openai`)."""
    messages, out = trajectory.get("messages") or [], []
    tool_replies = {m.get("tool_call_id"): m.get("content", "") for m in messages if m.get("role") == "tool"}
    for i, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        if message.get("tool_calls"):  # native protocol: each call has its own reply
            for call in message["tool_calls"]:
                if call["function"]["name"] == "chunk_read":
                    out.append((_canonical(call["function"]["arguments"]), tool_replies.get(call["id"], "")))
            continue
        reply = messages[i + 1].get("content", "") if i + 1 < len(messages) else ""  # JSON protocol: the next user turn
        for action in JsonProtocol().parse(Completion(text=message.get("content") or "")):
            if isinstance(action, ToolAction) and action.name == "chunk_read":
                out.append((_canonical(action.arguments), reply))
    return out


def _canonical(arguments: object) -> str:
    if isinstance(arguments, str):  # the native protocol keeps the raw JSON text
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return arguments
    return json.dumps(arguments, sort_keys=True)


def outcomes(results: Path) -> dict[str, Counter]:
    if not any(results.glob("*/episodes/*.parquet")):
        raise SystemExit(f"no episodes under {results}: expected <run id>/episodes/*.parquet files")
    rows = duckdb.sql(f"SELECT run_id, question_id, method, trajectory FROM read_parquet('{results}/*/episodes/*.parquet', union_by_name=true)").fetchall()
    per_method: dict[str, Counter] = {}
    for run_id, question_id, method, text in rows:
        try:
            trajectory = json.loads(text or "")
        except ValueError as exc:
            raise SystemExit(f"{results}/{run_id}: question {question_id}: its trajectory is not JSON ({exc})") from None
        counts = per_method.setdefault(method, Counter())
        counts["episodes"] += 1
        seen: set[str] = set()
        for arguments, reply in chunk_read_calls(trajectory):
            counts["calls"] += 1
            counts["repeat an earlier call"] += arguments in seen
            counts["unknown ids in reply"] += UNKNOWN in reply
            counts["already-read note in reply"] += ALREADY_READ in reply
            seen.add(arguments)
    return per_method


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="a results folder: <run id>/episodes/*.parquet under it")
    args = parser.parse_args()
    keys = ("episodes", "calls", "repeat an earlier call", "unknown ids in reply", "already-read note in reply")
    per_method = outcomes(args.results)
    print("| method | " + " | ".join(keys) + " |")
    print("| --- |" + " ---: |" * len(keys))
    for method, counts in sorted(per_method.items()):
        if counts["calls"]:
            print(f"| {method} | " + " | ".join(str(counts[k]) for k in keys) + " |")


if __name__ == "__main__":
    main()
