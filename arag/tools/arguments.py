"""A tool call's arguments, checked against the tool's JSON schema with jsonschema.

The schema is the model's (narrowed to the method's document-tool settings) plus the tool's `ceilings`;
code checks only what a schema cannot say (a blank string, invalid Unicode, a NUL). Not an object, an
unknown or a missing argument: refused at once; any other argument's first problem is raised when the
tool reads it, in the tool's own order. The messages are the model's to read.
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

from jsonschema import Draft202012Validator, ValidationError


class ToolArgumentError(ValueError):
    """Bad arguments to a tool; the message is shown to the agent as the tool's answer."""


# Arguments that are lists of strings: the noun of one item, and an example list for a model that
# sent a single string (None: that string, as a list).
STRING_LISTS = {"keywords": ("keyword", '"Lothair II", "Tuscany"'), "chunk_ids": ("chunk id", None), "queries": ("query", '"who directed Phoolwari"'), "patterns": ("pattern", '"Lothair II"')}
# Arguments (or their items) refused when blank.
NOT_BLANK = {*STRING_LISTS, "query", "ref_id"}
# Strings checked for lone surrogates and NUL characters.
TEXT = {*STRING_LISTS, "query", "ref_id", "notes", "keep_ref_ids"}
# Schema bounds the tools handle themselves: top_k above its maximum is capped (with a note), a
# line outside the document is refused with the document's range, reference ids are looked up.
OWN_BOUNDS = {("top_k", "maximum"), ("line", "minimum"), ("keep_ref_ids", "maxLength")}
REF_ID = 'a reference id from a search result, such as "turn1search1"'
LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # what UTF-8 cannot encode


class Arguments(dict):
    """A call's arguments; reading one that has a problem raises it."""

    def __init__(self, values: Mapping[str, Any], problems: dict[str, str]):
        super().__init__(values)
        self.problems = problems

    def __getitem__(self, key: str) -> Any:
        self._check(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self._check(key)
        return super().get(key, default)

    def _check(self, key: str) -> None:
        if key in self.problems:
            raise ToolArgumentError(self.problems[key])


def check_arguments(name: str, validator: Draft202012Validator, arguments: Any) -> Arguments:
    """`arguments` (a mapping, or its JSON text) of tool `name`, checked by `validator` (of its parameters)."""
    if isinstance(arguments, (str, bytes)):
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError) as exc:
            raise ToolArgumentError(f"arguments are not valid JSON ({str(exc)[:200]})") from None
    if isinstance(arguments, Mapping):
        arguments = dict(arguments)
    schema = validator.schema
    errors = list(validator.iter_errors(arguments))
    at_root = {e.validator for e in errors if not e.path}
    allowed = schema.get("properties", {})
    if "type" in at_root:
        raise ToolArgumentError(f"arguments must be a JSON object, got {type_name(arguments)}")
    if "additionalProperties" in at_root:
        unknown = [str(k) for k in arguments if k not in allowed]
        raise ToolArgumentError(f"unexpected argument(s) {', '.join(repr(u[:50]) for u in unknown[:5])}; {name} takes {', '.join(sorted(allowed))}")
    if "required" in at_root:
        missing = [k for k in schema["required"] if k not in arguments]
        raise ToolArgumentError(f"missing required argument(s): {', '.join(missing)}")
    found = [problem(e, arguments, allowed) for e in errors if e.path and (e.path[0], e.validator) not in OWN_BOUNDS]
    found += text_problems(arguments)
    problems: dict[str, str] = {}
    for path, _, message in sorted(found, key=lambda p: (p[0], p[1])):
        problems.setdefault(path[0], message)
    return Arguments(arguments, problems)


def problem(error: ValidationError, arguments: dict[str, Any], properties: dict[str, Any]) -> tuple[tuple, int, str]:
    """(where, rank, message): where sorts by argument then item, rank orders the checks of one place."""
    key, path, kind, value = error.path[0], tuple(error.path), error.validator, error.instance
    if key in STRING_LISTS:
        noun, example = STRING_LISTS[key]
        if len(path) > 1:
            item = f"{noun} {path[1] + 1}"
            if kind == "type":
                return path, 0, f"{item} must be a string, got {type_name(value)}"
            return path, 2, f"{item} is {len(value)} characters long; {key} are at most {error.validator_value}"
        if kind == "type" and isinstance(value, str):
            return path, 0, f"{key} must be a list of strings, e.g. [{example or json.dumps(value[:40])}], not a single string"
        if kind == "type":
            return path, 0, f"{key} must be a list of strings, got {type_name(value)}"
        if kind == "minItems":
            return path, 1, f"{key} is empty; give at least one {noun}"
        return path, 2, f"too many {key} ({len(value)}); give at most {error.validator_value}"
    if key == "keep_ref_ids":
        if kind == "type":  # the list, or one of its items
            return (key,), 0, f"keep_ref_ids must be a list of reference ids (strings), got {type_name(arguments[key])}"
        return path, 1, f"too many keep_ref_ids ({len(value)}); at most {error.validator_value}"
    if key in ("top_k", "line"):
        bounds = " between 1 and 20" if key == "top_k" else ""
        if kind == "minimum":
            shown = int(value) if isinstance(value, int) or (isinstance(value, float) and value.is_integer()) else value
            return path, 1, f"top_k must be at least 1, got {shown!r}"
        if isinstance(value, float):
            return path, 0, f"{key} must be a whole number{bounds}, got {value!r}"
        return path, 0, f"{key} must be {'an integer' if key == 'top_k' else 'a whole number'}{bounds}, got {type_name(value)}"
    if key == "mode":
        shown = value if isinstance(value, str) else type(value).__name__
        return path, 0, f"mode must be one of {', '.join(repr(m) for m in properties[key]['enum'])}, got {str(shown)[:40]!r}"
    if key == "ref_id":
        if kind == "type":
            return path, 0, f'ref_id must be a string such as "turn1search1", got {type_name(value)}'
        return path, 2, f"ref_id must be {REF_ID}"
    if kind == "type" and key in ("query", "notes"):
        return path, 0, f"{key} must be a string, got {type_name(value)}"
    if kind == "maxLength" and key == "query":
        return path, 2, f"query is {len(value)} characters long; queries are at most {error.validator_value}"
    if kind == "maxLength" and key == "notes":
        return path, 2, f"notes are {len(value)} characters long; keep them under {error.validator_value}"
    return path, 0, f"{key}: {error.message}"


def text_problems(arguments: dict[str, Any]) -> list[tuple[tuple, int, str]]:
    """Blank strings, and text that is not valid Unicode or holds a NUL, where the schema has strings."""
    found = []
    for key in TEXT & arguments.keys():
        value = arguments[key]
        items = [((key, i), item) for i, item in enumerate(value)] if isinstance(value, list) else [((key,), value)]
        for path, text in items:
            if not isinstance(text, str):
                continue
            what = key if len(path) == 1 else f"{STRING_LISTS[key][0]} {path[1] + 1}" if key in STRING_LISTS else f"{key} item"
            if key in NOT_BLANK and not text.strip():
                blank = f"ref_id must be {REF_ID}" if key == "ref_id" else f"{what} is empty or blank" + (f"; every {STRING_LISTS[key][0]} needs visible characters" if key in STRING_LISTS else "")
                found.append((path, 1, blank))
            elif LONE_SURROGATE.search(text):
                found.append((path, 3, f"{what} is not valid Unicode text (it contains a lone surrogate)"))
            elif "\x00" in text:
                found.append((path, 3, f"{what} contains a NUL character"))
    return found


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}.get(type(value), type(value).__name__)
