"""The retrieval tools as a service (no Ray): an MCP server (stdio or streamable HTTP), a JSON API
with an OpenAPI schema, and `RemoteTools`, a client with ToolContext's `call` so the agent loop and
the evaluation use a served index as a local one.

    sessions.py      per-session read trackers, bounded (cachetools' TTLCache: LRU, idle expiry, bytes)
    tool_service.py  the tools of one open index as served: thread pool, sessions, ceilings, result JSON
    guard.py         origin rule, bearer token, fair request slots, JSON bodies (ASGI middleware)
    connections.py   a header deadline and bounded waiting connections (uvicorn's h11 protocol)
    http_api.py      the JSON API routes; openapi.py its OpenAPI document
    mcp_server.py    the MCP server (official SDK, low-level API)
    app.py           assembling and running it (pipelines.serve is the CLI)
    client.py        RemoteTools and open_tools (local path or served URL)
"""
