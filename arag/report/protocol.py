"""What the report says about each run's protocol (arag.evaluation.protocol): the "Protocol" section,
the deviation note beside the paper's columns and the judge's name."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Mapping, Sequence

import duckdb

from arag.evaluation.effective import Effective, chunk_readers, effective, header_form
from arag.evaluation.protocol import ProtocolCard, judge_presets, protocol_card
from arag.report.format import markdown_table, sql_literal
from arag.evaluation.results import RUN_INFO, RunStore, find_run_dirs


def judge_label_sql() -> str:
    """The judge as the tables name it, e.g. "qwen2.5-coder-1.5b-instruct (preset paper)"; a preset whose
    prompts were changed says so, so it never shares a table cell with the preset as shipped."""
    name = "json_extract_string(settings, '$.judge.name')"
    system = "json_extract_string(settings, '$.judge.system_prompt')"
    user = "json_extract_string(settings, '$.judge.user_template')"
    presets = judge_presets()
    same = {p: f"({system} = {sql_literal(s)} AND {user} = {sql_literal(u)})" for p, (s, u) in presets.items()}
    by_prompts = "CASE " + " ".join(f"WHEN {cond} THEN {sql_literal(p)}" for p, cond in same.items()) + " END" if same else "NULL"
    changed = ("CASE " + " ".join(f"WHEN {name} = {sql_literal(p)} AND NOT {cond} THEN ', prompts changed'" for p, cond in same.items()) + " ELSE '' END") if same else "''"
    model = """coalesce(
        json_extract_string(settings, '$.judge_model.agent_model_at_defaults.model'),
        json_extract_string(settings, '$.judge_model.model'),
        model)"""
    preset = f"coalesce('preset ' || coalesce({name}, {by_prompts}) || coalesce({changed}, ''), 'unnamed preset')"
    return f"{model} || ' (' || {preset} || ')'"


def _loads(text: Any) -> Any:
    try:
        return json.loads(text) if text else None
    except (TypeError, ValueError):
        return None


def run_effective(con: duckdb.DuckDBPyConnection) -> dict[str, Effective]:
    """What each run's episodes ran under (arag.evaluation.effective), reading only the trajectory parts it needs."""
    slim: dict[str, list[dict[str, Any]]] = {}
    readers = chunk_readers()
    for run_id, agent, backend, prompt, steps, refused, cut, messages in con.execute("""
        SELECT run_id, json_extract(trajectory, '$.agent'), json_extract(trajectory, '$.backend'),
               json_extract(trajectory, '$.model_calls[0].prompt_tokens'), json_extract(trajectory, '$.tool_calls[*].step'),
               json_extract(trajectory, '$.refused_calls'), json_extract(trajectory, '$.truncated_observations'),
               CASE WHEN TRY_CAST(json_extract(trajectory, '$.refused_calls') AS INTEGER) > 0 THEN json_extract(trajectory, '$.messages') END
        FROM episodes WHERE json_valid(trajectory) ORDER BY run_id, question_id""").fetchall():
        slim.setdefault(run_id, []).append({
            "agent": _loads(agent), "backend": _loads(backend) or {}, "model_calls": [{"prompt_tokens": _loads(prompt)}],
            "tool_calls": [{"step": _loads(s)} for s in steps or []],  # a list of JSON values
            "refused_calls": _loads(refused), "truncated_observations": _loads(cut),
            "messages": _loads(messages),
        })
    headers = dict(con.execute("""
        SELECT run_id, arg_min(json_extract(trajectory, '$.tool_calls'), question_id) FROM episodes
        WHERE json_valid(trajectory) AND list_has_any(json_extract_string(trajectory, '$.tool_calls[*].name'), ?)
        GROUP BY run_id""", [sorted(readers)]).fetchall())
    out = {}
    for run_id, trajectories in slim.items():
        reads = [c for c in _loads(headers.get(run_id)) or [] if c.get("name") in readers]
        header = next((h for h in map(header_form, reads) if h), None)
        out[run_id] = dataclasses.replace(effective(trajectories), chunk_read_header=header)
    return out


def run_cards(con: duckdb.DuckDBPyConnection, results_path: Any) -> dict[str, ProtocolCard]:
    """Each run's card by run id, recomputed from run.json (else its rows' identity) and what its episodes ran
    under; a card stored in run.json is never read."""
    wanted = {r[0]: r[1] for r in con.execute("SELECT run_id, any_value(settings) FROM episodes GROUP BY run_id").fetchall()}
    ran = run_effective(con)
    cards: dict[str, ProtocolCard] = {}
    for run_dir in find_run_dirs(results_path):
        if run_dir.name in wanted:
            try:
                cards[run_dir.name] = protocol_card(RunStore.at(run_dir).read_info(), ran.get(run_dir.name))
            except ValueError:
                continue  # an unreadable run.json: the rows' identity below
    for run_id, settings in wanted.items():
        if run_id not in cards:
            identity = _loads(settings) or {}
            cards[run_id] = protocol_card({"identity": identity if isinstance(identity, dict) else {}}, ran.get(run_id))
    return cards


def cell(text: str) -> str:
    """`text` in a Markdown table cell: its pipes (chunk_read's header has them) escaped."""
    return text.replace("|", "\\|")


def protocol_section(con: duckdb.DuckDBPyConnection, cards: Mapping[str, ProtocolCard], label) -> str:
    """The "Protocol" section: runs grouped by identical cards; per group the deviations, then the matches."""
    runs = con.execute("SELECT run_id, any_value(method), any_value(dataset), any_value(model) FROM episodes GROUP BY run_id ORDER BY ALL").fetchall()
    names = {r[0]: f"`{r[0]}` ({label(r[1])}, {r[2]}, {r[3]})" for r in runs}
    groups: dict[ProtocolCard, list[str]] = {}
    for run_id in sorted(cards):
        groups.setdefault(cards[run_id], []).append(run_id)
    out = [
        "## Protocol",
        "",
        "Each run against the protocol of the paper its method comes from (A-RAG, arXiv 2602.03442, with its authors' code "
        "(a44de6b) where the paper names no value; AgenticRAG; A2RAG): the settings that differ in a way that moves numbers, "
        "with the paper's value, the authors' code's and where it is stated; then those that differ in form only; then those "
        "that match. Each card is recomputed from the run's description and what its episodes ran under (the token budget "
        "after fitting it to the model's window, the reply cap sent, tool calls per step, chunk_read's header); a card "
        f"stored in {RUN_INFO} is not read. Texts are checked by fingerprint against the method's preset (\"custom\": not the "
        "preset's). Runs with the same card share it. \"not recorded\": the run predates the field and the value is what "
        "the code did then; \"derived\": computed from the settings as the code does. The preset `+protocol=a-rag-paper` "
        "leaves only the differences the card names as ours (docs/evaluation.md).",
        "",
    ]
    for card, run_ids in sorted(groups.items(), key=lambda kv: kv[1][0]):
        deviations = card.deviations
        out += [f"**{', '.join(names.get(r, f'`{r}`') for r in run_ids)}** — against {card.paper}: "
                + (f"{len(deviations)} of {len(card.rows)} settings differ" if deviations else f"no deviation in {len(card.rows)} settings"), ""]
        if deviations:
            rows = [[cell(r.setting), cell(r.ours), cell(r.paper), cell(r.official or "–"), cell(r.source)] for r in deviations]
            out += [markdown_table(["Setting", "Ours", "Paper", "Authors' code", "Stated in"], rows, ["l"] * 5), ""]
        form = [f"{r.setting} {r.ours} (paper: {r.paper}; authors' code: {r.official or '–'}: {r.effect})" for r in card.form_only]
        if form:
            out += ["Form only (differs, moves no number): " + "; ".join(form) + ".", ""]
        same = [f"{r.setting} {r.ours}" + (f" (authors' code: {r.official})" if r.official and r.official != r.paper else "") for r in card.rows if not r.differs]
        if same:
            out += ["As the paper: " + "; ".join(same) + ".", ""]
    return "\n".join(out)


def deviation_note(cards: Mapping[str, ProtocolCard], run_ids: Sequence[str]) -> str:
    """The line under a table with the paper's numbers: how the block's runs differ from the paper's protocol."""
    cards_here = [cards[r] for r in run_ids if r in cards]
    if not cards_here:
        return ""
    differing = list(dict.fromkeys(r.setting for c in cards_here for r in c.deviations))
    if not differing:
        return "Protocol: these runs follow the paper's protocol in every setting on their cards (section Protocol)."
    return (f"Protocol: these runs differ from the paper's in {len(differing)} settings — {', '.join(differing)} "
            "(section Protocol: ours beside the paper's); the paper's numbers are not a like-for-like comparison.")


def block_runs(con: duckdb.DuckDBPyConnection, model: Any, methods: Sequence[str] | None) -> list[str]:
    """The run ids of the rows of `model` (and whose method is one of `methods`)."""
    of_methods = "" if methods is None else " AND list_contains(?, method)"
    query = f"SELECT DISTINCT run_id FROM episodes WHERE model IS NOT DISTINCT FROM ?{of_methods} ORDER BY 1"
    return [run for (run,) in con.execute(query, [model] if methods is None else [model, list(methods)]).fetchall()]
