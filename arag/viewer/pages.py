"""The viewer's pages, rendered from the Jinja2 templates in arag/viewer/templates with autoescaping on,
so a model's output is shown, never run as markup. Here what the templates show is computed."""

from __future__ import annotations

import json
import re
from typing import Any, Iterable, NamedTuple
from urllib.parse import urlencode

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup, escape

import arag.viewer.figures as figures
from arag.evaluation.episode_facts import EpisodeFacts, row_facts, stored_calls, unknown_ids_in
from arag.evaluation.evidence import shows_full_text
from arag.evaluation.results import RUN_INFO
from arag.report.intervals import DELTA, PAIRED_HEADER, WITHIN_NOISE, Proportion, failures_text, paired_cells
from arag.report.paired import TABLE1, TABLE2
from arag.viewer.data import Run, failure_causes, outcome, scores
from arag.viewer.errors import Refused
from arag.viewer.listing import CHOICES, filter_rows, gold_seen_but_wrong
from arag.viewer.gold import gold_marks

PAGE_SIZE = 200  # episodes per page of the listing
# What a paired comparison compares: the paper's table of a method pair, or runs of one method.
PAIR_KINDS = {TABLE1: "methods (Table 1)", TABLE2: "methods (Table 2)", None: "one method"}
FILTERS = ("run", "dataset", "method", "q", *CHOICES, "sort", "order")
FILTER_LABELS = {"outcome": "outcome", "forced": "forced answer", "evidence": "gold evidence", "tool_errors": "tool errors", "repeated": "repeated calls", "gold_wrong": "diagnosis"}
# The episode table's columns: (heading, sort key or None).
EPISODE_COLUMNS = (
    ("run", "run"), ("question", "question"), ("gold", None), ("prediction", None), ("outcome", "outcome"), ("steps", "steps"),
    ("tokens in / out", "tokens"), ("retrieved tokens", "retrieved"), ("gold seen", "seen"), ("gold read", "read"),
    ("tool errors", "errors"), ("repeated", "repeated"), ("s", "seconds"), ("", None),
)  # fmt: skip
UNKNOWN_LINE = re.compile(r"^Unknown chunk ids? \(not in this index\):.*$", re.MULTILINE)
EVENT_STEP = re.compile(r"^step (\d+):")


def href(path: str, params: dict[str, Any] | None = None, **more: Any) -> str:
    kept = {k: v for k, v in {**(params or {}), **more}.items() if v not in (None, "")}
    return path + ("?" + urlencode(kept) if kept else "")


def num(value: Any, digits: int = 2) -> Any:
    if value is None:
        return ""
    return f"{value:.{digits}f}" if isinstance(value, float) else value


def nums(row: dict[str, Any], *keys: str, sep: str = " · ") -> str:
    return sep.join(str(num(row.get(k))) for k in keys)


def pct(value: float | None) -> str:
    return "" if value is None else f"{100 * value:.1f}%"


def as_json(value: Any, indent: int | None = None) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=indent, default=str)


def breakable(text: Any) -> Markup:
    """Escaped text that may wrap after each underscore (setting names are long single words)."""
    return Markup(str(escape(text)).replace("_", "_<wbr>"))


def mark_ids(text: str, ids: Iterable[str]) -> Markup:
    """The escaped text with every occurrence of the given chunk ids highlighted."""
    out = str(escape(text))
    marked = sorted({str(escape(i)) for i in ids if i}, key=len, reverse=True)
    if not marked:
        return Markup(out)
    pattern = re.compile(r"(?<![\w#])(" + "|".join(re.escape(i) for i in marked) + r")(?![\w#])")
    return Markup(pattern.sub(r'<mark class="gold">\1</mark>', out))


def result_html(text: str, gold: Iterable[str]) -> Markup:
    """A tool result as the model saw it: gold ids marked, the line naming unknown ids marked as an error."""
    return Markup(UNKNOWN_LINE.sub(lambda m: f'<span class="error-line">{m.group(0)}</span>', mark_ids(text, gold)))


class Accuracy(NamedTuple):
    value: str | None  # "50.0%"; None where nothing was scored
    interval: str  # "[15.0, 85.0] n=4"
    failed: str  # the failed episodes (never scored) and their cause; "" for none


def run_accuracy(run: Run, column: str) -> Accuracy:
    """A run's accuracy over its scored questions with its 95% Wilson interval and n, its failed episodes beside it."""
    values = list(scores(run, column).values())
    causes = failure_causes(run)
    shown = Proportion(sum(values), len(values)).text("%").split(" ", 1) if values else (None, "")
    return Accuracy(*shown, failures_text(len(causes), causes))


# Autoescaping on for every template; None shows as nothing, as an absent value should.
ENV = Environment(loader=PackageLoader("arag.viewer", "templates"), autoescape=True, trim_blocks=True, lstrip_blocks=True, undefined=StrictUndefined,
                  finalize=lambda value: "" if value is None else value)
ENV.filters.update(num=num, pct=pct, as_json=as_json, breakable=breakable, mark_ids=mark_ids, result_html=result_html)
ENV.globals.update(
    href=href, nums=nums, outcome=outcome, run_accuracy=run_accuracy, unknown_ids_in=unknown_ids_in, shows_full_text=shows_full_text,
    gold_seen_but_wrong=gold_seen_but_wrong, gold_marks=gold_marks, row_facts=row_facts, stored_calls=stored_calls, failures_text=failures_text,
    PAIR_KINDS=PAIR_KINDS, PAIRED_HEADER=PAIRED_HEADER, DELTA=DELTA, WITHIN_NOISE=WITHIN_NOISE, EPISODE_COLUMNS=EPISODE_COLUMNS, RUN_INFO=RUN_INFO,
    json=json, figures=figures, zip=zip, sum=sum, cells=paired_cells,
)


def render(template: str, **context: Any) -> str:
    return ENV.get_template(template).render(**context)


def macro(name: str) -> Any:
    return getattr(ENV.get_template("macros.html").module, name)


def listing_params(params: dict[str, str]) -> dict[str, str]:
    return {k: params.get(k, "") for k in FILTERS}


def index_page(root: str, runs: list[Run], problems: list[str], params: dict[str, str]) -> str:
    f = listing_params(params)
    try:
        offset = max(0, int(params.get("offset") or 0))
    except ValueError:
        raise Refused(f"offset={params.get('offset')!r} is not a number") from None
    shown = filter_rows(runs, f)
    # A filtered listing is what was asked for: its episodes first, the runs below them.
    filtered = any(f[k] for k in FILTERS if k not in ("sort", "order")) or offset
    selects = [("run", "run", [(r.run_id, f"{r.run_id} · {r.label}") for r in runs]), ("dataset", "dataset", [(d, d) for d in sorted({r.dataset for r in runs})]),
               ("method", "method", [(m, m) for m in sorted({r.method for r in runs})]), *((name, FILTER_LABELS[name], list(choices.items())) for name, choices in CHOICES.items())]
    return render("index.html", root=root, runs=runs, problems=problems, f=f, offset=offset, shown=shown, page=shown[offset : offset + PAGE_SIZE], page_size=PAGE_SIZE,
                  filtered=filtered, selects=selects, total=sum(len(r.rows) for r in runs))


def steps_html(t: dict[str, Any], facts: EpisodeFacts, gold: dict[str, list[str]], titles: dict[str, str], gold_refs: dict[str, list[str]]) -> Markup:
    """Each step's model calls, guard-rail events and tool calls; a repeated tool result folded."""
    by_step: dict[int, list[tuple]] = {}
    loose: list[tuple] = []
    for call in t.get("model_calls") or []:
        by_step.setdefault(int(call.get("step") or 0), []).append(("model", call))
    for event in t.get("guard_rail_events") or []:
        m = EVENT_STEP.match(str(event))
        (by_step.setdefault(int(m.group(1)), []) if m else loose).append(("guard", str(event)))
    first_shown: dict[str, str] = {}  # a result's text → where it was first shown
    for call, failure, repeated in zip(stored_calls(t), facts.failures, facts.repeated):
        step, text = int(call.get("step") or 0), call.get("text") or ""
        same_as = first_shown.get(text) if text else None
        first_shown.setdefault(text, f"the result of step {step}'s {call.get('name')}")
        by_step.setdefault(step, []).append(("tool", call, failure, repeated, same_as))
    full_text = bool(((t.get("agent") or {}).get("method") or {}).get("full_text"))
    return macro("steps")(sorted(by_step.items()), loose, full_text, t.get("forced_reason") if t.get("forced") else None, gold, titles, gold_refs)


def episode_page(run: Run, row: dict[str, Any], t: dict[str, Any], titles: dict[str, str], titles_note: str) -> str:
    supporting = row.get("supporting_titles") or []
    facts = row_facts(row, t)
    gold, gold_refs = gold_marks(t, titles, supporting)
    return render("episode.html", run=run, row=row, t=t, supporting=supporting, facts=facts, gold=gold, gold_refs=gold_refs, titles_note=titles_note,
                  steps=steps_html(t, facts, gold, titles, gold_refs), kinds={k.replace("_", " "): n for k, n in (facts.tool_error_kinds or {}).items()})


def run_page(run: Run, report: Any) -> str:
    """A run's figures; `report`: the report nearest it (a path), or None."""
    rows = run.rows
    # A row stored without a trajectory leaves its run's tool errors and repeats uncounted, not 0.
    counted = all(r.get("unusable_results") is not None for r in rows)
    kinds = figures.kind_totals(rows) if counted else {}
    mix = figures.tool_mix(rows)
    return render("run.html", run=run, report=report, causes=failure_causes(run), scores=lambda col: list(scores(run, col).values()), Proportion=Proportion,
                  answered=sum(r["status"] == "ok" for r in rows), mix=mix, total_calls=sum(c for _, c, _ in mix),
                  errors=sum(r["unusable_results"] for r in rows) if counted else "n/a", repeated=sum(r["repeated"] for r in rows) if counted else "n/a",
                  kinds_text=" (" + ", ".join(f"{kind.replace('_', ' ')} {n}" for kind, n in kinds.items()) + ")" if kinds else "")
