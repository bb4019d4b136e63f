"""Action protocols: how a model's reply becomes actions, and how results go back into the conversation.

`native`: OpenAI tool calls (several run in order; text without calls is the answer). `json`: one object
per step, {"tool", "arguments"} or {"answer"}, grammar-enforced from a oneOf over the tools' schemas
(small local models act reliably only this way). Parsing never raises: an unusable reply is an
`InvalidAction` shown to the model, except a JSON answer cut off at the reply limit, which is that
answer as far as it went (at temperature 0 a looping model writes the same cut reply every time).
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from typing import Any, Union

import jsonschema

from arag.llm.types import Completion, Message


def closed_object(**properties: Any) -> dict[str, Any]:
    """A JSON schema object of exactly these (required) properties."""
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


ANSWER_SCHEMA = closed_object(answer={"type": "string"})
# What a parsed reply must look like before it is acted on. Tool names and arguments are checked by
# the loop and the tools themselves, which give the model precise messages.
ENVELOPE_SCHEMA: dict[str, Any] = {"oneOf": [closed_object(tool={"type": "string"}, arguments={"type": "object"}), ANSWER_SCHEMA]}
_ENVELOPE = jsonschema.Draft202012Validator(ENVELOPE_SCHEMA)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)
# The opening of an answer object, up to the first character of the answer string.
_ANSWER_OPENING = re.compile(r'^(?:```(?:json)?)?\s*\{\s*"answer"\s*:\s*"', re.S)
# Finish reasons of a reply that stopped at the reply-length limit (OpenAI, vLLM, llama.cpp: "length").
CUT_OFF = "length"


@dataclass
class ToolAction:
    name: str
    arguments: Any  # a dict (JSON protocol) or the raw JSON text (native protocol)
    call_id: str = ""


@dataclass
class AnswerAction:
    text: str
    cut_off: bool = False  # the reply stopped at the length limit inside the answer: kept as far as it went


@dataclass
class InvalidAction:
    reason: str


Action = Union[ToolAction, AnswerAction, InvalidAction]


def json_action_schema(tool_schemas: list[dict[str, Any]], allow_answer: bool = True) -> dict[str, Any]:
    """oneOf: a branch per tool ({"tool": const name, "arguments": its parameters}) and, if allowed, the answer."""
    branches = [closed_object(tool={"const": s["function"]["name"]}, arguments=s["function"]["parameters"]) for s in tool_schemas]
    if allow_answer or not branches:
        branches.append(ANSWER_SCHEMA)
    return {"oneOf": branches} if len(branches) > 1 else branches[0]


def shown_ids_only(schema: dict[str, Any], param: str, shown: list[str]) -> dict[str, Any]:
    """A copy of a tool schema whose array parameter `param` may only list ids in `shown` (none shown: only
    an empty list). Why: a small model writing ids under a grammar invents plausible ones ("turn1search65"
    in a forced summarize, "<document>#<n>"-shaped ids on an index of "<part>:<window>" ids)."""
    restricted = copy.deepcopy(schema)
    ids = restricted["function"]["parameters"]["properties"][param]
    ids["items"] = {"type": "string", "enum": list(shown)} if shown else {"type": "string", "maxLength": 0}
    ids["maxItems"] = min(len(shown), ids.get("maxItems", len(shown)))
    return restricted


def _placeholder(name: str, prop: dict[str, Any]) -> str:
    kind = prop.get("type")
    if kind == "array":
        return f'["<{name.rstrip("s")}>", ...]'
    if kind in ("integer", "number"):
        return str(prop.get("default", f"<{kind}>"))
    return f'"<{name}>"'


def describe_actions(tool_schemas: list[dict[str, Any]]) -> str:
    """Plain-text description of the JSON actions, put into the system prompt for the JSON protocol."""
    if not tool_schemas:
        return 'Reply with exactly one JSON object and nothing else: {"answer": "<answer>"}'
    lines = ["Reply with exactly one JSON object and nothing else. Either call one tool:"]
    for s in tool_schemas:
        fn = s["function"]
        params = fn["parameters"]
        props = params.get("properties", {})
        args = ", ".join(f'"{k}": {_placeholder(k, v)}' for k, v in props.items())
        optional = [k for k in props if k not in params.get("required", [])]
        note = f" ({', '.join(optional)} optional)" if optional else ""
        lines += [f'  {{"tool": "{fn["name"]}", "arguments": {{{args}}}}}{note}', f"    {fn['description']}"]
    lines.append('or give your final answer: {"answer": "<answer>"}')
    return "\n".join(lines)


class ActionProtocol:
    name = "?"

    def request(self, tool_schemas: list[dict[str, Any]], allow_answer: bool = True) -> dict[str, Any]:
        """Keyword arguments of `LLMBackend.acomplete` for a step offering these tools ([] = answer only)."""
        raise NotImplementedError

    def parse(self, completion: Completion) -> list[Action]:
        raise NotImplementedError

    def assistant_message(self, completion: Completion) -> Message:
        raise NotImplementedError

    def observation(self, action: ToolAction, text: str) -> Message:
        raise NotImplementedError

    def feedback(self, text: str) -> Message:
        """A note from the harness (invalid reply, guard rail): a user turn in both protocols."""
        return Message("user", text)


class NativeProtocol(ActionProtocol):
    name = "native"

    def request(self, tool_schemas, allow_answer=True):
        return {"tools": tool_schemas or None}

    def parse(self, completion: Completion) -> list[Action]:
        if completion.tool_calls:
            return [ToolAction(c.name, c.arguments, c.id) for c in completion.tool_calls]
        text = (completion.text or "").strip()
        return [AnswerAction(text)] if text else [InvalidAction("the reply was empty: call a tool or write the answer")]

    def assistant_message(self, completion: Completion) -> Message:
        return Message("assistant", completion.text or "", tool_calls=list(completion.tool_calls))

    def observation(self, action: ToolAction, text: str) -> Message:
        return Message("tool", text, tool_call_id=action.call_id, name=action.name)


class JsonProtocol(ActionProtocol):
    name = "json"

    def request(self, tool_schemas, allow_answer=True):
        return {"response_schema": json_action_schema(tool_schemas, allow_answer)}

    def parse(self, completion: Completion) -> list[Action]:
        text = (completion.text or "").strip()
        if fenced := _FENCE.match(text):
            text = fenced.group(1)
        try:
            value = json.loads(text)
        except (ValueError, RecursionError) as exc:
            if completion.finish_reason == CUT_OFF:
                if partial := cut_off_answer(text):
                    return [AnswerAction(partial, cut_off=True)]
                return [InvalidAction("the reply was cut off at the reply-length limit before its JSON ended: write a shorter reply")]
            return [InvalidAction(f"the reply is not valid JSON ({str(exc)[:120]})")]
        if not _ENVELOPE.is_valid(value):  # both branches are objects: a list or a number fails too
            return [InvalidAction('the reply must be one JSON object: {"tool": <name>, "arguments": {...}} or {"answer": "..."}')]
        if "answer" in value:
            return [AnswerAction(value["answer"].strip())]
        return [ToolAction(value["tool"], value["arguments"])]

    def assistant_message(self, completion: Completion) -> Message:
        return Message("assistant", completion.text or "")

    def observation(self, action: ToolAction, text: str) -> Message:
        return Message("user", f"Result of {action.name}:\n{text}")


def cut_off_answer(text: str) -> str | None:
    """The answer of a JSON answer object cut off inside (or just after) its answer string, e.g.
    '{"answer": "Tregeagle was doomed to emp' → 'Tregeagle was doomed to emp'; None when the text is
    not the opening of an answer object or the answer is empty."""
    opening = _ANSWER_OPENING.match(text)
    if not opening:
        return None
    body = text[opening.end() :]
    try:  # the answer string closed and the cut came after it ('{"answer": "x", ' or '{"answer": "x"')
        value, _ = json.JSONDecoder(strict=False).raw_decode('"' + body)
        return value.strip() or None
    except ValueError:
        pass
    # Cut inside the string: close it, first dropping an escape sequence the cut split (a lone
    # backslash, or up to five characters of a \\uXXXX escape).
    for drop in range(6):
        try:
            return json.loads('"' + body[: len(body) - drop] + '"', strict=False).strip() or None
        except ValueError:
            continue
    return None


PROTOCOLS: dict[str, type[ActionProtocol]] = {"native": NativeProtocol, "json": JsonProtocol}


def get_protocol(name: str) -> ActionProtocol:
    try:
        return PROTOCOLS[name]()
    except KeyError:
        raise ValueError(f"unknown action protocol {name!r}; known: {', '.join(PROTOCOLS)}") from None
