"""What the report says about each run's protocol (arag.evaluation.protocol): the "Protocol" section
(every run's card against the paper its method comes from), the one-line deviation note beside the
paper's columns, the paper's Table 1 as labelled reference rows under any backbone, and the judge's
name in the tables (its model and preset)."""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

import duckdb

from arag.evaluation.protocol import ProtocolCard, judge_presets, protocol_card
from arag.report.format import markdown_table
from arag.evaluation.results import RunStore, find_run_dirs


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def judge_label_sql() -> str:
    """The judge as the tables name it, from a row's `settings`: the model that judged (judge.model's,
    else the agent's) and the preset (judge.name; rows from before judges had names: the preset whose
    prompts they have), e.g. "qwen2.5-coder-1.5b-instruct (preset paper)"; a named preset whose
    prompts were changed says so, so it never shares a table cell with the preset as shipped."""
    name = "json_extract_string(settings, '$.judge.name')"
    system = "json_extract_string(settings, '$.judge.system_prompt')"
    user = "json_extract_string(settings, '$.judge.user_template')"
    presets = judge_presets()
    same = {p: f"({system} = {_literal(s)} AND {user} = {_literal(u)})" for p, (s, u) in presets.items()}
    by_prompts = "CASE " + " ".join(f"WHEN {cond} THEN {_literal(p)}" for p, cond in same.items()) + " END" if same else "NULL"
    changed = ("CASE " + " ".join(f"WHEN {name} = {_literal(p)} AND NOT {cond} THEN ', prompts changed'" for p, cond in same.items()) + " ELSE '' END") if same else "''"
    model = """coalesce(
        json_extract_string(settings, '$.judge_model.agent_model_at_defaults.model'),
        json_extract_string(settings, '$.judge_model.model'),
        model)"""
    preset = f"coalesce('preset ' || coalesce({name}, {by_prompts}) || coalesce({changed}, ''), 'unnamed preset')"
    return f"{model} || ' (' || {preset} || ')'"


# ---- cards ---------------------------------------------------------------------------------------
def run_cards(con: duckdb.DuckDBPyConnection, results_path: Any) -> dict[str, ProtocolCard]:
    """Each run's card, by run id, for the runs in the `episodes` view: from its run.json under
    `results_path`, else from the identity its rows carry."""
    wanted = {r[0]: r[1] for r in con.execute("SELECT run_id, any_value(settings) FROM episodes GROUP BY run_id").fetchall()}
    cards: dict[str, ProtocolCard] = {}
    for run_dir in find_run_dirs(results_path):
        if run_dir.name in wanted:
            try:
                cards[run_dir.name] = protocol_card(RunStore.at(run_dir).read_info())
            except ValueError:
                continue  # an unreadable run.json: the rows' identity below
    for run_id, settings in wanted.items():
        if run_id not in cards:
            try:
                identity = json.loads(settings) if settings else {}
            except ValueError:
                identity = {}
            cards[run_id] = protocol_card({"identity": identity if isinstance(identity, dict) else {}})
    return cards


def _run_names(con: duckdb.DuckDBPyConnection, label) -> dict[str, str]:
    rows = con.execute("SELECT run_id, any_value(method), any_value(dataset), any_value(model) FROM episodes GROUP BY run_id ORDER BY ALL").fetchall()
    return {r[0]: f"`{r[0]}` ({label(r[1])}, {r[2]}, {r[3]})" for r in rows}


def protocol_section(con: duckdb.DuckDBPyConnection, cards: Mapping[str, ProtocolCard], label) -> str:
    """The "Protocol" section: runs grouped by identical cards; per group the settings that differ from
    the paper's (ours, the paper's, where the paper states it), then those that match."""
    names = _run_names(con, label)
    groups: dict[ProtocolCard, list[str]] = {}
    for run_id in sorted(cards):
        groups.setdefault(cards[run_id], []).append(run_id)
    out = [
        "## Protocol",
        "",
        "Each run against the protocol of the paper its method comes from (A-RAG, arXiv 2602.03442, with its official "
        "configuration where the paper names no value; AgenticRAG; A2RAG): the settings that differ, with the paper's value "
        "and where it is stated, then those that match. Runs with the same card share it. \"not recorded\": the run predates "
        "the field and the value is what the code did then. `+protocol=a-rag-paper` gives an A-RAG run with no deviation "
        "(docs/evaluation.md).",
        "",
    ]
    for card, run_ids in sorted(groups.items(), key=lambda kv: kv[1][0]):
        deviations = card.deviations
        out.append(f"**{', '.join(names.get(r, f'`{r}`') for r in run_ids)}** — against {card.paper}: "
                   + (f"{len(deviations)} of {len(card.rows)} settings differ" if deviations else f"no deviation in {len(card.rows)} settings"))
        out.append("")
        if deviations:
            out += [markdown_table(["Setting", "Ours", "Paper", "Stated in"], [[r.setting, r.ours, r.paper, r.source] for r in deviations], ["l"] * 4), ""]
        same = [f"{r.setting} {r.ours}" for r in card.rows if not r.differs]
        if same:
            out += ["As the paper: " + "; ".join(same) + ".", ""]
    return "\n".join(out)


def deviation_note(cards: Mapping[str, ProtocolCard], run_ids: Sequence[str]) -> str:
    """One line under a table with the paper's numbers: how the runs of the block differ from the
    paper's protocol (the settings named, counted), or that they do not."""
    cards_here = [cards[r] for r in run_ids if r in cards]
    if not cards_here:
        return ""
    differing = list(dict.fromkeys(r.setting for c in cards_here for r in c.deviations))
    if not differing:
        return "Protocol: these runs follow the paper's protocol in every setting on their cards (section Protocol)."
    return (f"Protocol: these runs differ from the paper's in {len(differing)} settings — {', '.join(differing)} "
            "(section Protocol: ours beside the paper's); the paper's numbers are not a like-for-like comparison.")


def block_runs(con: duckdb.DuckDBPyConnection, keys: Sequence[str], group: Sequence[Any], methods: Sequence[str] | None = None) -> list[str]:
    """The run ids of a table block: the rows whose `keys` hold `group`'s values (and, given
    `methods`, whose method is one of them)."""
    conds = [f"{k} IS NOT DISTINCT FROM ?" for k in keys]
    params = list(group)
    if methods is not None:
        conds.append("list_contains(?, method)")
        params.append(list(methods))
    return [r[0] for r in con.execute(f"SELECT DISTINCT run_id FROM episodes WHERE {' AND '.join(conds)} ORDER BY 1", params).fetchall()]


# ---- the paper's numbers as reference rows -------------------------------------------------------
def backbone_title(backbone: str) -> str:
    """'gpt-5-mini' → 'GPT-5-mini', as the paper writes its backbones."""
    return "GPT" + backbone[3:] if backbone.lower().startswith("gpt") else backbone


def reference_rows(paper, methods: Sequence[str], datasets: Sequence[str], columns, label, fmt, *, of_answered: bool = False) -> list[list[str]]:
    """The paper's published accuracies of `methods` as rows of their own, one per backbone and
    method it reports, labelled "<method> — paper, <backbone> (reference)"; `columns(dataset)`: the
    accuracy columns of a dataset; `fmt`: how a published value is written. `of_answered`: each
    accuracy has an "(of attempted)" and an "(of answered)" column; the published value goes under
    "(of answered)", the denominator of the paper's evaluation code, and "–" under the other."""
    rows = []
    for backbone in paper.backbones:
        for method in methods:
            if method not in paper.backbones[backbone]:
                continue
            row = [f"{label(method)} — paper, {backbone_title(backbone)} (reference)"]
            for d in datasets:
                for c in range(len(columns(d))):
                    row += (["–"] if of_answered else []) + [fmt(paper.cell(backbone, method, d, c))]
            rows.append(row)
    return rows
