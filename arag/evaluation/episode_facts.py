"""Every fact counted in an episode's stored trajectory (calls per tool, tool errors by kind, repeated
calls, supporting documents seen and read), in one place for the runner, the report and the viewer,
so old and new runs show the same numbers (docs/evaluation.md, "Tool errors and repeated calls")."""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping

from arag.evaluation.evidence import found_titles, method_shows_full_text, seen_and_read
from arag.methods import evidence_of
from arag.tools.base import NOT_EVIDENCE, READ
from arag.tools.failures import ALREADY_READ, EMPTY, FAILURE_KINDS, REFUSED, UNKNOWN_IDS, UNKNOWN_TOOL
from arag.tools.registry import TOOLS

# Results and errors as runs that predate failure kinds recorded them: chunk_read's unknown ids, an
# unknown reference id (AgenticRAG's document tools), a tool the method does not offer.
UNKNOWN_CHUNK_IDS = re.compile(r"^Unknown chunk ids? \(not in this index\): (?P<ids>\[.*\])\s*$", re.MULTILINE)
UNKNOWN_REF_ID = re.compile(r"^unknown reference id", re.IGNORECASE)
UNKNOWN_TOOL_ERROR = re.compile(r"^unknown tool\b", re.IGNORECASE)


def unknown_ids_in(call: Mapping[str, Any]) -> int:
    """How many ids a stored tool call named that do not exist: as recorded, else from its result."""
    if call.get("unknown_id_count"):
        return int(call["unknown_id_count"])
    if (m := UNKNOWN_CHUNK_IDS.search(call.get("text") or "")) is None:
        return 0
    try:
        return len(json.loads(m["ids"]))
    except ValueError:
        return 1


def call_failure(call: Mapping[str, Any]) -> str | None:
    if failure := call.get("failure"):
        return failure if failure in FAILURE_KINDS else REFUSED
    if call.get("error"):
        error = str(call["error"])
        return UNKNOWN_IDS if UNKNOWN_REF_ID.match(error) else UNKNOWN_TOOL if UNKNOWN_TOOL_ERROR.match(error) else REFUSED
    if "failure" in call:  # recorded since kinds were: no kind is a usable result
        return None
    # A call stored before kinds were recorded: its kind from what it returned (docs/evaluation.md).
    named_unknown = unknown_ids_in(call) > 0
    if not call.get("chunk_ids"):
        if named_unknown:
            return UNKNOWN_IDS
        return EMPTY if evidence_of(str(call.get("name"))) != NOT_EVIDENCE else None
    if evidence_of(str(call.get("name"))) == READ and not call.get("retrieved_tokens"):
        return UNKNOWN_IDS if named_unknown else ALREADY_READ
    return None


# Repeated tool calls: identical to an earlier call of the episode in tool name and normalised arguments.
def normalised(value: Any) -> Any:
    if isinstance(value, str):
        return " ".join(value.split())
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {str(k): normalised(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalised(v) for v in value]
    return value


def with_defaults(name: str, arguments: Any) -> Any:
    spec = TOOLS.get(name)
    if spec is None or not isinstance(arguments, dict):
        return arguments
    defaults = {k: p["default"] for k, p in spec.parameters.get("properties", {}).items() if isinstance(p, dict) and "default" in p}
    return {**defaults, **arguments}


def repeated_flags(calls: Iterable[tuple[str, Any]]) -> list[bool]:
    """Per (tool name, arguments) of an episode's calls: whether an earlier call was identical."""
    keys = [json.dumps([str(n), normalised(with_defaults(str(n), a))], sort_keys=True, ensure_ascii=False, default=str) for n, a in calls]
    first = {key: i for i, key in reversed(list(enumerate(keys)))}  # each key's first call
    return [first[key] < i for i, key in enumerate(keys)]


@dataclass(frozen=True)
class EpisodeFacts:
    """What an episode did. Without a tool-call record (`recorded` False) a row keeps its call counts,
    and if it called a tool (`counted` False) its tool errors and repeated calls are None."""

    calls: dict[str, int]  # calls per tool name (the record's name: a made-up tool's too)
    failures: tuple[str | None, ...]  # per call, in order: its failure kind, None when usable
    repeated: tuple[bool, ...]  # per call, in order: identical to an earlier call
    evidence_supporting: int  # the question's supporting titles
    evidence_seen: int  # of them, covered by a chunk seen in any tool result
    evidence_read: int  # of them, covered by a chunk whose whole text was put into the context
    counted: bool = True
    recorded: bool = True

    @property
    def tool_calls(self) -> int:
        return sum(self.calls.values())

    @property
    def tool_errors(self) -> int | None:
        return sum(f is not None for f in self.failures) if self.counted else None

    @property
    def tool_error_kinds(self) -> dict[str, int] | None:
        if not self.counted:
            return None
        found = Counter(f for f in self.failures if f is not None)
        return {k: found[k] for k in FAILURE_KINDS if found[k]}

    @property
    def repeated_calls(self) -> int | None:
        return sum(self.repeated) if self.counted else None

    @property
    def evidence_recall_seen(self) -> float | None:
        return self.evidence_seen / self.evidence_supporting if self.evidence_supporting else None

    @property
    def evidence_recall_read(self) -> float | None:
        return self.evidence_read / self.evidence_supporting if self.evidence_supporting else None


def stored_calls(trajectory: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [c for c in trajectory.get("tool_calls") or [] if isinstance(c, Mapping)]


def trajectory_facts(trajectory: Mapping[str, Any], supporting_titles: Iterable[str], titles: Mapping[str, str | None] | None = None) -> EpisodeFacts:
    """The facts of one trajectory; `titles` ({chunk id: title field}) default to its `chunk_titles`."""
    calls = stored_calls(trajectory)
    supporting = list(supporting_titles or ())
    seen, read = seen_and_read(((str(c.get("name")), c.get("chunk_ids") or []) for c in calls), method_shows_full_text(trajectory.get("agent")))
    found_seen, found_read = found_titles(seen, read, titles if titles is not None else trajectory.get("chunk_titles") or {}, supporting)
    return EpisodeFacts(
        calls=dict(Counter(str(c.get("name")) for c in calls)),
        failures=tuple(call_failure(c) for c in calls),
        repeated=tuple(repeated_flags((str(c.get("name")), c.get("arguments")) for c in calls)),
        evidence_supporting=len({t.strip() for t in supporting if t and t.strip()}),
        evidence_seen=found_seen,
        evidence_read=found_read,
    )


def parse_trajectory(text: str | None) -> dict[str, Any]:
    try:
        trajectory = json.loads(text or "{}")
    except ValueError as exc:
        return {"error": f"the trajectory column is not valid JSON ({exc})"}
    return trajectory if isinstance(trajectory, dict) else {}


# The supporting documents' facts, as the row columns of the same names hold them.
EVIDENCE_FACTS = ("evidence_supporting", "evidence_seen", "evidence_read", "evidence_recall_seen", "evidence_recall_read")
# The columns of a stored row that row_facts reads (beside the trajectory).
FACT_INPUT_COLUMNS = ("supporting_titles", "tool_calls", "evidence_supporting", "evidence_seen", "evidence_read")


def row_facts(row: Mapping[str, Any], trajectory: Mapping[str, Any] | None = None) -> EpisodeFacts:
    """The facts of a stored row from its trajectory; where that cannot tell, what the row stored."""
    if trajectory is None:
        trajectory = parse_trajectory(row.get("trajectory"))
    supporting = list(row.get("supporting_titles") or ())
    if "chunk_titles" in trajectory:
        facts = trajectory_facts(trajectory, supporting)
    else:
        facts = trajectory_facts(trajectory, supporting, titles={})
        facts = replace(facts, evidence_supporting=facts.evidence_supporting or int(row.get("evidence_supporting") or 0),
                        evidence_seen=int(row.get("evidence_seen") or 0), evidence_read=int(row.get("evidence_read") or 0))
    if "tool_calls" not in trajectory:
        return replace(facts, calls={}, failures=(), repeated=(), counted=int(row.get("tool_calls") or 0) == 0, recorded=False)
    return facts
