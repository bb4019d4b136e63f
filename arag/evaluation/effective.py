"""What a run's episodes ran under, read from their trajectories, which the protocol card shows
instead of the settings (docs/evaluation.md, "Protocol", "What ran, not what was set")."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from arag.agent.loop import EXTRA_CALL_NOTE
from arag.tools.registry import TOOLS

# Keys naming the model's context window (llama.cpp's and vLLM's own in older trajectories).
WINDOW_KEYS = ("context_window", "n_ctx", "max_model_len")


@dataclass(frozen=True)
class Effective:
    episodes: int  # episodes with a recorded trajectory
    token_budgets: tuple[int, ...] = ()  # the budgets they ran under (fitted to the window), distinct, ascending
    reply_caps: tuple[int, ...] = ()  # the max_tokens their model calls sent, distinct
    windows: tuple[int, ...] = ()  # the model's context window, where the backend knew it
    smallest_prompt: int | None = None  # the smallest first prompt (tokens, as the backend counted them)
    most_calls_in_a_step: int | None = None  # tool calls carried out in one step, at most (None: no step called a tool)
    extra_calls: int = 0  # calls of a reply beyond the ones carried out, answered "not run"
    replies_with_extra_calls: int | None = 0  # None: some episodes with extra calls kept no messages to count them by
    cut_results: int = 0  # tool results cut to fit the context window
    chunk_read_header: str | None = None  # the first chunk_read header shown, ids as "<id>"
    request_fields: dict[str, Any] | None = None  # how the backend's requests capped and sampled (arag.llm.openai), where it said


def chunk_readers() -> frozenset[str]:
    return frozenset(name for name, spec in TOOLS.items() if spec.shown_ids_argument and spec.unit == "chunk")


def window_of(backend: Mapping[str, Any]) -> int | None:
    return next((int(backend[key]) for key in WINDOW_KEYS if backend.get(key)), None)


def reply_cap_of(trajectory: Mapping[str, Any]) -> int | None:
    """The max_tokens an episode's model calls sent (older records: what the loop passed on)."""
    agent, backend = trajectory.get("agent") or {}, trajectory.get("backend") or {}
    cap = agent.get("reply_cap") or agent.get("max_reply_tokens") or backend.get("max_tokens")
    return int(cap) if cap else None


def replies_with_extra_calls(messages: list[Mapping[str, Any]]) -> int:
    """Assistant replies followed by at least one "not run" note (arag.agent.loop.EXTRA_CALL_NOTE)."""
    count, noted = 0, False
    for message in messages:
        if message.get("role") == "assistant":
            noted = False
        elif not noted and EXTRA_CALL_NOTE in str(message.get("content") or ""):
            count, noted = count + 1, True
    return count


def header_form(call: Mapping[str, Any]) -> str | None:
    """The first chunk header of a chunk_read result, ids written "<id>", titles "<title>"."""
    lines = () if call.get("error") else (x.strip() for x in str(call.get("text") or "").splitlines())
    line = next((x for x in lines if x.startswith("[") and x.endswith("]")), None)
    if line is None:
        return None
    inner = line[1:-1]
    if ": " not in inner:  # "[<label> <id>]", the authors' form
        return f"[{inner.split(' ')[0]} <id>]" if " " in inner else "[<id>]"
    fields = []
    for part in inner.split(" | "):
        key, sep, value = part.partition(": ")
        shown = part if not sep else f"{key}: " + ("<title>" if key == "title" else "<id>")  # "none (first chunk ...)" too: the form, not the case
        fields.append(shown)
    return "[" + " | ".join(fields) + "]"


def effective(trajectories: Iterable[Mapping[str, Any]]) -> Effective:
    ran = [t for t in trajectories if t and t.get("agent")]
    backends = [t.get("backend") or {} for t in ran]
    first_prompts = [(t.get("model_calls") or [{}])[0].get("prompt_tokens") for t in ran]
    # Tool calls per step of each episode; step 0 is a method's retrieval before the first model call.
    per_step = [Counter(int(c["step"]) for c in t.get("tool_calls") or [] if int(c.get("step") or 0) >= 1) for t in ran]
    readers = chunk_readers()
    headers = (header_form(c) for t in ran for c in t.get("tool_calls") or [] if c.get("name") in readers)
    refused = [t for t in ran if int(t.get("refused_calls") or 0)]
    return Effective(
        episodes=len(ran),
        token_budgets=tuple(sorted({int(t["agent"]["token_budget"]) for t in ran if t["agent"].get("token_budget") is not None})),
        reply_caps=tuple(sorted({cap for cap in map(reply_cap_of, ran) if cap})),
        windows=tuple(sorted({window for window in map(window_of, backends) if window})),
        smallest_prompt=min((int(p) for p in first_prompts if p is not None), default=None),
        most_calls_in_a_step=max((max(steps.values()) for steps in per_step if steps), default=None),
        extra_calls=sum(int(t["refused_calls"]) for t in refused),
        replies_with_extra_calls=(None if any(not t.get("messages") for t in refused)
                                  else sum(replies_with_extra_calls(t["messages"]) for t in refused)),
        cut_results=sum(int(t.get("truncated_observations") or 0) for t in ran),
        chunk_read_header=next((h for h in headers if h), None),
        request_fields=next((b["request_fields"] for b in backends if b.get("request_fields")), None),
    )
