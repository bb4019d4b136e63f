"""The viewer's pages as server-rendered HTML: no script, no file from elsewhere (it works offline).
Every text from the results (model replies, tool results, questions, settings) goes through `esc`:
a model's output is shown, never run as markup."""

from __future__ import annotations

import html
import json
import re
from typing import Any, Iterable, Sequence
from urllib.parse import urlencode

from arag.evaluation.evidence import shows_full_text
from arag.evaluation.results import RUN_INFO
from arag.report.intervals import DELTA, PAIRED_HEADER, WITHIN_NOISE, Proportion, failures_text, paired_cells
from arag.report.paired import TABLE1, TABLE2, Comparison
from arag.evaluation.episode_facts import EpisodeFacts, row_facts, stored_calls, unknown_ids_in
import arag.viewer.figures as figures
from arag.viewer.data import CHOICES, Run, failure_causes, filter_rows, gold_seen_but_wrong, outcome, scores
from arag.viewer.gold import gold_marks

PAGE_SIZE = 200  # episodes per page of the listing
# What a paired comparison compares: the paper's table of a method pair, or runs of one method.
PAIR_KINDS = {TABLE1: "methods (Table 1)", TABLE2: "methods (Table 2)", None: "one method"}

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;padding:12px 20px;max-width:1800px;color:#1d1d1f;background:#fafafa}
a{color:#0b57d0}h1{font-size:20px;margin:6px 0 12px}h2{font-size:16px;margin:18px 0 6px}
table{border-collapse:collapse;width:100%;background:#fff;margin:6px 0}
th,td{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}th{background:#f0f0f3;font-weight:600}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
pre{white-space:pre-wrap;word-break:break-word;background:#fff;border:1px solid #ddd;padding:6px 8px;margin:4px 0;max-height:480px;overflow:auto;font-size:12.5px}
.badge{display:inline-block;padding:0 7px;border-radius:9px;font-size:12px;font-weight:600;color:#fff;white-space:nowrap}
.correct{background:#1e8e3e}.wrong{background:#d93025}.failed{background:#5f6368}.unjudged{background:#e37400}.forced{background:#8430ce}
.box{background:#fff;border:1px solid #ddd;border-radius:6px;padding:8px 12px;margin:8px 0}
.kv{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px}.kv dt{color:#555}.kv dd{margin:0}
.step{background:#fff;border:1px solid #ccc;border-left:4px solid #0b57d0;border-radius:4px;padding:6px 10px;margin:10px 0}
.event{border-left:3px solid #999;padding:2px 8px;margin:6px 0}.event h3{font-size:14px;margin:2px 0}
.model-call{border-color:#0b57d0}.tool-call{border-color:#1e8e3e}.guard-rail{border-color:#e37400;background:#fff4e5}
.meta{color:#555;font-size:12.5px}
.chunk{display:inline-block;border:1px solid #bbb;border-radius:4px;padding:0 5px;margin:1px 3px 1px 0;font-size:12.5px;background:#fff}
.chunk.gold{background:#fde293;border-color:#b06000;font-weight:600}
mark.gold{background:#fde293;font-weight:600}
form.filters{display:flex;flex-wrap:wrap;gap:6px 12px;align-items:end;background:#fff;border:1px solid #ddd;padding:8px;border-radius:6px}
form.filters label{display:flex;flex-direction:column;font-size:12px;color:#555}
.columns{display:grid;grid-template-columns:repeat(auto-fit,minmax(210px,1fr));gap:10px}.run-column{min-width:0;overflow-wrap:anywhere}
.run-column .kv{display:block}.run-column .kv dt{margin-top:3px;font-size:12px}.run-column .badge{white-space:normal}
.verdict-contain.disagree{background:#fde293;font-weight:600}
.problem{color:#a50e0e}
.ci{color:#555;font-size:12px}.noise{color:#555}.differs{font-weight:600}
.tool-call.unusable{border-color:#d93025;background:#fce8e6}.tool-call.repeated{border-left-style:dashed}
.call-label{display:inline-block;padding:0 6px;margin-left:6px;border-radius:4px;font-size:12px;font-weight:600;border:1px solid}
.call-label.unusable{color:#a50e0e;border-color:#d93025;background:#fff}.call-label.repeated{color:#8430ce;border-color:#8430ce;background:#fff}
.tool-call.unknown-ids{border-color:#d93025}.error-line{color:#a50e0e;background:#fce8e6;font-weight:600}
.gold-wrong{background:#b06000}td.has-errors{color:#a50e0e;font-weight:600;background:#fce8e6}td.has-repeated{color:#8430ce;font-weight:600}
th a{color:inherit;text-decoration:none}th[aria-sort]{background:#e3e8f7}
.wide{overflow-x:auto}table.runs,table.episodes{font-size:12.5px}table.figures th{width:220px}table.figures td.value{text-align:left}
table.episodes td{overflow-wrap:anywhere}table.runs td.acc-cell{white-space:normal;min-width:120px}table.runs td.run-links{min-width:70px}
.folded>summary{color:#8430ce}
"""


def esc(value: Any) -> str:
    return "" if value is None else html.escape(str(value), quote=True)


def href(path: str, **params: Any) -> str:
    kept = {k: v for k, v in params.items() if v not in (None, "")}
    return esc(path + ("?" + urlencode(kept) if kept else ""))


def page(title: str, body: str) -> str:
    return f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title><style>{STYLE}</style></head>\n<body>\n{body}\n</body></html>\n'


def num(value: Any, digits: int = 2) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return esc(value)


def pct(value: float | None) -> str:
    return "" if value is None else f"{100 * value:.1f}%"


def badge(kind: str, text: str | None = None) -> str:
    return f'<span class="badge {esc(kind)}">{esc(text or kind)}</span>'


def outcome_badge(row: dict[str, Any]) -> str:
    return badge(outcome(row))


def kv(pairs: Iterable[tuple[str, str]]) -> str:
    """A definition list of (label, HTML value) pairs; empty values are left out."""
    return '<dl class="kv">' + "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in pairs if v not in ("", None)) + "</dl>"


def as_json(value: Any, indent: int | None = None) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=indent)


def accuracy(scores: Iterable[float], causes: Sequence[str] = ()) -> str:
    """An accuracy over 0/1 scores with its 95% Wilson interval and n: "50.0% [15.0, 85.0] n=4"; the
    failed episodes (`causes`, one each: never scored) beside it, or alone where nothing was scored."""
    values = list(scores)
    failed = failures_text(len(causes), causes)
    failed_html = f'<span class="problem failures">{esc(failed)}</span>' if failed else ""
    if not values:
        return failed_html
    value, interval = percent_text(Proportion(sum(values), len(values))).split(" ", 1)
    shown = f'<span class="acc">{value}</span> <span class="ci" title="95% Wilson interval and the questions it averages over">{interval}</span>'
    return shown + (f" · {failed_html}" if failed_html else "")


def run_accuracy(run: Run, column: str) -> str:
    """`accuracy` of a run's column, its failed episodes beside it."""
    return accuracy(scores(run, column).values(), failure_causes(run))


def percent_text(p: Proportion) -> str:
    """ "50.0% [15.0, 85.0] n=4": an accuracy in %, its 95% Wilson interval and n."""
    low, high = p.interval
    return f"{100 * (p.value or 0):.1f}% [{100 * low:.1f}, {100 * high:.1f}] n={p.n}"


# ---- the first page: runs and episodes --------------------------------------------------------------
FILTERS = ("run", "dataset", "method", "q", *CHOICES, "sort", "order")


def listing_params(params: dict[str, str]) -> dict[str, str]:
    """The listing's filters and sort from a page's query (absent ones empty)."""
    return {k: params.get(k, "") for k in FILTERS}


def index_page(root: str, runs: list[Run], problems: list[str], params: dict[str, str]) -> str:
    f = listing_params(params)
    try:
        offset = max(0, int(params.get("offset") or 0))
    except ValueError:
        raise ValueError(f"offset={params.get('offset')!r} is not a number") from None
    shown = filter_rows(runs, f)
    body = [f"<h1>Results: {esc(root)}</h1>"]
    body += [f'<p class="problem">{esc(p)}</p>' for p in problems]
    runs_part = [f"<h2 id=\"runs\">Runs ({len(runs)})</h2>" + runs_table(runs),
                 f'<p class="meta"><a id="paired-link" href="/paired">paired comparisons of these runs</a> (the report\'s, on the questions both runs scored)</p>']
    exports = " · ".join(f'<a class="export" href="{href("/export", **f, format=kind)}">{kind.upper()}</a>' for kind in ("csv", "json"))
    episodes_part = [filter_form(runs, f),
                     f'<h2 id="episodes">Episodes ({len(shown)} of {sum(len(r.rows) for r in runs)})</h2><p class="meta">export the {len(shown)} listed: {exports} · <a href="#runs">the runs</a></p>',
                     episodes_table(shown[offset : offset + PAGE_SIZE], f)]
    if offset + PAGE_SIZE < len(shown):
        episodes_part.append(f'<p><a href="{href("/", **f, offset=offset + PAGE_SIZE)}">next {PAGE_SIZE} episodes</a></p>')
    # A filtered listing is what was asked for: its episodes first, the runs below them.
    filtered = any(f[k] for k in FILTERS if k not in ("sort", "order")) or offset
    body += [*episodes_part, *runs_part] if filtered else [*runs_part, *episodes_part]
    return page(f"arag results: {root}", "\n".join(body))


def paired_page(root: str, runs: list[Run], problems: list[str], comparisons: Sequence[Comparison]) -> str:
    """The report's paired comparisons of the tree (computed on asking: they read every run's files)."""
    table = paired_table(runs, comparisons) or '<p class="meta">No two runs of these results share a scored question.</p>'
    problem_lines = "".join(f'<p class="problem">{esc(p)}</p>' for p in problems)
    return page(f"paired comparisons: {root}", f'<p><a href="/">all runs</a> › paired comparisons</p><h1>Paired comparisons: {esc(root)}</h1>{problem_lines}{table}')


def commit_text(run: Run) -> str:
    ident = run.identity
    return (ident.commit or "?") + (f" (judged at {ident.judge_commit})" if ident.judge_commit else "")


def rejudged_html(run: Run) -> str:
    source = run.identity.rejudged_from
    return f'<a href="{href("/run", run=source)}">{esc(source)}</a>' if source else ""


def runs_table(runs: list[Run]) -> str:
    """The runs, one row each, in columns chosen to fit a laptop's width (1,400 px): the accuracies
    beside the run's settings, long names allowed to wrap; when it was created is on its settings page."""
    head = ("<tr><th>run</th><th>dataset</th><th>method</th><th>model</th><th>max steps</th><th>effort</th>"
            "<th>episodes</th><th>failed</th><th>forced</th>"
            '<th title="over the completed episodes the judge scored; failed episodes are never scored and are named beside it; 95% Wilson interval and n">LLM-Acc [95% CI] n</th>'
            '<th title="over the completed episodes; failed episodes are never scored and are named beside it; 95% Wilson interval and n">Contain-Acc [95% CI] n</th>'
            '<th title="the model that judged and the judge preset">judge</th><th>guard rails</th><th title="the code that ran the episodes">commit</th><th></th></tr>')
    rows = []
    for run in runs:
        ident = run.identity
        rejudged = f'<br><span class="meta rejudged">re-judged from {rejudged_html(run)}</span>' if ident.rejudged_from else ""
        rows.append(
            f'<tr class="run" data-run="{esc(run.run_id)}"><td><a href="{href("/", run=run.run_id)}#episodes">{esc(run.run_id)}</a>{rejudged}</td><td>{esc(run.dataset)}</td><td>{breakable(run.method)}</td>'
            f'<td class="name">{esc(run.model)}</td><td class="n">{num(run.max_steps)}</td><td>{esc(run.effort)}</td>'
            f'<td class="n">{len(run.rows)}</td>'
            f'<td class="n">{sum(r["status"] != "ok" for r in run.rows)}</td><td class="n">{sum(bool(r["forced"]) for r in run.rows)}</td>'
            f'<td class="n acc-cell llm-acc">{run_accuracy(run, "llm_acc")}</td><td class="n acc-cell contain-acc">{run_accuracy(run, "contain_acc")}</td>'
            f'<td class="judge name">{esc(ident.judge)}</td><td class="guard-rails name">{breakable(ident.guard_rails)}</td><td class="commit">{esc(commit_text(run))}</td>'
            f'<td class="run-links">{run_links(run)}</td></tr>'
        )
    return f'<div class="wide"><table class="runs">{head}{"".join(rows)}</table></div>'


def breakable(text: Any) -> str:
    """Escaped text that may wrap after each underscore (setting names are long single words)."""
    return esc(text).replace("_", "_<wbr>")


def run_links(run: Run) -> str:
    return (f'<a href="{href("/run", run=run.run_id)}">figures</a> · <a href="{href("/settings", run=run.run_id)}">settings</a>'
            f' · <a href="{href("/report", run=run.run_id)}">report</a>')


def paired_table(runs: list[Run], found: Sequence[Comparison]) -> str:
    """The report's paired comparisons (arag.report.paired: the same pairs, A and B, and Δ = A − B),
    each run named by its id and label; empty when no two runs are compared."""
    by_id = {r.run_id: r for r in runs}

    def named(run_id: str) -> str:
        run = by_id.get(run_id)
        return f'<a href="{href("/", run=run_id)}#episodes">{esc(run_id)}</a>' + (f'<br><span class="meta">{esc(run.label)}</span>' if run else "")

    rows = []
    for c in found:
        cells = paired_cells(c.result)
        verdict = "noise" if c.result.within_noise else "differs"
        rows.append(
            f'<tr class="paired" data-a="{esc(c.a.run_id)}" data-b="{esc(c.b.run_id)}" data-metric="{esc(c.metric)}"><td>{esc(PAIR_KINDS.get(c.table, c.table))}</td><td>{esc(c.a.dataset)}</td>'
            f'<td>{named(c.a.run_id)}</td><td>{named(c.b.run_id)}</td><td>{esc(c.differs)}</td><td>{esc(c.metric)}</td>'
            + "".join(f'<td class="n">{esc(x)}</td>' for x in cells[:-1]) + f'<td class="verdict {verdict}">{esc(cells[-1])}</td></tr>'
        )
    if not rows:
        return ""
    head = "<tr><th>compared</th><th>dataset</th><th>A</th><th>B</th><th>differs in</th><th>metric</th>" + "".join(f"<th>{esc(h)}</th>" for h in PAIRED_HEADER) + "</tr>"
    note = (f'<p class="meta">On the questions both runs scored: {esc(DELTA)} in points, its paired bootstrap 95% interval (seeded) and the exact McNemar p; '
            f'"{WITHIN_NOISE}": p ≥ 0.05 or an interval that holds 0. Across methods (the paper\'s Tables 1 and 2) A is the A-RAG method under test and B the '
            "baseline or ablation; within one method A is the smaller setting or the earlier run, B the other.</p>")
    return f'<h2 id="paired">Paired comparisons ({len(rows)})</h2>{note}<div class="wide"><table>{head}{"".join(rows)}</table></div>'


def _select(name: str, label: str, options: Iterable[tuple[str, str]], current: str) -> str:
    opts = "".join(f'<option value="{esc(v)}"{" selected" if v == current else ""}>{esc(t)}</option>' for v, t in [("", "all"), *options])
    return f'<label>{esc(label)}<select name="{name}">{opts}</select></label>'


FILTER_LABELS = {"outcome": "outcome", "forced": "forced answer", "evidence": "gold evidence", "tool_errors": "tool errors", "repeated": "repeated calls", "gold_wrong": "diagnosis"}


def filter_form(runs: list[Run], f: dict[str, str]) -> str:
    kept = "".join(f'<input type="hidden" name="{k}" value="{esc(f[k])}">' for k in ("sort", "order") if f[k])
    return (
        '<form class="filters" method="get" action="/#episodes">'
        + _select("run", "run", [(r.run_id, f"{r.run_id} · {r.label}") for r in runs], f["run"])
        + _select("dataset", "dataset", [(d, d) for d in sorted({r.dataset for r in runs})], f["dataset"])
        + _select("method", "method", [(m, m) for m in sorted({r.method for r in runs})], f["method"])
        + "".join(_select(name, FILTER_LABELS[name], choices.items(), f[name]) for name, choices in CHOICES.items())
        + f'<label>text in question, prediction or trajectory<input name="q" value="{esc(f["q"])}" size="28"></label>'
        + f'{kept}<button type="submit">filter</button> <a href="/">clear</a></form>'
    )


# The episode table's columns: (heading, sort key or None).
EPISODE_COLUMNS = (
    ("run", "run"), ("question", "question"), ("gold", None), ("prediction", None), ("outcome", "outcome"), ("steps", "steps"),
    ("tokens in / out", "tokens"), ("retrieved tokens", "retrieved"), ("gold seen", "seen"), ("gold read", "read"),
    ("tool errors", "errors"), ("repeated", "repeated"), ("s", "seconds"), ("", None),
)  # fmt: skip


def sort_heading(label: str, key: str | None, f: dict[str, str]) -> str:
    """A column heading; a sortable one links to the list sorted by it (again: the other way)."""
    if key is None:
        return f"<th>{esc(label)}</th>"
    current = f.get("sort") == key
    order = "desc" if current and f.get("order") != "desc" else "asc"
    arrow = (" ▼" if f.get("order") == "desc" else " ▲") if current else ""
    aria = f' aria-sort="{"descending" if f.get("order") == "desc" else "ascending"}"' if current else ""
    return f'<th data-sort="{key}"{aria}><a href="{href("/", **{**f, "sort": key, "order": order})}#episodes">{esc(label)}</a>{arrow}</th>'


def episodes_table(shown: list[tuple[Run, dict[str, Any]]], f: dict[str, str]) -> str:
    head = "<tr>" + "".join(sort_heading(label, key, f) for label, key in EPISODE_COLUMNS) + "</tr>"
    rows = []
    for run, r in shown:
        marks = " " + badge("forced", f"forced: {r['forced_reason']}") if r.get("forced") else ""
        if gold_seen_but_wrong(r):
            marks += " " + badge("gold-wrong", "gold seen but wrong")
        answer = esc(r["prediction"]) if r["status"] == "ok" else f'<span class="meta">{esc(r["failure"])}</span>'
        # None: a row stored without a trajectory, whose tool errors and repeats were never counted
        errors, repeated = (("n/a" if r.get(k) is None else r[k]) for k in ("unusable_results", "repeated"))
        rows.append(
            f'<tr class="episode" data-run="{esc(run.run_id)}" data-q="{esc(r["question_id"])}"><td>{esc(run.label)}<br><span class="meta">{esc(run.run_id)}</span></td>'
            f'<td><a href="{href("/episode", run=run.run_id, q=r["question_id"])}">{esc(r["question"])}</a><br><span class="meta">{esc(r["question_id"])}</span></td>'
            f'<td>{esc(" | ".join(r["gold_answers"] or []))}</td><td>{answer}</td><td>{outcome_badge(r)}{marks}</td>'
            f'<td class="n steps">{num(r["steps"])}</td><td class="n">{num(r["prompt_tokens"])} / {num(r["completion_tokens"])}</td><td class="n retrieved">{num(r.get("retrieved_tokens"))}</td>'
            f'<td class="n seen">{pct(r.get("evidence_recall_seen"))}</td><td class="n read">{pct(r.get("evidence_recall_read"))}</td>'
            f'<td class="n errors{" has-errors" if errors not in (0, "n/a") else ""}">{errors}</td><td class="n repeated{" has-repeated" if repeated not in (0, "n/a") else ""}">{repeated}</td>'
            f'<td class="n">{num(r["wall_s"], 1)}</td>'
            f'<td><a href="{href("/compare", dataset=run.dataset, q=r["question_id"])}">across runs</a></td></tr>'
        )
    return f'<div class="wide"><table class="episodes">{head}{"".join(rows)}</table></div>'


# ---- one episode ------------------------------------------------------------------------------------
def mark_ids(text: str, ids: Iterable[str]) -> str:
    """The escaped text with every occurrence of the given chunk ids highlighted."""
    out = esc(text)
    escaped = sorted({esc(i) for i in ids if i}, key=len, reverse=True)
    if not escaped:
        return out
    pattern = re.compile(r"(?<![\w#])(" + "|".join(re.escape(i) for i in escaped) + r")(?![\w#])")
    return pattern.sub(r'<mark class="gold">\1</mark>', out)


def chunk_chips(call: dict[str, Any], gold: dict[str, list[str]], titles: dict[str, str]) -> str:
    chips = []
    for cid in call.get("chunk_ids") or []:
        if cid in gold:
            chips.append(f'<span class="chunk gold" title="{esc(titles.get(cid))}">★ {esc(cid)} · gold: {esc("; ".join(gold[cid]))}</span>')
        else:
            chips.append(f'<span class="chunk" title="{esc(titles.get(cid))}">{esc(cid)}</span>')
    return "".join(chips)


def call_marks(call: dict[str, Any], failure: str | None, repeated: bool) -> tuple[str, str]:
    """The CSS classes and labels that mark a tool call whose result the model could not use (its
    failure kind), one that named ids the index does not hold, and a call identical to an earlier
    one of the episode (`failure` and `repeated`: the call's in the episode's facts, arag.evaluation.episode_facts)."""
    unknown = unknown_ids_in(call)
    classes = (" unusable" if failure else "") + (" unknown-ids" if unknown else "") + (" repeated" if repeated else "")
    labels = (f'<span class="call-label unusable">tool error: {esc(failure.replace("_", " "))}</span>' if failure else "")
    if unknown and failure != "unknown_ids":
        labels += f'<span class="call-label unusable">{unknown} unknown id{"s" if unknown != 1 else ""}</span>'
    labels += '<span class="call-label repeated">repeated call</span>' if repeated else ""
    return classes, labels


def result_html(text: str, gold: Iterable[str]) -> str:
    """A tool result as the model saw it: gold ids marked, the line naming unknown ids marked as an error."""
    out = mark_ids(text, gold)
    return UNKNOWN_LINE.sub(lambda m: f'<span class="error-line">{m.group(0)}</span>', out)


UNKNOWN_LINE = re.compile(r"^Unknown chunk ids? \(not in this index\):.*$", re.MULTILINE)


def gold_refs_note(named: list[str], gold_refs: dict[str, list[str]]) -> str:
    """The reference ids of gold documents a call's result is about (document tools)."""
    if not named:
        return ""
    marks = ", ".join(f'<mark class="gold">{esc(r)}</mark> ({esc("; ".join(gold_refs[r]))})' for r in named)
    return f'<div class="meta gold-refs">★ gold document{"s" if len(named) != 1 else ""}: {marks}</div>'


def tool_call_html(call: dict[str, Any], gold: dict[str, list[str]], titles: dict[str, str], full_text: bool, failure: str | None = None, repeated: bool = False,
                   gold_refs: dict[str, list[str]] | None = None, same_as: str | None = None) -> str:
    """A tool call, its result as the model saw it; `same_as`: where an identical result was shown
    before in the episode (its result then folded, one click away, with that note)."""
    name = str(call.get("name"))
    ids = call.get("chunk_ids") or []
    level = "read (whole chunks)" if shows_full_text(name, full_text) else "seen (snippets)"
    unknown = unknown_ids_in(call)
    meta = f"{len(ids)} chunk{'s' if len(ids) != 1 else ''}, {level}{f' · {unknown} unknown id' + ('s' if unknown != 1 else '') if unknown else ''} · {num(call.get('retrieved_tokens'))} retrieved tokens · {num(call.get('latency_s'), 3)} s"
    error = f'<p class="problem">error: {esc(call["error"])}</p>' if call.get("error") else ""
    classes, labels = call_marks(call, failure, repeated)
    refs = gold_refs or {}
    gold_here = [r for r in call.get("ref_ids") or [] if r in refs] if ids else []  # a summarize names refs but shows none
    ref_note = gold_refs_note(gold_here, refs)
    return (
        f'<div class="event tool-call{classes}" data-tool="{esc(name)}"><h3>tool call: <code>{esc(name)}</code>{labels}</h3>'
        f'<pre class="arguments">{esc(as_json(call.get("arguments")))}</pre>{error}'
        f'<div class="meta">{meta}</div><div>{chunk_chips(call, gold, titles)}</div>{ref_note}'
        + (f'<details class="folded"><summary>result shown to the model: identical to {esc(same_as)} (folded)</summary>' if same_as else '<details open><summary>result shown to the model</summary>')
        + f'<pre class="result">{result_html(call.get("text") or "", [*gold, *refs])}</pre></details></div>'
    )


def model_call_html(call: dict[str, Any], forced_reason: str | None) -> str:
    title = "model reply"
    if call.get("final"):
        title = f"forced answer ({forced_reason})" if forced_reason else "answer call"
    meta = " · ".join(
        f"{label} {num(call.get(key))}"
        for label, key in (("prompt tokens", "prompt_tokens"), ("completion", "completion_tokens"), ("reasoning", "reasoning_tokens"), ("attempts", "attempts"), ("finish", "finish_reason"))
        if call.get(key) is not None
    ) + f" · {num(call.get('latency_s'), 3)} s"
    error = f'<p class="problem">error: {esc(call["error"])}</p>' if call.get("error") else ""
    forced = " forced" if call.get("final") and forced_reason else ""
    return f'<div class="event model-call{forced}"><h3>{esc(title)}</h3><div class="meta">{meta}</div>{error}<pre class="reply">{esc(call.get("raw"))}</pre></div>'


def guard_rail_html(event: str) -> str:
    return f'<div class="event guard-rail"><h3>guard rail</h3>{esc(event)}</div>'


EVENT_STEP = re.compile(r"^step (\d+):")


def steps_html(t: dict[str, Any], facts: EpisodeFacts, gold: dict[str, list[str]], titles: dict[str, str], gold_refs: dict[str, list[str]]) -> str:
    """Each step's model calls, guard-rail events and tool calls, in that order."""
    full_text = bool(((t.get("agent") or {}).get("method") or {}).get("full_text"))
    by_step: dict[int, list[str]] = {}
    loose: list[str] = []
    for call in t.get("model_calls") or []:
        by_step.setdefault(int(call.get("step") or 0), []).append(model_call_html(call, t.get("forced_reason") if t.get("forced") else None))
    for event in t.get("guard_rail_events") or []:
        m = EVENT_STEP.match(str(event))
        (by_step.setdefault(int(m.group(1)), []) if m else loose).append(guard_rail_html(str(event)))
    first_shown: dict[str, str] = {}  # a result's text → where it was first shown
    for call, failure, repeated in zip(stored_calls(t), facts.failures, facts.repeated):
        step, text = int(call.get("step") or 0), call.get("text") or ""
        same_as = first_shown.get(text) if text else None
        first_shown.setdefault(text, f"the result of step {step}'s {call.get('name')}")
        by_step.setdefault(step, []).append(tool_call_html(call, gold, titles, full_text, failure, repeated, gold_refs, same_as))
    out = [f'<section class="step" id="step-{s}"><h2>Step {s}{" (before the first model call)" if s == 0 else ""}</h2>{"".join(events)}</section>' for s, events in sorted(by_step.items())]
    return "".join(out + loose)


def tool_errors_text(facts: EpisodeFacts) -> str:
    """An episode's tool errors by kind and its repeated calls (arag.evaluation.episode_facts: counted
    in its trajectory, so runs that predate the row's counts show them too)."""
    if not facts.counted:
        return "n/a (no trajectory) · n/a"
    kinds = {k.replace("_", " "): n for k, n in (facts.tool_error_kinds or {}).items()}
    detail = f" ({', '.join(f'{k} {v}' for k, v in kinds.items())})" if kinds else ""
    errors = f'<span class="problem">{facts.tool_errors}{detail}</span>' if kinds else "0"
    return f"{errors} · {facts.repeated_calls}"


def verdict_html(row: dict[str, Any]) -> str:
    status = row.get("judge_status")
    if row.get("status") != "ok":
        text = "no answer: not judged"
    elif row.get("llm_acc") is None:
        text = f"no verdict ({status or 'judge off'})"
    else:
        text = f"{'correct' if row['llm_acc'] >= 0.5 else 'incorrect'} ({status})"
    reply = f'<pre class="judge-reply">{esc(row.get("judge_reply"))}</pre>' if row.get("judge_reply") else ""
    error = f'<p class="problem">judge error: {esc(row.get("judge_error"))}</p>' if row.get("judge_error") else ""
    return f'<div id="verdict">{outcome_badge(row)} judge: {esc(text)} · {num(row.get("judge_s"), 2)} s{error}{reply}</div>'


def episode_page(run: Run, row: dict[str, Any], t: dict[str, Any], titles: dict[str, str], titles_note: str) -> str:
    supporting = row.get("supporting_titles") or []
    facts = row_facts(row, t)
    gold, gold_refs = gold_marks(t, titles, supporting)
    forced = badge("forced", f"forced: {row.get('forced_reason')}") if row.get("forced") else ""
    marked = "gold chunks marked ★" + (", gold documents' reference ids highlighted" if gold_refs else "")
    answer = [
        ("question", esc(row["question"])),
        ("gold answers", esc(" | ".join(row.get("gold_answers") or []))),
        ("prediction", f'<strong id="prediction">{esc(row.get("prediction"))}</strong> {forced}' + (" " + badge("unjudged", "cut off at the reply limit") if row.get("answer_cut_off") else "")),
        ("failure", f'<span class="problem">{esc(row.get("failure"))}</span>' if row.get("failure") else ""),
        ("verdict", verdict_html(row) + (" " + badge("gold-wrong", "gold seen but wrong") if gold_seen_but_wrong(row) else "")),
        ("Contain-Acc · EM · F1", f"{num(row.get('contain_acc'))} · {num(row.get('exact_match'))} · {num(row.get('f1'))}"),
        ("supporting titles", esc("; ".join(supporting))),
        ("evidence", f'<span id="evidence">{facts.evidence_seen} of {facts.evidence_supporting} seen, {facts.evidence_read} read in full · {marked} · {esc(titles_note)}</span>' if supporting else ""),
    ]
    cost = [
        ("steps · model calls · tool calls", f"{num(row.get('steps'))} · {num(row.get('model_calls'))} · {num(row.get('tool_calls'))}"),
        ("tokens: prompt · completion · reasoning · retrieved", f"{num(row.get('prompt_tokens'))} · {num(row.get('completion_tokens'))} · {num(row.get('reasoning_tokens'))} · {num(row.get('retrieved_tokens'))}"),
        ("time s: wall · model · tools · judge", f"{num(row.get('wall_s'))} · {num(row.get('llm_s'))} · {num(row.get('tool_s'))} · {num(row.get('judge_s'))}"),
        ("invalid replies · refused calls · cut results", f"{num(row.get('invalid_replies'))} · {num(row.get('refused_calls'))} · {num(row.get('truncated_observations'))}"),
        ("tool errors · repeated calls", f'<span id="tool-errors">{tool_errors_text(facts)}</span>'),
        ("context warnings · forced summaries", f"{num(row.get('context_warnings'))} · {num(row.get('forced_summaries'))}" if (row.get("context_warnings") or row.get("forced_summaries")) else ""),
        ("run", f'<a href="{href("/", run=run.run_id)}#episodes">{esc(run.run_id)}</a> · {esc(run.label)} · {esc(row.get("backend"))} / {esc(row.get("protocol"))} · {run_links(run)}'),
        ("judge · commit", f"{esc(run.identity.judge)} · {esc(commit_text(run))}" + (f" · re-judged from {rejudged_html(run)}" if run.identity.rejudged_from else "")),
        ("guard rails", esc(json.dumps(t.get("guard_rails") or {}, ensure_ascii=False))),
        ("attempt · worker · finished", f"{num(row.get('attempt'))} · {esc(row.get('worker'))} · {esc(row.get('finished_at'))}"),
    ]
    extra = []
    if t.get("error"):
        extra.append(f'<p class="problem">{esc(t["error"])}</p>')
    if t.get("citations"):
        extra.append(f"<h2>Citations</h2><pre>{mark_ids(as_json(t['citations'], 1), gold_refs)}</pre>")
    if t.get("trace"):
        extra.append(f"<details><summary>the method's own record (trace)</summary><pre>{esc(as_json(t['trace'], 1))}</pre></details>")
    if t.get("messages"):
        extra.append(f"<details><summary>the whole conversation ({len(t['messages'])} messages)</summary><pre>{mark_ids(as_json(t['messages'], 1), [*gold, *gold_refs])}</pre></details>")
    body = (
        f'<p><a href="/">all runs</a> › <a href="{href("/", run=run.run_id)}#episodes">{esc(run.label)}</a> › {esc(row["question_id"])}'
        f' · <a href="{href("/compare", dataset=run.dataset, q=row["question_id"])}">this question across runs</a></p>'
        f"<h1>{esc(row['question'])}</h1><div class=\"box\">{kv(answer)}</div><div class=\"box\">{kv(cost)}</div>"
        f"<h2>Trajectory</h2>{steps_html(t, facts, gold, titles, gold_refs)}{''.join(extra)}"
    )
    return page(f"{row['question_id']} · {run.label}", body)


def identity_kv(run: Run) -> str:
    ident = run.identity
    return kv([("judge", f'<span class="judge">{esc(ident.judge)}</span>'), ("re-judged from", rejudged_html(run)),
               ("guard rails", f'<span class="guard-rails">{esc(ident.guard_rails)}</span>'), ("commit", f'<span class="commit">{esc(commit_text(run))}</span>')])


# ---- one question across runs -----------------------------------------------------------------------
def verdict_beside_contain(row: dict[str, Any]) -> str:
    """The judge's verdict beside Contain-Acc (is a gold answer in the prediction), marked where they
    disagree: a judge that calls "America" wrong for "American" stands out."""
    if row.get("status") != "ok":
        return '<span class="verdict-contain">failed: not scored</span>'
    llm, contain = row.get("llm_acc"), row.get("contain_acc")
    verdict = "no verdict" if llm is None else "correct" if llm >= 0.5 else "incorrect"
    disagree = llm is not None and contain is not None and (llm >= 0.5) != (contain >= 0.5)
    note = " · they disagree" if disagree else ""
    return f'<span class="verdict-contain{" disagree" if disagree else ""}">judge: {verdict} · Contain-Acc {num(contain, 0)}{note}</span>'


def compare_page(dataset: str, question_id: str, found: list[tuple[Run, dict[str, Any], dict[str, Any], dict[str, str]]]) -> str:
    first = found[0][1]
    columns = []
    for run, row, t, titles in found:
        gold, gold_refs = gold_marks(t, titles, row.get("supporting_titles") or [])
        calls = []
        counted = row_facts(row, t)
        for call, failure, repeated in zip(stored_calls(t), counted.failures, counted.repeated):
            classes, labels = call_marks(call, failure, repeated)
            refs = [r for r in call.get("ref_ids") or [] if r in gold_refs] if call.get("chunk_ids") else []
            ref_note = gold_refs_note(refs, gold_refs)
            calls.append(f'<div class="event tool-call{classes}" data-tool="{esc(call.get("name"))}"><span class="meta">step {num(call.get("step"))}</span> <code>{esc(call.get("name"))}</code>{labels} {esc(as_json(call.get("arguments")))}<div>{chunk_chips(call, gold, titles)}</div>{ref_note}</div>')
        forced = " " + badge("forced", f"forced: {row.get('forced_reason')}") if row.get("forced") else ""
        wrong = " " + badge("gold-wrong", "gold seen but wrong") if gold_seen_but_wrong(row) else ""
        facts = kv([
            ("prediction", esc(row.get("prediction")) if row.get("status") == "ok" else f'<span class="problem">{esc(row.get("failure"))}</span>'),
            ("outcome", outcome_badge(row) + forced + wrong),
            ("verdict · Contain-Acc", verdict_beside_contain(row)),
            ("judge's reply", esc(row.get("judge_reply") or row.get("judge_status"))),
            ("steps · tool calls", f"{num(row.get('steps'))} · {counted.tool_calls if counted.recorded else num(row.get('tool_calls'))}"),
            ("tokens in / out", f"{num(row.get('prompt_tokens'))} / {num(row.get('completion_tokens'))}"),
            ("evidence seen / read", f"{pct(counted.evidence_recall_seen)} / {pct(counted.evidence_recall_read)}"),
            ("wall s", num(row.get("wall_s"))),
        ])  # fmt: skip
        whole_run = f'<div class="run-accuracy">run LLM-Acc {run_accuracy(run, "llm_acc")} · Contain-Acc {run_accuracy(run, "contain_acc")}</div>'
        columns.append(
            f'<div class="box run-column" data-run="{esc(run.run_id)}"><h2><a href="{href("/episode", run=run.run_id, q=question_id)}">{esc(run.label)}</a></h2>'
            f'<div class="meta">{esc(run.run_id)} · {run_links(run)}</div><div class="run-identity">{identity_kv(run)}</div>{whole_run}{facts}{"".join(calls)}</div>'
        )
    body = (
        f'<p><a href="/">all runs</a> › {esc(dataset)} › {esc(question_id)}</p><h1>{esc(first["question"])}</h1>'
        f'<div class="box">{kv([("gold answers", esc(" | ".join(first.get("gold_answers") or []))), ("supporting titles", esc("; ".join(first.get("supporting_titles") or []))), ("runs", str(len(found)))])}</div>'
        f'<div class="columns">{"".join(columns)}</div>'
    )
    return page(f"{question_id} across runs", body)


# ---- one run: figures, settings, report -------------------------------------------------------------
def run_page(run: Run, report: Any) -> str:
    """A run's figures; `report`: the report nearest it (a path), or None."""
    rows = run.rows
    causes = failure_causes(run)
    acc = []
    for label, col in (("LLM-Acc", "llm_acc"), ("Contain-Acc", "contain_acc")):
        values = list(scores(run, col).values())
        if values:
            p = Proportion(sum(values), len(values))
            acc.append(f'<tr class="figure accuracy" data-metric="{col}"><th>{label}</th><td>{figures.interval_bar(p, label)}</td><td class="n value" data-metric="{col}">{esc(percent_text(p))}</td></tr>')
        else:
            acc.append(f'<tr class="figure accuracy" data-metric="{col}"><th>{label}</th><td></td><td class="n value" data-metric="{col}">{esc(failures_text(len(causes), causes) or "no scored question")}</td></tr>')
    dists = []
    for label, col in (("steps", "steps"), ("retrieved tokens", "retrieved_tokens")):
        values = figures.column(rows, col)
        m = figures.mean(values)
        dists.append(
            f'<tr class="figure distribution" data-metric="{col}"><th>{label} per answered episode</th><td>{figures.histogram(values, label, whole=True)}</td>'
            f'<td class="n value" data-metric="{col}">{esc("mean " + m.text(1)) if m else "no answered episode"}</td></tr>'
        )
    mix = figures.tool_mix(rows)
    answered = sum(r["status"] == "ok" for r in rows)
    mix_rows = "".join(f'<tr class="tool" data-tool="{esc(tool)}"><th><code>{esc(tool)}</code></th><td>{figures.share_bar(share)}</td><td class="n">{calls} calls · {100 * share:.1f}%'
                       f'{f" · {calls / answered:.2f} per answered episode" if answered else ""}</td></tr>' for tool, calls, share in mix)
    # A row stored without a trajectory leaves its run's tool errors and repeats uncounted, not 0.
    counted = all(r.get("unusable_results") is not None for r in rows)
    errors = sum(r["unusable_results"] for r in rows) if counted else "n/a"
    repeated = sum(r["repeated"] for r in rows) if counted else "n/a"
    kinds = figures.kind_totals(rows) if counted else {}
    kinds_text = " (" + ", ".join(f"{kind.replace('_', ' ')} {n}" for kind, n in kinds.items()) + ")" if kinds else ""
    total_calls = sum(c for _, c, _ in mix)
    report_link = f'<a href="{href("/report", run=run.run_id)}">its report</a>' if report else f'no report yet (<code>python -m pipelines.report results.path={esc(run.path.parent)}</code>)'
    body = (
        f'<p><a href="/">all runs</a> › {esc(run.run_id)}</p><h1>{esc(run.label)}</h1>'
        f'<div class="box">{kv([("run", esc(run.run_id)), ("dataset", esc(run.dataset)), ("episodes", f"{len(rows)} ({answered} answered, {len(rows) - answered} failed)")])}{identity_kv(run)}'
        f'<p><a href="{href("/", run=run.run_id)}#episodes">its episodes</a> · <a href="{href("/settings", run=run.run_id)}">its settings</a> · {report_link}</p></div>'
        f'<h2>Accuracy</h2><p class="meta">95% Wilson interval [low, high] and n, the questions it averages over: the completed episodes (a failed episode has no result and is never scored; {len(causes)} failed).</p><table class="figures">{"".join(acc)}</table>'
        f'<h2>Steps and retrieved tokens</h2><p class="meta">Mean with its 95% bootstrap interval (10,000 seeded resamples) and n; bars: how many episodes had each value.</p><table class="figures">{"".join(dists)}</table>'
        f'<h2>Tool mix</h2><p class="meta"><span id="tool-calls">{total_calls}</span> tool calls; <span class="{"problem" if errors not in (0, "n/a") else ""}"><span id="unusable-calls">{errors}</span> with a result the model could not use{esc(kinds_text)}</span>; <span id="repeated-calls">{repeated}</span> repeated.</p><table class="figures tool-mix">{mix_rows}</table>'
    )
    return page(f"{run.run_id} · {run.label}", body)


def settings_page(run: Run, invocations: list[dict[str, Any]]) -> str:
    runs_of = "".join(f"<li><pre>{esc(json.dumps(i, indent=1, ensure_ascii=False, default=str))}</pre></li>" for i in invocations)
    body = (
        f'<p><a href="/">all runs</a> › <a href="{href("/run", run=run.run_id)}">{esc(run.run_id)}</a> › settings</p><h1>Settings of {esc(run.label)}</h1>'
        f'<div class="box">{identity_kv(run)}</div><h2>{esc(RUN_INFO)}</h2><pre id="run-json">{esc(json.dumps(run.info, indent=1, ensure_ascii=False, default=str))}</pre>'
        f'<h2>Commands that ran it ({len(invocations)})</h2><ol>{runs_of}</ol>'
    )
    return page(f"settings of {run.run_id}", body)


def report_page(run: Run, report_md: str, where: str, images: list[str]) -> str:
    shots = "".join(f'<figure><img src="{href("/report/file", run=run.run_id, name=name)}" alt="{esc(name)}" style="max-width:100%"><figcaption>{esc(name)}</figcaption></figure>' for name in images)
    body = (
        f'<p><a href="/">all runs</a> › <a href="{href("/run", run=run.run_id)}">{esc(run.run_id)}</a> › report</p><h1>Report holding {esc(run.run_id)}</h1>'
        f'<p class="meta">{esc(where)} (Markdown as written)</p><pre id="report">{esc(report_md)}</pre>{shots}'
    )
    return page(f"report of {run.run_id}", body)


def error_page(status: int, message: str) -> str:
    return page(f"error {status}", f'<p><a href="/">all runs</a></p><h1>Error {status}</h1><p class="problem">{esc(message)}</p>')
