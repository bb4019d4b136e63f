"""The one agent policy of the stand-in model server (tests/support/model_server.py, all its
presets): from a chat request (the tools it offers and the conversation so far) it chooses the
next action, a tool call with its arguments or the answer, and renders it in the request's protocol.

The action. A request whose response schema has a `verdict` property is a judge's: {"verdict": ...}.
Otherwise the agent calls the offered tools one call per reply, each once, in the order offered (or
in `plan`'s order, only those of `plan` that are offered), at most `max_tool_calls` calls in all, then
answers (plain text, or {"answer": ...} under the JSON protocol). A JSON step whose schema has no
answer branch (a guard rail's tool-only step) calls the first tool again instead.

Tools are read in either protocol (native: `tools`; JSON: the tool branches of the `response_format`
schema). Arguments come from the question (the first user turn) and from earlier tool results:
keyword_search gets the question's names and titles and a relation word (`keywords_of`),
semantic_search and document search the question, chunk_read the first chunk ids ("chunk_id: ...")
shown so far, AgenticRAG's find/open/summarize the reference ids ("[turn1search1]") shown so far; any
other tool gets values built from its parameter schema. With reference ids shown, the answer ends
with the citation line AgenticRAG's prompt asks for.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

# A chunk's header in a search result ("Chunk ID: <id>, ..." or "Chunk ID: <id> (...") or a chunk_read one ("[chunk_id: <id> | ...").
_CHUNK_ID = re.compile(r"(?:Chunk ID|chunk_id): ([^\s,]+?)(?=,| \(| \||$)", re.M)
_REF_ID = re.compile(r"\[(turn\d+search\d+)\]")
_WORD = re.compile(r"[A-Za-z0-9][\w'-]*")


def response_schema(body: dict[str, Any]) -> dict[str, Any]:
    """The JSON schema a request's `response_format` asks for ({} for none)."""
    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema") if fmt.get("type") == "json_schema" else fmt.get("schema")
    return schema or {}


def _action_branches(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The branches of a JSON-protocol request's action schema ([] for the native protocol)."""
    schema = response_schema(body)
    return schema.get("oneOf") or ([schema] if schema else [])


def offered_tools(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(name, parameter schema) of each tool the request offers, in order, in either protocol."""
    if body.get("tools"):
        return [(t["function"]["name"], t["function"].get("parameters") or {}) for t in body["tools"]]
    out = []
    for branch in _action_branches(body):
        tool = ((branch.get("properties") or {}).get("tool") or {}).get("const")
        if tool:
            out.append((tool, branch["properties"].get("arguments") or {}))
    return out


def answer_allowed(body: dict[str, Any]) -> bool:
    """False where a JSON action schema has no answer branch (a guard rail's tool-only steps)."""
    branches = _action_branches(body)
    return not branches or any("answer" in (b.get("properties") or {}) for b in branches)


def text_of(content: Any) -> str:
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def conversation_state(messages: list[dict[str, Any]]) -> tuple[str, list[str], str]:
    """(question, tools called so far, every tool result's text) of a conversation."""
    question = next((text_of(m.get("content")) for m in messages if m.get("role") == "user"), "")
    called: list[str] = []
    results: list[str] = []
    for m in messages:
        role, content = m.get("role"), text_of(m.get("content"))
        if role == "assistant":
            called += [c["function"]["name"] for c in m.get("tool_calls") or []]
            if content.lstrip().startswith("{"):
                try:
                    action = json.loads(content)
                except ValueError:
                    action = None
                if isinstance(action, dict) and isinstance(action.get("tool"), str):
                    called.append(action["tool"])
        elif role == "tool" or (role == "user" and content.startswith("Result of ")):
            results.append(content)
    return question, called, "\n".join(results)


def keywords_of(question: str) -> list[str]:
    """The keywords an agent following keyword_search's description gives: the question's names and
    titles (runs of capitalised words after the first word, at most three words each, as one
    keyword) and its longest lower-case word of six or more letters (a relation such as 'director'),
    at most three in all. The embedded 1.5B model's 603 keywords in the committed 2Wiki runs are of
    these kinds (names, titles, 'director', 'birth'); 3 were under three characters."""
    words = _WORD.findall(question)
    names, run = [], []
    for word in words[1:] + ["."]:  # the first word is capitalised as the sentence's start
        if word[0].isupper():
            run.append(word)
        elif run:
            names.append(" ".join(run[:3]))
            run = []
    relation = sorted((w for w in words if w.islower() and len(w) >= 6), key=len, reverse=True)[:1]
    names = [n for n in names if len(n) >= 3]  # a two-letter title ("It") is scored on every chunk: the description says avoid
    return list(dict.fromkeys(names + relation))[:3] or words[:2] or ["the"]


def _value(name: str, prop: dict[str, Any], question: str) -> Any:
    """A value for one parameter from its schema alone (tools the policy does not know)."""
    if "enum" in prop:
        return prop["enum"][0]
    if "default" in prop:
        return prop["default"]
    kind = prop.get("type")
    if kind == "array":
        item = _value(name, prop.get("items") or {"type": "string"}, question)
        return [item] * max(1, int(prop.get("minItems", 1)))
    if kind == "integer":
        return int(prop.get("minimum", 0))
    if kind == "number":
        return float(prop.get("minimum", 0))
    if kind == "boolean":
        return False
    if kind == "object":
        return {}
    limit = int(prop.get("maxLength", 200))
    return question[:limit] or name


def tool_arguments(name: str, schema: dict[str, Any], question: str, results: str) -> dict[str, Any]:
    props = schema.get("properties") or {}
    chunk_ids = list(dict.fromkeys(_CHUNK_ID.findall(results)))
    refs = list(dict.fromkeys(_REF_ID.findall(results)))
    keywords = keywords_of(question)
    if name == "keyword_search":
        return {"keywords": keywords}
    if name in ("semantic_search", "naive_embedding_search"):
        return {"query": question[: int((props.get("query") or {}).get("maxLength", 500))]}
    if name == "chunk_read":
        allowed = ((props.get("chunk_ids") or {}).get("items") or {}).get("enum")
        ids = [i for i in chunk_ids if not allowed or i in allowed] or list(allowed or []) or ["0#0"]
        return {"chunk_ids": ids[:2]}
    if name == "search":
        return {"queries": [question[:300]]}
    if name == "find":
        return {"ref_id": refs[0] if refs else "turn1search1", "patterns": keywords[:1]}
    if name == "open":
        return {"ref_id": refs[0] if refs else "turn1search1", "line": 0}
    if name == "summarize":
        return {"notes": f"Searched for {', '.join(keywords)}.", "keep_ref_ids": refs[:2]}
    return {k: _value(k, props[k], question) for k in schema.get("required", []) if k in props}


@dataclass(frozen=True)
class AgentPolicy:
    """The options the servers differ in. plan: the tools to call, in this order (those offered);
    None calls every offered tool in the order offered. max_tool_calls: the most tool calls of an
    episode before it answers (None: no limit). answer: the answer's text (None: 'Simulated answer
    to: <question>'). verdict: a judge's verdict."""

    plan: tuple[str, ...] | None = None
    max_tool_calls: int | None = None
    answer: str | None = None
    verdict: str = "correct"

    def next_action(self, body: dict[str, Any]) -> dict[str, Any]:
        """{"tool": name, "arguments": {...}}, {"answer": text} or, for a judge, {"verdict": ...}."""
        if "verdict" in (response_schema(body).get("properties") or {}):
            return {"verdict": self.verdict}
        question, called, results = conversation_state(body.get("messages") or [])
        tools = offered_tools(body)
        if self.plan is not None:
            schemas = dict(tools)
            tools = [(name, schemas[name]) for name in self.plan if name in schemas]
        if self.max_tool_calls is None or len(called) < self.max_tool_calls:
            for name, schema in tools:
                if name not in called:
                    return {"tool": name, "arguments": tool_arguments(name, schema, question, results)}
        if tools and not answer_allowed(body):  # this step may not answer: search again
            name, schema = tools[0]
            return {"tool": name, "arguments": tool_arguments(name, schema, question, results)}
        refs = list(dict.fromkeys(_REF_ID.findall(results)))
        answer = self.answer if self.answer is not None else f"Simulated answer to: {question[:80]}"
        if refs:  # AgenticRAG's prompt asks for a citation line
            answer += "\nCitations: " + ", ".join(f"{r} (0.9)" for r in refs[:2])
        return {"answer": answer}


def render_reply(action: dict[str, Any], body: dict[str, Any], serial: int = 0) -> dict[str, Any]:
    """The chat.completion choice (message and finish_reason) of an action in the request's protocol."""
    native = bool(body.get("tools")) or not body.get("response_format")
    if "tool" in action and native:
        call = {"id": f"call_{serial}", "type": "function", "function": {"name": action["tool"], "arguments": json.dumps(action["arguments"])}}
        return {"message": {"role": "assistant", "content": None, "tool_calls": [call]}, "finish_reason": "tool_calls"}
    text = action["answer"] if native and "answer" in action else json.dumps(action)
    return {"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
