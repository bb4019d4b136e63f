"""What the agent's chunk_read calls got back, per method, from stored episodes' trajectories.

The report counts chunk_read calls; this says what became of them: how many repeat an earlier call of
the same episode, how many were answered "Unknown chunk id(s)" (ids not in the index, e.g. made up by
the model) and how many carry an "Already read in this episode" note. It reads the JSON-protocol
trajectories the evaluation stores, and the native protocol's tool calls. `--questions FILE --limit N`
counts only the episodes of the file's first N questions, so runs of different lengths compare on
the same questions.

    python -m benchmarks.cpu_evaluations.chunk_read_outcomes benchmarks/cpu_evaluations/results/2wiki \
        [--questions ../shared/data/2wikimultihopqa/questions.jsonl --limit 20]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import duckdb

from arag.agent.protocols import JsonProtocol, ToolAction
from arag.agent.episode import unpack_messages
from arag.evaluation.results import RunStore
from arag.llm.types import Completion

UNKNOWN = "Unknown chunk id"  # arag.tools.render.chunk_read_text's note for ids not in the index
ALREADY_READ = "Already read in this episode"


def chunk_read_calls(trajectory: dict) -> list[tuple[str, str]]:
    """(arguments as canonical JSON, the tool's reply) for every chunk_read call of one episode; the
    messages are stored in OpenAI form (`Message.to_openai`)."""
    messages, out = unpack_messages(trajectory), []
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


def outcomes(results: Path, question_ids: set[str] | None = None) -> dict[str, Counter]:
    """Counts per method; `question_ids`: only those questions' episodes (None: all)."""
    runs = sorted(d for d in results.iterdir() if d.is_dir()) if results.is_dir() else []
    files = [str(f) for d in runs for f in RunStore.at(d).part_files()]
    if not files:
        raise SystemExit(f"no episodes under {results}: expected a folder of runs with answered episodes")
    rows = duckdb.sql(f"SELECT run_id, question_id, method, trajectory FROM read_parquet({files!r}, union_by_name=true)").fetchall()
    per_method: dict[str, Counter] = {}
    for run_id, question_id, method, text in rows:
        if question_ids is not None and question_id not in question_ids:
            continue
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
    parser.add_argument("results", type=Path, help="a results folder: one run folder per run under it")
    parser.add_argument("--questions", type=Path, help="a questions file (JSONL); with --limit, count only its first questions")
    parser.add_argument("--limit", type=int, help="how many of the file's first questions to count (default: all of the file)")
    args = parser.parse_args()
    if args.limit is not None and args.questions is None:
        parser.error("--limit needs --questions (the file whose first questions to count)")
    question_ids = None
    if args.questions is not None:
        from arag.evaluation.questions import QuestionFileError, load_questions

        try:
            selected = load_questions(str(args.questions)).questions
        except (QuestionFileError, OSError) as exc:
            raise SystemExit(f"--questions: {exc}") from None
        question_ids = {q.id for q in selected[: args.limit]}
    keys = ("episodes", "calls", "repeat an earlier call", "unknown ids in reply", "already-read note in reply")
    per_method = outcomes(args.results, question_ids)
    print("| method | " + " | ".join(keys) + " | unknown ids, share of calls |")
    print("| --- |" + " ---: |" * (len(keys) + 1))
    for method, counts in sorted(per_method.items()):
        if counts["calls"]:
            share = 100 * counts["unknown ids in reply"] / counts["calls"]
            print(f"| {method} | " + " | ".join(str(counts[k]) for k in keys) + f" | {share:.1f}% |")


if __name__ == "__main__":
    main()
