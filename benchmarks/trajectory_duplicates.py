"""How much of the stored trajectories' text repeats a tool result, and how much packing saves.

    python -m benchmarks.trajectory_duplicates benchmarks/cpu_evaluations/results/2wiki [more results trees]

For each tree: the episodes' trajectory characters as stored, the characters of tool results that
also appear in a message (the second copy a trajectory held before `pack_messages`), and the
characters once every trajectory is packed (already packed ones are unpacked first, so both sides
start from the same conversation).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


import duckdb

from arag.agent.episode import pack_messages, unpack_messages
from arag.evaluation.results import RunStore, find_run_dirs


def measure(tree: str) -> dict:
    files = [str(f) for run in find_run_dirs(tree) for f in RunStore.at(run).part_files()]
    rows = duckdb.sql(f"SELECT trajectory FROM read_parquet({files!r}, union_by_name=true)").fetchall() if files else []
    unpacked_chars = packed_chars = second_copy = 0
    for (text,) in rows:
        t = json.loads(text)
        full = {**t, "messages": unpack_messages(t)}
        unpacked_chars += len(json.dumps(full, ensure_ascii=False))
        packed_chars += len(json.dumps({**full, "messages": pack_messages(full["messages"], full.get("tool_calls") or [])}, ensure_ascii=False))
        shown = [m.get("content") for m in full["messages"] if isinstance(m.get("content"), str)]
        second_copy += sum(len(c.get("text") or "") for c in full.get("tool_calls") or [] if c.get("text") and any(c["text"] in s for s in shown))
    return {"tree": tree, "episodes": len(rows), "chars_unpacked": unpacked_chars, "chars_packed": packed_chars,
            "second_copy_share": round(second_copy / unpacked_chars, 3) if unpacked_chars else None,
            "packed_over_unpacked": round(packed_chars / unpacked_chars, 3) if unpacked_chars else None}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("trees", nargs="+")
    for tree in p.parse_args().trees:
        print(json.dumps(measure(tree)))


if __name__ == "__main__":
    main()
