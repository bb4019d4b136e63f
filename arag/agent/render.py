"""Human-readable trajectory of an episode (what `pipelines.ask` prints)."""

from __future__ import annotations

import json

from arag.agent.episode import Episode


def _clip(text: str, lines: int) -> str:
    rows = text.rstrip().splitlines()
    if lines and len(rows) > lines:
        rows = rows[:lines] + [f"    … ({len(rows) - lines} more lines)"]
    return "\n".join("    " + r for r in rows)


def render_episode(ep: Episode, observation_lines: int = 12) -> str:
    out = [f"question: {ep.question}", f"method: {ep.method}   model: {ep.backend.get('model')} ({ep.backend.get('backend')}, {ep.protocol} protocol)"]
    if rails := {k: v for k, v in (ep.guard_rails or {}).items() if k != "max_refusals" and v}:
        out.append("guard rails on: " + ", ".join(f"{k}={v}" for k, v in rails.items()) + " (help for small models, not part of the paper's method)")
    by_step: dict[int, list] = {}
    for call in ep.tool_calls:
        by_step.setdefault(call.step, []).append(call)
    for call in by_step.get(0, []):
        out.append(f"\n[retrieval] {call.name} {json.dumps(call.arguments, ensure_ascii=False)}  ({call.retrieved_tokens} tokens, {call.latency_s:.2f}s)")
        out.append(_clip(call.text, observation_lines))
    for mc in ep.model_calls:
        tokens = f"{mc.prompt_tokens}+{mc.completion_tokens} tokens, {mc.latency_s:.1f}s" + (f", {mc.attempts} attempts" if mc.attempts > 1 else "")
        out.append(f"\n── step {mc.step}{' (final, no tools)' if mc.final else ''} ── {tokens}")
        if mc.error:
            out.append(f"  model error: {mc.error}")
            continue
        calls = by_step.get(mc.step, []) if not mc.final else []
        if not calls:
            out.append(f"  reply: {mc.raw.strip()[:500]}")
        for call in calls:
            status = f"error: {call.error}" if call.error else f"{call.retrieved_tokens} tokens" + (f", unusable: {call.failure.replace('_', ' ')}" if call.failure else "")
            out.append(f"  → {call.name} {json.dumps(call.arguments, ensure_ascii=False)[:300]}  ({status}, {call.latency_s:.2f}s)")
            out.append(_clip(call.text, observation_lines))
    out.append("")
    if ep.refused_calls:
        out.append(f"{ep.refused_calls} extra tool call(s) not run (one tool per step)")
    if ep.guard_rail_events:
        out.append("guard rails: " + "; ".join(ep.guard_rail_events))
    if ep.status == "failed":
        out.append(f"FAILED: {ep.failure}")
    else:
        forced = f" (forced: {ep.forced_reason})" if ep.forced else ""
        out.append(f"answer{forced}: {ep.answer}")
    t = ep.token_totals()
    out.append(
        f"{ep.steps} steps, {len([c for c in ep.tool_calls if c.step > 0])} tool calls, {ep.retrieved_tokens} retrieved tokens, "
        f"{t['prompt_tokens']} prompt + {t['completion_tokens']} completion tokens, {ep.wall_s:.1f}s"
    )
    return "\n".join(out)
