"""The differential run's diff: our A-RAG episodes beside the authors' (github.com/Ayanami0730/arag,
a44de6b) on the same questions, chunks and stand-in model (tests/support/parity_model.py), compared
per question and per step, every difference classified by kind (the kinds of KINDS; the shared
vocabulary with the protocol card). It runs nothing: benchmarks/official_side_by_side.py feeds it
both sides' records and tests/evaluation/test_official_parity.py checks what it finds.

Each side's episode is first put in one shape (`Episode`): its tool calls in order (step, tool under
our name, arguments, the result text as the model saw it, retrieved tokens), its steps, whether and
why its answer was forced, its answer, Contain-Acc and LLM-Acc. The diff walks both call lists
together; the first difference that can change what the model decides next (results whose chunks,
sentences or text differ, a call carried out on one side only) becomes the question's root kind, and
every later difference (other calls, steps, answers, scores) is counted under it as its consequence.
A difference no kind explains is `unexplained` (the parity test fails on it).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

# ---- the kinds ----------------------------------------------------------------------------------
CHOICE = "a choice of ours, documented"
FIXED = "a defect, fixed"
NEW = "not classified"


@dataclass(frozen=True)
class Kind:
    cause: str
    resolution: str  # CHOICE or FIXED
    where: str  # the docs section or the fix


DOC = "docs/agents.md, Differences from the authors' code"
KINDS: dict[str, Kind] = {
    "tool_calls_per_step": Kind("the paper (§3.3) runs one tool call per step, their loop runs every call of a reply; ours answers a second call 'not run'", CHOICE, DOC),
    "chunk_read_header": Kind("chunk_read heads a chunk '[chunk_id: X | previous | next]' and says 'Already read' in its own words; theirs '[Chunk X]' between rules", CHOICE, DOC),
    "sentence_splitter": Kind("sentences come from sentencex with end punctuation kept; theirs split at [.!?\\n] and drop it (and semantic pieces of <= 10 characters), so snippets, semantic rankings and their tokens differ", CHOICE, DOC),
    "tool_result_cut": Kind("a result that would cross the budget by more than 1,536 tokens is cut, with a note; theirs are never cut", CHOICE, DOC),
    "budget_accounting": Kind("the budget counts the endpoint's prompt + completion tokens; theirs o200k tokens of message text with the system prompt twice, so the budget forces the answer at another step", CHOICE, DOC),
    "budget_not_reached_after_cut": Kind("a result cut to fit the budget left the conversation under it (the cut keeps 10% slack), so the loop went on for more steps where theirs, past the budget, forces the answer",
                                         FIXED, "arag/agent/loop.py: a cut result reaches the budget; tests/agent/test_loop.py::test_a_result_cut_at_the_budget_forces_the_answer_next"),
    "retrieved_tokens_tokenizer": Kind("retrieved tokens of the same text counted differently", CHOICE, DOC),
    "keyword_snippet_cap": Kind("a keyword hit shows another number of matching sentences", CHOICE, DOC),
    # The texts every request carries, compared once per run (static_differences).
    "system_prompt_rules": Kind("our own wording of the paper's prompt, with added rules (one tool per step, the chunk-id form); compared by a checklist of rules", CHOICE, DOC),
    "tool_descriptions": Kind("our own wording of the tools' descriptions and parameters, with added sentences", CHOICE, DOC),
    "forced_answer_prompt": Kind("our own wording of the forced-answer request", CHOICE, DOC),
    "read_tool_name": Kind("the reading tool is chunk_read (the paper's name); theirs read_chunk", CHOICE, DOC),
    "question_message": Kind("the question is sent as 'Question: <question>'; theirs bare", CHOICE, DOC),
    "request_parameters": Kind("request fields differ (max_completion_tokens and no temperature for GPT-5 models, parallel_tool_calls false; theirs max_tokens, temperature 0, tool_choice auto)", CHOICE, DOC),
}
UNEXPLAINED = "unexplained"

# ---- the results as the model saw them ----------------------------------------------------------
_SEARCH_BLOCK = re.compile(r"^Chunk ID: (?P<id>\S+?)(?: \(Similarity: (?P<score>-?[0-9.]+)\))?(?:, Matched keywords in chunk: |\nMatched: )(?P<body>.*)$", re.S)
_OUR_READ = re.compile(r"^\[chunk_id: (?P<id>[^\s|\]]+)[^\n]*\]\n(?P<text>.*?)(?=\n\n\[chunk_id: |\n\nUnknown chunk id|\n\[Result cut here|\Z)", re.S | re.M)
_THEIR_READ = re.compile(r"^\[Chunk (?P<id>[^\]\n]+)\]\n(?:-{80}\n(?P<text>.*?)\n={80}|\(This chunk has been read before\))", re.S | re.M)
_THEIR_MISSING = re.compile(r"^\[Chunk (?P<id>[^\]\n]+)\] - Not found", re.M)
_OUR_UNKNOWN = re.compile(r"^Unknown chunk ids? \(not in this index\): (?P<ids>\[.*\])", re.M)
CUT_MARK = "[Result cut here"
ALREADY_READ_OURS = "Already read in this episode"
SCORE_TOLERANCE = 0.0015  # the same vectors in float32 on two stacks round the third decimal either way


def snippet_sentences(body: str) -> list[str]:
    body = body.strip()
    if not body.startswith("..."):
        return []
    return [s.strip() for s in body[3:-3].split(" ... ") if s.strip()] if body.endswith("...") else [body[3:].strip()]


def parse_search(text: str) -> list[tuple[str, float | None, list[str]]]:
    """(chunk id, similarity or None, snippet sentences) of each hit of a search result."""
    out = []
    for block in text.split("\n\n"):
        m = _SEARCH_BLOCK.match(block.strip())
        if m:
            out.append((m["id"], float(m["score"]) if m["score"] else None, snippet_sentences(m["body"])))
    return out


def parse_read(text: str) -> tuple[dict[str, str | None], list[str]]:
    """({chunk id: its text, None when read before}, unknown ids) of a read result in either form."""
    chunks: dict[str, str | None] = {}
    for m in _THEIR_READ.finditer(text):
        chunks[m["id"]] = m["text"] if m["text"] is not None else None
    for m in _OUR_READ.finditer(text):
        body = m["text"].strip("\n")
        chunks[m["id"]] = None if body.startswith(ALREADY_READ_OURS) else body
    unknown = [m["id"] for m in _THEIR_MISSING.finditer(text)]
    for m in _OUR_UNKNOWN.finditer(text):
        unknown += json.loads(m["ids"])
    return chunks, unknown


def bare(sentence: str) -> str:
    return sentence.strip().rstrip(".!?").strip()


# ---- one shape for both sides -------------------------------------------------------------------
OUR_NAME = {"read_chunk": "chunk_read"}


@dataclass
class Call:
    step: int
    tool: str  # our name
    arguments: dict[str, Any]
    text: str
    tokens: int


@dataclass
class Episode:
    qid: str
    calls: list[Call]
    steps: int  # model calls that offered tools
    forced: str | None  # None, "token_budget" or "max_steps"
    answer: str | None
    not_run: int = 0  # calls of a reply left unrun (ours: one per step)
    contain: float | None = None
    llm: float | None = None
    error: str | None = None


def our_episode(row: dict[str, Any]) -> Episode:
    """One of our results rows (its `trajectory`: arag.agent.episode.Episode.to_json)."""
    traj = json.loads(row["trajectory"]) if isinstance(row.get("trajectory"), str) else (row.get("trajectory") or {})
    calls = [Call(c["step"], c["name"], c["arguments"] if isinstance(c["arguments"], dict) else {"raw": c["arguments"]}, c.get("text") or "", c.get("retrieved_tokens") or 0)
             for c in traj.get("tool_calls") or []]
    forced = (row.get("forced_reason") or "max_steps") if row.get("forced") else None
    return Episode(row["question_id"], calls, row.get("steps") or 0, forced, row.get("prediction"), row.get("refused_calls") or 0,
                   row.get("contain_acc"), row.get("llm_acc"), row.get("failure") if row.get("status") != "ok" else None)


def message_tokens(text: str) -> int:
    from arag.index.tokens import count_retrieved_tokens

    return count_retrieved_tokens(text)


def their_episode(record: dict[str, Any], system_prompt: str, max_loops: int, token_budget: int) -> Episode:
    """Their predictions.jsonl line. Their batch runner keeps no flag of a forced answer, so it is
    read back the way their loop decides it (src/arag/agent/base.py): after max_loops loops that all
    called tools, or at a loop whose conversation (o200k tokens of the system prompt, counted
    twice, the question, and every message's text) was over the budget."""
    traj = record.get("trajectory") or []
    calls = [Call(t["loop"], OUR_NAME.get(t["tool_name"], t["tool_name"]), t.get("arguments") or {}, t.get("tool_result") or "", t.get("retrieved_tokens") or 0) for t in traj]
    loops = record.get("loops") or 0
    last_call_loop = max((c.step for c in calls), default=0)
    size = 2 * message_tokens(system_prompt) + message_tokens(record.get("question") or "") + sum(message_tokens(c.text) for c in calls)
    forced, steps = None, loops
    if loops == max_loops and last_call_loop == max_loops:
        forced = "max_steps"
    elif calls and last_call_loop < loops and size > token_budget:
        forced, steps = "token_budget", loops - 1  # the loop that found the budget crossed made no model call with tools
    return Episode(str(record.get("qid")), calls, steps, forced, record.get("pred_answer"), 0, None, None, record.get("error"))


# ---- the diff -----------------------------------------------------------------------------------
@dataclass
class Difference:
    step: int | None
    aspect: str  # call, result, tokens, steps, forced, answer, contain_acc, llm_acc, static
    kind: str
    detail: str
    consequence: bool = False  # follows from the question's root difference


@dataclass
class QuestionDiff:
    qid: str
    steps_compared: int
    calls_compared: int
    root: str | None
    differences: list[Difference] = field(default_factory=list)

    def kinds(self) -> set[str]:
        return {d.kind for d in self.differences}

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def compare_search(tool: str, ours: str, theirs: str) -> list[tuple[str, str, bool]]:
    """(kind, detail, moves) of two results of the same search; moves: the model may decide otherwise."""
    o, t = parse_search(ours), parse_search(theirs)
    if not o and not t:
        return [] if ours.strip() == theirs.strip() else [(UNEXPLAINED, f"{tool}: no hits, texts differ: {ours[:60]!r} / {theirs[:60]!r}", True)]
    out: list[tuple[str, str, bool]] = []
    oi, ti = [h[0] for h in o], [h[0] for h in t]
    splitter = "sentence_splitter"
    if oi != ti:
        kind = splitter if tool == "semantic_search" else UNEXPLAINED
        out.append((kind, f"{tool}: chunks {oi} / {ti}", True))
    o_by, t_by = {h[0]: h for h in o}, {h[0]: h for h in t}
    shared = [i for i in oi if i in t_by]
    score_gap = max((abs((o_by[i][1] or 0) - (t_by[i][1] or 0)) for i in shared), default=0.0)
    if score_gap > SCORE_TOLERANCE:
        out.append((splitter if tool == "semantic_search" else UNEXPLAINED, f"{tool}: similarity differs by up to {score_gap:.3f}", True))
    same = sum(o_by[i][2] == t_by[i][2] for i in shared)
    if same < len(shared):
        # Both sides show at most 5 sentences a hit; a count that differs comes from where sentences
        # end (a title with "..." in ours reads as more pieces), so it is the splitter's too.
        bare_same = sum(sorted(map(bare, o_by[i][2])) == sorted(map(bare, t_by[i][2])) for i in shared)
        out.append((splitter, f"{tool}: snippets of {len(shared) - same} of {len(shared)} shared hits differ ({bare_same - same} only by end punctuation)", True))
    return out


def compare_read(ours: str, theirs: str) -> list[tuple[str, str, bool]]:
    o, o_unknown = parse_read(ours)
    t, t_unknown = parse_read(theirs)
    out: list[tuple[str, str, bool]] = []
    cut = CUT_MARK in ours
    if cut:
        kept = [i for i in o if o[i] is not None]
        out.append(("tool_result_cut", f"chunk_read: cut to fit the budget ({len(kept)} of {len(t)} chunks shown, the last one in part)", True))
    texts_differ = [i for i in t if (o.get(i) or "").strip() != (t[i] or "").strip() and not (cut and i not in o)]
    if cut:
        last = next((i for i in reversed(list(o)) if o[i] is not None), None)
        texts_differ = [i for i in texts_differ if i != last]
    unknown_differ = sorted(o_unknown) != sorted(t_unknown) and not cut  # ours names unknown ids last: a cut drops them
    if set(o) - set(t) or unknown_differ or texts_differ:
        out.append((UNEXPLAINED, f"chunk_read: chunks {sorted(o)} / {sorted(t)}, unknown {o_unknown} / {t_unknown}, texts differ for {texts_differ[:5]}", True))
    if ours != theirs:
        out.append(("chunk_read_header", "chunk_read: the same texts under other headers", False))
    return out


def compare_result(tool: str, ours: str, theirs: str) -> list[tuple[str, str, bool]]:
    if tool == "chunk_read":
        return compare_read(ours, theirs)
    return compare_search(tool, ours, theirs)


def compare_tokens(call: Call, theirs: Call, result_kinds: set[str]) -> tuple[str, str] | None:
    if call.tokens == theirs.tokens:
        return None
    detail = f"{call.tool}: retrieved tokens {call.tokens} / {theirs.tokens}"
    for kind in ("tool_result_cut", "sentence_splitter"):
        if kind in result_kinds:
            return kind, detail
    return "retrieved_tokens_tokenizer", detail


def diff_question(ours: Episode, theirs: Episode, golds: list[str]) -> QuestionDiff:
    """Every difference of one question, each with its kind; see the module's docstring."""
    qd = QuestionDiff(ours.qid, steps_compared=min(ours.steps, theirs.steps), calls_compared=0, root=None)
    origin: list[Difference] = []  # the difference that set the root

    def add(step: int | None, aspect: str, kind: str, detail: str, moves: bool = False) -> None:
        d = Difference(step, aspect, kind, detail)
        qd.differences.append(d)
        if moves and qd.root is None:
            qd.root = kind
            origin.append(d)

    if ours.not_run:
        add(None, "call", "tool_calls_per_step", f"{ours.not_run} call(s) of a reply not run (ours); theirs ran every call", moves=True)
    diverged = False
    for a, b in zip(ours.calls, theirs.calls):
        if (a.tool, a.arguments) != (b.tool, b.arguments):
            add(a.step, "call", qd.root or UNEXPLAINED, f"{a.tool}({a.arguments}) / {b.tool}({b.arguments})", moves=True)
            diverged = True
            break
        qd.calls_compared += 1
        if a.step != b.step and qd.root != "tool_calls_per_step":
            add(a.step, "call", UNEXPLAINED, f"{a.tool} at step {a.step} / {b.step}", moves=True)
        found = compare_result(a.tool, a.text, b.text)
        for kind, detail, moves in found:
            add(a.step, "result", kind, detail, moves)
        tok = compare_tokens(a, b, {k for k, _, _ in found})
        if tok:
            add(a.step, "tokens", *tok)
    budget = "token_budget" in (ours.forced, theirs.forced) and qd.root != "tool_calls_per_step"
    if not diverged and len(ours.calls) != len(theirs.calls):
        add(None, "call", "budget_accounting" if budget else qd.root or UNEXPLAINED, f"{len(ours.calls)} / {len(theirs.calls)} calls", moves=True)
    if (ours.forced, ours.steps) != (theirs.forced, theirs.steps):
        kind = "budget_accounting" if budget else qd.root or UNEXPLAINED
        if ours.forced != theirs.forced or ours.forced:
            add(None, "forced", kind, f"forced {ours.forced or 'no'} after {ours.steps} steps / {theirs.forced or 'no'} after {theirs.steps}", moves=True)
        else:
            add(None, "steps", kind, f"{ours.steps} / {theirs.steps} steps", moves=True)
    from arag.evaluation.metrics import contain_acc

    o_contain, t_contain = contain_acc(ours.answer, golds), contain_acc(theirs.answer, golds)
    if (ours.answer or "").strip() != (theirs.answer or "").strip():
        add(None, "answer", qd.root or UNEXPLAINED, f"{(ours.answer or '')[:70]!r} / {(theirs.answer or '')[:70]!r}")
    if o_contain != t_contain:
        add(None, "contain_acc", qd.root or UNEXPLAINED, f"{o_contain} / {t_contain}")
    if ours.llm != theirs.llm:
        add(None, "llm_acc", qd.root or UNEXPLAINED, f"{ours.llm} / {theirs.llm}")
    for d in qd.differences:  # what follows from the root: later calls, steps, answers, scores
        d.consequence = qd.root is not None and d.kind == qd.root and all(d is not o for o in origin) and d.aspect not in ("result", "tokens")
    return qd


def _budget_or(ours: Episode, theirs: Episode, root: str | None = None) -> str:
    if "token_budget" in (ours.forced, theirs.forced):
        return "budget_accounting"
    return root or UNEXPLAINED


# ---- the texts every request carries ------------------------------------------------------------
# The paper's prompt rules (Appendix; their prompts/default.txt), each as words either wording uses.
PROMPT_RULES: list[tuple[str, str]] = [
    ("names the three tools", r"keyword_search.*semantic_search.*(chunk_read|read_chunk)"),
    ("works in rounds: search, read, judge, again", r"(iterativ|rounds)"),
    ("splits a multi-hop question into sub-questions", r"(sub-question)"),
    ("grounds the answer in the retrieved documents", r"(ground|base the answer)"),
    ("cites the supporting chunks", r"cite"),
    ("answers clearly and directly, with evidence", r"direct"),
    ("does not speculate", r"speculat"),
    ("one tool call per step", r"one tool per step"),
    ("states the chunk-id form", r"ids of the form"),
]


def prompt_checklist(ours: str, theirs: str) -> list[dict[str, Any]]:
    flags = re.I | re.S
    return [{"rule": rule, "ours": bool(re.search(p, ours, flags)), "theirs": bool(re.search(p, theirs, flags))} for rule, p in PROMPT_RULES]


def first_agent_request(requests: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((r for r in requests if r.get("tools")), None)


def forced_request(requests: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((r for r in requests if not r.get("tools") and len(r.get("messages") or []) > 2 and (r["messages"][-1].get("role") == "user")
                 and not str(r["messages"][-1].get("content", "")).startswith("Predicted answer")), None)


def static_differences(ours: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> list[Difference]:
    """The differences of the texts and fields every request carries, from each side's requests to
    the stand-in: the system prompt (by the rules checklist), the tools' names and descriptions,
    the question's message, the forced-answer request and the request fields."""
    o, t = first_agent_request(ours), first_agent_request(theirs)
    if o is None or t is None:
        return []
    out: list[Difference] = []
    o_sys, t_sys = o["messages"][0].get("content") or "", t["messages"][0].get("content") or ""
    rules = prompt_checklist(o_sys, t_sys)
    only = [f"{r['rule']} ({'ours' if r['ours'] else 'theirs'} only)" for r in rules if r["ours"] != r["theirs"]]
    if o_sys != t_sys:
        out.append(Difference(None, "static", "system_prompt_rules", "own wording; rules " + ("; ".join(only) if only else "all shared")))
    o_tools = {x["function"]["name"]: x["function"] for x in o["tools"]}
    t_tools = {OUR_NAME.get(x["function"]["name"], x["function"]["name"]): x["function"] for x in t["tools"]}
    if set(o_tools) != {x["function"]["name"] for x in t["tools"]}:
        out.append(Difference(None, "static", "read_tool_name", f"tools {sorted(o_tools)} / {sorted(x['function']['name'] for x in t['tools'])}"))
    differ = [n for n in o_tools if n in t_tools and (o_tools[n].get("description"), o_tools[n].get("parameters")) != (t_tools[n].get("description"), t_tools[n].get("parameters"))]
    if differ:
        out.append(Difference(None, "static", "tool_descriptions", f"descriptions or parameters of {', '.join(differ)}"))
    o_q, t_q = o["messages"][1].get("content"), t["messages"][1].get("content")
    if o_q != t_q:
        out.append(Difference(None, "static", "question_message", f"{str(o_q)[:40]!r} / {str(t_q)[:40]!r}"))
    of, tf = forced_request(ours), forced_request(theirs)
    if of and tf and of["messages"][-1].get("content") != tf["messages"][-1].get("content"):
        out.append(Difference(None, "static", "forced_answer_prompt", "own wording"))
    fields = ("max_tokens", "max_completion_tokens", "temperature", "tool_choice", "parallel_tool_calls", "reasoning_effort")
    o_f, t_f = {k: o.get(k) for k in fields if k in o}, {k: t.get(k) for k in fields if k in t}
    if o_f != t_f:
        out.append(Difference(None, "static", "request_parameters", f"{o_f} / {t_f}"))
    return out


# ---- the tables ---------------------------------------------------------------------------------
def kind_table(diffs: list[QuestionDiff], static: list[Difference]) -> list[dict[str, Any]]:
    """One row per kind found: questions it appears in, differences (per step, consequences apart),
    cause and resolution."""
    rows: dict[str, dict[str, Any]] = {}
    for d in static:
        rows.setdefault(d.kind, {"kind": d.kind, "questions": "all (every request)", "differences": 0, "of which consequences": 0})["differences"] += 1
    for qd in diffs:
        for kind in sorted(qd.kinds()):
            row = rows.setdefault(kind, {"kind": kind, "questions": 0, "differences": 0, "of which consequences": 0})
            row["questions"] += 1
        for d in qd.differences:
            rows[d.kind]["differences"] += 1
            rows[d.kind]["of which consequences"] += int(d.consequence)
    for row in rows.values():
        k = KINDS.get(row["kind"])
        row["cause"] = k.cause if k else "no known kind explains it"
        row["resolution"] = f"{k.resolution} ({k.where})" if k else NEW
    return list(rows.values())


def summary(diffs: list[QuestionDiff], ours: dict[str, Episode], theirs: dict[str, Episode]) -> dict[str, Any]:
    n = len(diffs)
    return {
        "questions": n, "steps compared": sum(d.steps_compared for d in diffs), "calls compared": sum(d.calls_compared for d in diffs),
        "questions with no difference": sum(not d.differences for d in diffs),
        "same answer": sum((ours[d.qid].answer or "").strip() == (theirs[d.qid].answer or "").strip() for d in diffs),
        "unexplained": sum(UNEXPLAINED in d.kinds() for d in diffs),
    }
