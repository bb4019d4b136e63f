"""Command line: run one tool call against an index and print what the agent would see (docs/tools.md).

    python -m arag.tools <index_dir> <tool_name> '<json arguments>' [--json] [--full-text] [--schema]

Exit status: 0 on success, 1 when the tool answered with an error, 2 when the index cannot be opened.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from arag.index.store import IncompleteIndexError, IndexNotFoundError, open_index
from arag.tools import TOOLS, ToolContext


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m arag.tools", description="Run one A-RAG retrieval tool call against an index.")
    parser.add_argument("index_dir")
    parser.add_argument("tool", help=f"one of: {', '.join(TOOLS)}")
    parser.add_argument("arguments", nargs="?", default="{}", help="the tool's arguments as a JSON object")
    parser.add_argument("--json", action="store_true", help="print structured results as one JSON object")
    parser.add_argument("--full-text", action="store_true", help="search tools return whole chunks instead of snippets")
    parser.add_argument("--schema", action="store_true", help="print the tool's function schema and exit")
    parser.add_argument("--cache-dir", default=None, help="where the tools cache lives (default: <index>/tools_cache)")
    parser.add_argument("--no-accelerate", action="store_true", help="scan all chunks for keywords (no word postings)")
    parser.add_argument("--nprobe", type=int, default=None, help="ANN index: IVF lists to probe (default: the index's own, chosen for index.ann_recall)")
    parser.add_argument("--rerank", type=int, default=None, help="ANN index: candidates re-ranked exactly per result (default: the index's own, chosen for index.ann_recall)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)

    if args.tool not in TOOLS:
        print(f"unknown tool {args.tool!r}; available: {', '.join(TOOLS)}", file=sys.stderr)
        return 2
    try:
        if args.schema:  # as a model sees it over this index (its chunk ids in the texts)
            print(json.dumps(TOOLS[args.tool].for_index(open_index(args.index_dir).chunk_ids).schema(), indent=2, ensure_ascii=False))
            return 0
        ctx = ToolContext(args.index_dir, cache_dir=args.cache_dir, accelerate=not args.no_accelerate, nprobe=args.nprobe, rerank=args.rerank)
    except (IndexNotFoundError, IncompleteIndexError) as exc:
        print(f"cannot open index: {exc}", file=sys.stderr)
        return 2
    with ctx:
        result = ctx.call(args.tool, args.arguments, full_text=args.full_text)
    print(json.dumps(result.to_json(), ensure_ascii=False) if args.json else result.text)
    return 1 if result.error else 0


if __name__ == "__main__":
    sys.exit(main())
