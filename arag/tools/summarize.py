"""summarize (AgenticRAG): the agent's notes, and which referenced results to keep in its context.

The tool checks the reference ids and records the notes; the agent loop then compacts the
conversation (arag.agent.context; docs/agents.md, "AgenticRAG").
"""

from __future__ import annotations

from typing import Any

from arag.tools.base import ToolHost, MAX_CHUNK_ID_CHARS, ToolOptions, ToolResult, ToolSpec, UnknownIdsError, NOT_EVIDENCE
from arag.tools.documents import session_of


NAME = "summarize"
MAX_NOTES_CHARS = 16000
MAX_KEEP = 100

DESCRIPTION = (
    "Free room in your context: write notes of everything you found that matters for the question "
    "(facts, names, line numbers, which documents said what), and list the reference ids whose "
    "results you still need. Results of every other reference id are removed from the conversation; "
    "your notes stay."
)

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "notes": {"type": "string", "description": "What you found so far that matters for the question."},
        "keep_ref_ids": {"type": "array", "items": {"type": "string", "maxLength": MAX_CHUNK_ID_CHARS}, "maxItems": MAX_KEEP, "description": "Reference ids whose results stay in the conversation."},
    },
    "required": ["notes", "keep_ref_ids"],
    "additionalProperties": False,
}


def run(ctx: ToolHost, args: dict[str, Any], options: ToolOptions) -> ToolResult:
    session = session_of(options)
    notes = args["notes"]
    keep = args["keep_ref_ids"]
    unknown = [k for k in keep if k not in session.refs]
    if unknown:
        raise UnknownIdsError(f"unknown reference id(s) {', '.join(repr(u[:40]) for u in unknown[:5])}; known: {', '.join(session.refs) or 'none'}")
    kept = list(dict.fromkeys(keep))
    text = f"Notes kept:\n{notes.strip() or '(none)'}\nResults kept: {', '.join(kept) or 'none'}."
    return ToolResult(tool=NAME, text=text, details={"ref_ids": kept, "keep_ref_ids": kept, "notes": notes})


SPEC = ToolSpec(name=NAME, description=DESCRIPTION, parameters=PARAMETERS, fn=run, evidence=NOT_EVIDENCE, compacts_context=True,
                ceilings={"notes": {"maxLength": MAX_NOTES_CHARS}})  # the agent's own notes
