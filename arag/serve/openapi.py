"""The JSON API's OpenAPI 3.1 document: each tool's request body is exactly its parameter schema."""

from __future__ import annotations

from typing import Any

from arag.tools import ToolSpec
from arag.tools.failures import FAILURE_KINDS

HIT = {
    "type": "object",
    "required": ["chunk_id"],
    "properties": {
        "chunk_id": {"type": "string"},
        "score": {"type": "number", "description": "keyword score, best sentence cosine; absent for chunk_read"},
        "snippets": {"type": "array", "items": {"type": "string"}, "description": "the chunk text the agent was shown"},
        "title": {"type": "string"},
        "doc_id": {"type": "string"},
        "prev_id": {"type": "string", "description": "chunk_read: previous chunk of the document"},
        "next_id": {"type": "string", "description": "chunk_read: next chunk of the document"},
        "already_read": {"type": "boolean", "description": "chunk_read: read before in this session; text withheld"},
    },
}
TOOL_RESULT = {
    "type": "object",
    "required": ["tool", "text", "results", "retrieved_tokens", "error", "details"],
    "properties": {
        "tool": {"type": "string"},
        "text": {"type": "string", "description": "exactly what an agent sees"},
        "results": {"type": "array", "items": {"$ref": "#/components/schemas/Hit"}},
        "retrieved_tokens": {"type": "integer", "description": "o200k_base tokens of chunk content put into the context (the official tools' count)"},
        "error": {"type": ["string", "null"], "description": "null on success"},
        "details": {
            "type": "object",
            "description": "tool-specific facts; `failure`, when present, is why an agent cannot use the result",
            "properties": {"failure": {"type": "string", "description": "the failure kind: " + ", ".join(FAILURE_KINDS)}},
        },
    },
}
ERROR = {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}, "tools": {"type": "array", "items": {"type": "string"}}}}


def _json(schema_ref: str, description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema_ref}"}}}}


COMMON_ERRORS = {
    "401": _json("Error", "missing or wrong bearer token (when the server has one)"),
    "413": _json("Error", "request body larger than serve.max_request_bytes"),
}
SESSION_PARAMETERS = [
    {"name": "X-Session-Id", "in": "header", "required": False, "schema": {"type": "string", "maxLength": 200}, "description": "the episode: chunk_read notes chunks already read in this session"},
    {"name": "session", "in": "query", "required": False, "schema": {"type": "string", "maxLength": 200}, "description": "the same as X-Session-Id"},
    {"name": "X-Document-Settings", "in": "header", "required": False, "schema": {"type": "string"}, "description": "search/find/open/summarize: the document tools' settings as a JSON object (arag.tools.DocumentToolSettings); the session keeps them"},
    {"name": "full_text", "in": "query", "required": False, "schema": {"type": "boolean"}, "description": "search tools return whole chunks instead of snippets (default: the server's serve.full_text)"},
    {"name": "snippets_per_chunk", "in": "query", "required": False, "schema": {"type": "string"}, "description": "keyword_search: matching sentences shown per chunk, a whole number or all (default: 5, the official tool's)"},
    {"name": "result_titles", "in": "query", "required": False, "schema": {"type": "boolean"}, "description": "result headers name each chunk's document titles (default: false, as the official tools)"},
]


def openapi_document(tools: dict[str, ToolSpec], *, token: bool, version: str) -> dict[str, Any]:
    paths: dict[str, Any] = {
        "/tools": {"get": {"summary": "The tools' function schemas (OpenAI style)", "operationId": "list_tools", "responses": {"200": {"description": "{'tools': [schema, ...]}", "content": {"application/json": {"schema": {"type": "object"}}}}, **COMMON_ERRORS}}},
        "/index": {"get": {"summary": "The served index: fingerprint, sizes, tools, its facts (index_facts: embedder, query instruction, precision, chunking, sentence splitter, vector search), the search settings that differ from the index's own (search_overrides: part of a run's id), and the connections the server takes at once (max_connections)", "operationId": "index_info", "responses": {"200": {"description": "index facts", "content": {"application/json": {"schema": {"type": "object"}}}}, **COMMON_ERRORS}}},
        "/chunks/titles": {
            "post": {
                "summary": "Titles of chunks by id (at most 50 ids)",
                "operationId": "chunk_titles",
                "requestBody": {"required": True, "content": {"application/json": {"schema": {"type": "object", "required": ["chunk_ids"], "properties": {"chunk_ids": {"type": "array", "items": {"type": "string"}}}}}}},
                "responses": {"200": {"description": "{'titles': {chunk_id: title}}", "content": {"application/json": {"schema": {"type": "object"}}}}, "400": _json("Error", "bad chunk ids"), **COMMON_ERRORS},
            }
        },
    }
    for name, spec in tools.items():
        paths[f"/tools/{name}"] = {
            "post": {
                "summary": spec.description,
                "operationId": name,
                "parameters": SESSION_PARAMETERS,
                "requestBody": {"required": True, "content": {"application/json": {"schema": spec.parameters}}},
                "responses": {
                    "200": _json("ToolResult", "the tool's answer"),
                    "400": _json("ToolResult", "bad arguments: `error` and `text` say what was wrong"),
                    "404": _json("Error", "no such tool; `tools` lists the served ones"),
                    "500": _json("ToolResult", "the tool failed on its own (details in the server log)"),
                    **COMMON_ERRORS,
                },
            }
        }
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": "arag retrieval tools", "version": version, "description": "A-RAG's retrieval tools over one index. MCP (streamable HTTP) is served at /mcp."},
        "paths": paths,
        "components": {"schemas": {"Hit": HIT, "ToolResult": TOOL_RESULT, "Error": ERROR}},
    }
    if token:
        doc["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        doc["security"] = [{"bearer": []}]
    return doc
