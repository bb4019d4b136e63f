"""An OpenAI-compatible proxy that reads tool calls written as text into `tool_calls`.

llama-cpp-python's server renders `tools` into a Qwen2.5 model's chat template, and the model calls
a tool by writing `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (the Hermes format), but
the server returns that as the reply's `content`, with no `tool_calls`. A client that acts only on
`tool_calls` (the authors' A-RAG loop) would take the text for a final answer. This proxy forwards
every request unchanged and, for a chat completion that offered tools, moves such calls out of the
content into `tool_calls`, as vLLM's hermes tool parser does. A reply that is nothing but one JSON
object naming an offered tool ({"name": ..., "arguments": ...}), which small Qwen models also write,
counts as one call.

    python -m tests.support.tool_call_proxy --upstream http://127.0.0.1:8080/v1 --port 8090
"""

from __future__ import annotations

import argparse
import json
import re
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)


def _call(obj: Any, names: set[str]) -> dict[str, Any] | None:
    if not isinstance(obj, dict) or obj.get("name") not in names:
        return None
    arguments = obj.get("arguments", obj.get("parameters", {}))
    return {"name": obj["name"], "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)}


def parse_tool_calls(content: str | None, names: set[str]) -> tuple[str | None, list[dict[str, Any]]]:
    """(content left, calls) of a reply's text; calls are {"name", "arguments" (a JSON string)}."""
    if not content:
        return content, []
    calls = []
    for body in _TAGGED.findall(content):
        try:
            call = _call(json.loads(body), names)
        except json.JSONDecodeError:
            call = None
        if call:
            calls.append(call)
    if calls:
        rest = _TAGGED.sub("", content).strip()
        return rest or None, calls
    text = content.strip()
    fenced = _FENCE.match(text)
    try:
        call = _call(json.loads(fenced.group(1) if fenced else text), names)
    except json.JSONDecodeError:
        call = None
    return (None, [call]) if call else (content, [])


def rewrite_reply(request: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
    """The reply with text tool calls moved into `tool_calls` (only when the request offered tools)."""
    names = {t.get("function", {}).get("name") for t in request.get("tools") or []}
    if not names:
        return reply
    counter = 0
    for choice in reply.get("choices", []):
        message = choice.get("message") or {}
        if message.get("tool_calls"):
            continue
        content, calls = parse_tool_calls(message.get("content"), names)
        if not calls:
            continue
        tool_calls = []
        for call in calls:
            counter += 1
            tool_calls.append({"id": f"call_{reply.get('id', 'x')}_{counter}", "type": "function", "function": call})
        message["content"] = content
        message["tool_calls"] = tool_calls
        choice["finish_reason"] = "tool_calls"
    return reply


def serve(upstream: str, host: str, port: int) -> ThreadingHTTPServer:
    upstream = upstream.rstrip("/")

    class Handler(BaseHTTPRequestHandler):
        def _forward(self, body: bytes | None) -> None:
            path = self.path[len("/v1"):] if self.path.startswith("/v1") else self.path
            req = urllib.request.Request(upstream + path, data=body, method=self.command, headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=3600) as resp:
                    status, data = resp.status, resp.read()
            except urllib.error.HTTPError as exc:
                status, data = exc.code, exc.read()
            if status == 200 and body and path.endswith("/chat/completions"):
                data = json.dumps(rewrite_reply(json.loads(body), json.loads(data))).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            self._forward(None)

        def do_POST(self) -> None:  # noqa: N802
            self._forward(self.rfile.read(int(self.headers.get("Content-Length", 0))))

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--upstream", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8090)
    a = p.parse_args()
    server = serve(a.upstream, a.host, a.port)
    print(f"tool-call proxy on http://{a.host}:{server.server_address[1]}/v1 -> {a.upstream}", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
