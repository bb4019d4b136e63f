"""Hosting the tools of one open index (no Ray): what every tool spec in arag.tools runs inside.

    context.py      `ToolContext`: one open index shared by every tool; `call` runs a tool by name
    batching.py     micro-batched query encoding: concurrent callers share one encoder call
    worker_pool.py  `ToolWorkerPool`: the same tools served by N worker processes
"""
