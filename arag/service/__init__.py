"""The retrieval tools as a service (no Ray): an MCP server (stdio or streamable HTTP), a JSON API
with an OpenAPI schema, and `RemoteTools`, a client with ToolContext's `call` so the agent loop and
the evaluation use a served index as a local one.

    sessions.py      per-session read trackers, bounded (LRU and idle expiry)
    tool_service.py  the tools of one open index as served: thread pool, sessions, result JSON
    guard.py         bearer token and request-size limit (ASGI middleware)
    http_api.py      the JSON API routes; openapi.py its OpenAPI document
    mcp_server.py    the MCP server (official SDK, low-level API)
    app.py           assembling and running it (pipelines.serve is the CLI)
    client.py        RemoteTools and open_tools (local path or served URL)
"""
