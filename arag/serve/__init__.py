"""The retrieval tools as a service (no Ray): an MCP server (stdio or streamable HTTP), a JSON API with
an OpenAPI schema, and `RemoteTools`, a client with ToolContext's `call`, so the agent loop and the
evaluation use a served index as a local one (docs/tools.md, "Tool server")."""
