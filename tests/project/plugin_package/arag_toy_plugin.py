"""A plugin package: one tool, one backend and one method kind, each named by an entry point."""

from __future__ import annotations

from dataclasses import dataclass

from arag.llm.scripted import ScriptedBackend
from arag.methods.base import Method
from arag.tools.base import SNIPPET, Hit, ToolResult, ToolSpec


def _lookup(ctx, args, options):
    return ToolResult(tool="toy_plugin_lookup", text=f"[0#0] {args['title']}", results=[Hit("0#0", snippets=[args["title"]])])


LOOKUP = ToolSpec(
    name="toy_plugin_lookup",
    description="Look a title up.",
    parameters={"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"], "additionalProperties": False},
    fn=_lookup,
    evidence=SNIPPET,
)


class ToyPluginBackend(ScriptedBackend):
    kind = "toy_plugin_backend"

    @classmethod
    def default_concurrency(cls, cfg):
        return 7


@dataclass
class ToyPluginMethod(Method):
    depth: int = 1
