"""A run's protocol card: per setting its method's paper states, our value beside the paper's, read
from what the episodes ran under where given (docs/evaluation.md, "Protocol"). The card is no part
of the run's identity: every value on it comes from what already is."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping

from arag.agent.loop import CONTEXT_MARGIN_TOKENS, fitted_token_budget
from arag.evaluation import protocol_papers as P
from arag.evaluation import run_settings
from arag.evaluation import text_fingerprints as T
from arag.evaluation.effective import Effective, chunk_readers, window_of
from arag.evaluation.results import RUN_INFO
from arag.evaluation.run_labels import (  # noqa: F401 (index_facts, judge_presets: callers take them from here too)
    OUR_SPLITTER, assumed_index_facts, embedder_config, guard_rails_label, index_facts, judge_model_name, judge_preset, judge_presets,
)
from arag.index.ann import AUTO_FLAT_MAX_SENTENCES
from arag.index.facts import embedder_facts
from arag.llm.base import PAPER_REPLY_TOKENS
from arag.methods.base import Method
from arag.tools import result_settings_of
from arag.tools.base import Hit, ResultFormat
from arag.tools.registry import TOOLS
from arag.tools.render import chunk_read_text

# Method kinds that run the agent loop (max steps, token budget, guard rails apply).
LOOP_KINDS = ("agent", "agenticrag")
NOT_RECORDED = "not recorded"


@dataclass(frozen=True)
class Fact:
    value: Any  # normalised: what the paper's `accepts` tests
    shown: str
    recorded: bool = True  # False: the run does not record it; this is the behaviour before it was recorded


@dataclass(frozen=True)
class CardRow:
    setting: str
    ours: str
    paper: str
    differs: bool  # from the paper's value; where the paper states none, from the authors' code's
    source: str
    recorded: bool = True
    official: str = ""  # the authors' code's value ("": not compared)
    official_source: str = ""
    moves_numbers: bool = True  # False: a difference here is form only (protocol_papers.EFFECTS)
    effect: str = ""  # why it does or does not move numbers

    @property
    def deviates(self) -> bool:
        return self.differs and self.moves_numbers


@dataclass(frozen=True)
class ProtocolCard:
    paper: str
    rows: tuple[CardRow, ...]

    @property
    def deviations(self) -> tuple[CardRow, ...]:
        return tuple(r for r in self.rows if r.deviates)

    @property
    def form_only(self) -> tuple[CardRow, ...]:
        return tuple(r for r in self.rows if r.differs and not r.moves_numbers)

    def to_json(self) -> dict[str, Any]:
        return {"paper": self.paper, "rows": [asdict(r) for r in self.rows], "deviations": len(self.deviations)}


def _reply_cap(model: Mapping[str, Any], agent: Mapping[str, Any], ran: Effective | None = None) -> Fact:
    """The replies' cap as sent, and what a reply could use where the window leaves less."""
    sent = ran.reply_caps if ran is not None and ran.reply_caps else ()
    cap = max(sent) if sent else int(agent.get("max_reply_tokens") or model.get("max_tokens") or PAPER_REPLY_TOKENS)
    shown_cap = "/".join(map(str, sent)) if sent else str(cap)
    window = max(ran.windows) if ran is not None and ran.windows else window_of(model)
    recorded = bool(sent) or ran is None
    if not window:
        return Fact(cap, shown_cap, recorded=recorded)
    prompt = ran.smallest_prompt if ran is not None else None
    if prompt is not None and window - prompt < cap:
        room = window - prompt
        return Fact(room, f"{shown_cap} sent; at most {room} usable (the {window}-token window less the smallest prompt, {prompt} tokens)", recorded=recorded)
    if window <= cap:
        return Fact(window - 1, f"{shown_cap} sent; less than the {window}-token window usable (the prompt shares it)", recorded=recorded)
    return Fact(cap, f"{shown_cap} (in a {window}-token window)", recorded=recorded)


def _token_budget(model: Mapping[str, Any], agent: Mapping[str, Any], ran: Effective | None) -> Fact:
    """The budget the episodes ran under, else derived from the settings with the loop's function."""
    configured = agent.get("token_budget")
    setting = f"{configured} set" if configured is not None else "none set"
    if ran is not None and ran.token_budgets:
        budgets = ran.token_budgets
        shown = "/".join(map(str, budgets))
        fitted = budgets != (configured,)
        where = f" in the {max(ran.windows)}-token window" if ran.windows else ""
        return Fact(budgets[0] if len(budgets) == 1 else budgets, shown + (f" (fitted{where}; {setting})" if fitted else ""))
    window = max(ran.windows) if ran is not None and ran.windows else window_of(model)
    if window:
        cap = ran.reply_caps[-1] if ran is not None and ran.reply_caps else int(agent.get("max_reply_tokens") or model.get("max_tokens") or PAPER_REPLY_TOKENS)
        budget = fitted_token_budget(configured, window, cap)
        return Fact(budget, f"{budget} (derived: {setting}, fitted to the {window}-token window)", recorded=False)
    return Fact(configured, str(configured) if configured is not None else "the model's window")


def _loop_facts(model: Mapping[str, Any], agent: Mapping[str, Any], method: Mapping[str, Any], ran: Effective | None) -> dict[str, Fact]:
    facts = {P.MAX_STEPS: Fact(agent.get("max_steps"), str(agent.get("max_steps"))), P.TOKEN_BUDGET: _token_budget(model, agent, ran)}
    facts[P.BUDGET_ACCOUNTING] = Fact("reported counts", "prompt + completion tokens as the backend reports them (hidden reasoning included; "
                                      "a cl100k estimate where it reports none), checked before each step")
    window = max(ran.windows) if ran is not None and ran.windows else window_of(model)
    if agent.get("token_budget") is None and not window:
        facts[P.TOOL_RESULT_CUT] = Fact("never", "never (no budget, no known window)")
    else:
        where = "the window less the reply room" if window else f"the budget + {CONTEXT_MARGIN_TOKENS:,} tokens"
        cut = f"; {ran.cut_results} cut in these episodes" if ran is not None and ran.episodes else ""
        facts[P.TOOL_RESULT_CUT] = Fact("cut", f"cut to fit {where}{cut}")
    per_step = method.get("tools_per_step", 1)
    if ran is not None and ran.episodes and ran.most_calls_in_a_step:
        most = ran.most_calls_in_a_step
        if not ran.extra_calls:
            extra = "; no reply asked for more"
        else:
            n = ran.replies_with_extra_calls
            replies = "replies" if n is None else f"{n} repl{'y' if n == 1 else 'ies'}"
            calls = f"{ran.extra_calls} extra call{'' if ran.extra_calls == 1 else 's'}"
            extra = f"; {replies} asked for more: {calls} answered \"not run\""
        facts[P.TOOL_CALLS_PER_STEP] = Fact(most, f"{most} at most{extra}")
    else:
        why = "no step called a tool" if ran is not None and ran.episodes else "no episode read"
        facts[P.TOOL_CALLS_PER_STEP] = Fact(per_step, f"{per_step if per_step else 'every call'} (the method's setting; {why})", recorded=False)
    return facts


def _text_facts(info: Mapping[str, Any], method: Mapping[str, Any], tools: tuple[str, ...], built: Any = None) -> dict[str, Fact]:
    """The prompts and tool descriptions as shown to the model, against the method's preset."""
    identity = info.get("identity") or {}
    settings = info.get("settings") or {}
    texts = identity.get("texts") or {}
    facts = {P.PROMPT_VARIANT: _method_setting(method, "prompt_variant", "pre-paper prompts", "pre-paper prompts")}
    if not texts:
        return facts
    commit = (identity.get("code") or {}).get("commit")
    prompts = T.prompt_checks(method, texts, commit)
    if (system := prompts.get(T.SYSTEM)) is not None:
        added = T.added_rules(str((texts.get("method") or {}).get(T.SYSTEM) or ""))
        note = f"; {system.note}" if system.note else ""
        if system.status == T.PRESET:
            value = "paper rules" if not added else "paper rules + " + ", ".join(added)
            shown = f"the {method.get('name')} preset's (sha256 {system.sha}): the paper's rules in our words" + (f", plus: {', '.join(added)}" if added else "") + note
        else:
            value, shown = "custom", f"custom (sha256 {system.sha}){note}"
            facts[P.PROMPT_VARIANT] = Fact("custom", f"custom (the system prompt, sha256 {system.sha}, is not the preset's)")
        facts[P.SYSTEM_PROMPT] = Fact(value, shown)
    if (final := prompts.get(T.FINAL)) is not None and tools:
        note = f"; {final.note}" if final.note else ""
        facts[P.FORCED_ANSWER] = (Fact("forced, no tools", f"tools removed, the preset's request in our words (sha256 {final.sha}){note}") if final.status == T.PRESET
                                  else Fact("custom", f"tools removed, a custom request (sha256 {final.sha}){note}"))
    same_code = commit is not None and commit == run_settings.code_version().get("commit")
    if checks := T.tool_checks(method, texts, settings.get("chunk_ids"), same_code, built):
        custom = [n for n, c in checks.items() if c.status == T.CUSTOM]
        earlier = [n for n, c in checks.items() if c.status == T.EARLIER]
        shas = ", ".join(f"{n} {c.sha}" for n, c in checks.items())
        if "settings" not in info and (custom or earlier):
            # only the rows' identity: the index's chunk ids the descriptions were filled with are unknown
            facts[P.TOOL_DESCRIPTIONS] = Fact("ours", f"ours (sha256 {shas}; not checked: {RUN_INFO}, which names the index's chunk ids, is missing)", recorded=False)
            return facts
        if custom:
            shown = f"custom: {', '.join(custom)} (sha256 {shas})"
        elif earlier:
            shown = f"ours, as code {str(commit)[:7]} wrote them (today's differ: {', '.join(earlier)}; sha256 {shas})"
        else:
            shown = f"the preset's, in our words (sha256 {shas})"
        facts[P.TOOL_DESCRIPTIONS] = Fact("custom" if custom else "ours", shown)
    return facts


def _method_setting(method: Mapping[str, Any], key: str, before: Any, shown_before: str) -> Fact:
    if key in method:
        value = method[key]
        return Fact(value, str(value).lower() if isinstance(value, bool) else str(value))
    return Fact(before, f"{shown_before} ({NOT_RECORDED})", recorded=False)


def _request_facts(model: Mapping[str, Any], method: Mapping[str, Any], ran: Effective | None) -> dict[str, Fact]:
    """The user template and the request fields the backend sent (arag.llm.openai)."""
    template = method.get("user_template")
    question = Fact(template, repr(template)) if template else Fact(Method.user_template, f"{Method.user_template!r} ({NOT_RECORDED})", recorded=False)
    facts = {P.QUESTION_MESSAGE: question}
    fields = (ran.request_fields if ran is not None else None) or model.get("request_fields")
    if isinstance(fields, Mapping):
        cap = str(fields.get("cap") or "max_tokens")
        sampling = f"temperature {fields['temperature']:g}" if fields.get("temperature") is not None else "no temperature"
        parallel = fields.get("parallel_tool_calls")
        shown = ", ".join([cap, sampling] + ([f"parallel_tool_calls {str(parallel).lower()}"] if parallel is not None else []))
        facts[P.REQUEST_FIELDS] = Fact(f"{cap}, {sampling}", shown)
    return facts


def run_facts(info: Mapping[str, Any], ran: Effective | None = None, built: Any = None) -> dict[str, Fact]:
    """What a run did, per card setting that applies to its method (`built`: the method, if built)."""
    settings = info.get("settings") or {}
    identity = info.get("identity") or {}
    model, agent, method, judge = (dict(settings.get(key) or identity.get(key) or {}) for key in ("model", "agent", "method", "judge"))
    kind = str(method.get("kind") or "agent")
    tools = tuple(method.get("tools") or ())
    name = model.get("model")
    facts: dict[str, Fact] = {P.BACKBONE: Fact(name, f"{name} ({model.get('backend')})" if model.get("backend") else str(name))}
    if judge and judge.get("enabled", True):
        judge_model = settings.get("judge_model") if "settings" in info else identity.get("judge_model")
        judged_by = judge_model_name(judge_model, name)
        facts[P.JUDGE_MODEL] = Fact(judged_by, f"{judged_by}" + (" (the agent's model)" if judged_by == name else ""))
        preset = judge_preset(judge)
        facts[P.JUDGE_PRESET] = Fact(preset, preset)
        skip = bool(judge.get("skip_exact", False))
        facts[P.JUDGE_SHORTCUT] = Fact(skip, "yes: an exact match counts as correct without asking the judge" if skip else "none (the judge always asked)")
    effort = model.get("reasoning_effort")
    facts[P.REASONING_EFFORT] = Fact((effort, str(name).lower()), str(effort) if effort else "the model's default")
    temperature = model.get("temperature")
    facts[P.TEMPERATURE] = Fact(float(temperature) if temperature is not None else 0.0, str(temperature if temperature is not None else "0 (default)"))
    facts[P.REPLY_CAP] = _reply_cap(model, agent, ran)
    if settings.get("index_build_fingerprint") or identity.get("index"):
        facts.update(_index_rows(settings, info.get("config") or {}, tools))
        tokenizer = settings.get("retrieved_tokens_tokenizer")
        facts[P.TOKENIZER] = Fact(tokenizer, str(tokenizer)) if tokenizer else Fact("cl100k_base", f"cl100k_base ({NOT_RECORDED})", recorded=False)
    if kind in LOOP_KINDS and tools:
        facts.update(_loop_facts(model, agent, method, ran))
        rails = guard_rails_label(agent.get("guard_rails"))
        facts[P.GUARD_RAILS] = Fact(rails, rails)
        facts.update(_request_facts(model, method, ran))
    facts.update(_text_facts(info, method, tools, built))
    if chunk_readers() & set(tools):
        facts[P.CHUNK_READ_HEADER] = _chunk_read_header(method, ran)
        (reader,) = sorted(chunk_readers() & set(tools))[:1]
        facts[P.READ_TOOL_NAME] = Fact(reader, reader)
    followed = result_settings_of(tools)
    if "snippets_per_chunk" in followed:
        facts[P.SNIPPET_CAP] = _method_setting(method, "snippets_per_chunk", "all", "all")
    if "result_titles" in followed:
        facts[P.RESULT_TITLES] = _method_setting(method, "result_titles", True, "yes")
    for setting, key in ((P.QUERIES_PER_SEARCH, "max_queries"), (P.RESULTS_PER_QUERY, "search_results"), (P.FIND_PASSAGES, "find_passages_per_pattern"),
                         (P.OPEN_WINDOW, "open_window_lines"), (P.CONTEXT_BUDGET, "context_budget"), (P.MAX_REWRITES, "max_rewrites")):
        if key in method:
            facts[setting] = Fact(method[key], str(method[key]))
    if kind == "a2rag":
        extractor = (settings.get("index_facts") or {}).get("graph_extractor")
        facts[P.EXTRACTOR] = Fact(extractor, str(extractor)) if extractor else _method_setting(method, "extractor", "rules", "rules")
        facts[P.GATE_SUMMARIES] = _method_setting(method, "gate_summaries", "extractive", "extractive")
    dataset = settings.get("dataset") or identity.get("dataset")
    facts[P.CORPUS] = Fact(dataset, str(dataset))
    return facts


def _chunk_read_header(method: Mapping[str, Any], ran: Effective | None) -> Fact:
    if ran is not None and ran.chunk_read_header:
        return Fact(ran.chunk_read_header, ran.chunk_read_header)
    titles = bool(method.get("result_titles", True))
    text = chunk_read_text([Hit("<id>", title="<title>" if titles else None, prev_id="<id>", next_id="<id>")], {"<id>": ""}, [], result_format=ResultFormat(result_titles=titles))
    header = text.splitlines()[0]
    return Fact(header, f"{header} ({NOT_RECORDED}: this checkout's form)", recorded=False)


def _index_rows(settings: Mapping[str, Any], config: Mapping[str, Any], tools: tuple[str, ...] = ()) -> dict[str, Fact]:
    recorded = settings.get("index_facts")
    where = ""
    if not recorded and settings.get("index_path"):
        recorded = index_facts(settings["index_path"], settings.get("index_build_fingerprint"))
        where = " (from the index's manifest)" if recorded else ""
    if recorded and settings.get("index_url") and not settings.get("index_path"):
        where = " (from the tool server)"
    facts = recorded or assumed_index_facts(config.get("corpus"))
    note = where if recorded else f" ({NOT_RECORDED}: pipelines.index's default assumed)"
    mode, tokens, overlap = facts.get("chunking"), facts.get("chunk_tokens"), facts.get("chunk_overlap")
    out = {
        P.EMBEDDER: Fact(facts.get("embedder"), f"{facts.get('embedder')}{note}", recorded=bool(recorded)),
        P.CHUNKING: Fact(f"{mode}, {tokens} tokens", f"{mode}, {tokens} tokens{note}", recorded=bool(recorded)),
    }
    if mode == "packed":
        out[P.CHUNK_OVERLAP] = Fact(overlap, f"{overlap} tokens{note}", recorded=bool(recorded))
    out.update(_sentence_rows(facts, bool(recorded), note, tools))
    return out


def _sentence_rows(facts: Mapping[str, Any], recorded: bool, note: str, tools: tuple[str, ...]) -> dict[str, Fact]:
    """The sentence splitter and, for a method that embeds queries, the query instruction, precision and
    how the sentences are searched (exact, or an ANN and its measured recall)."""
    out = {}
    splitter = facts.get("splitter")
    out[P.SENTENCE_SPLITTER] = (Fact("sentencex", f"{splitter} (end punctuation kept){note}", recorded=recorded) if splitter
                                else Fact("sentencex", f"{OUR_SPLITTER} ({NOT_RECORDED}: the only splitter our indexes used)", recorded=False))
    if not any(t in TOOLS and TOOLS[t].encodes_queries for t in tools):
        return out
    if "dtype" in facts:
        given, known, why = facts, recorded, note
    else:
        given = embedder_facts(embedder_config(str(facts.get("embedder"))) or {})
        known, why = False, f" ({NOT_RECORDED}: the embedder preset of that name)"
    instruction = given.get("query_instruction")
    out[P.QUERY_INSTRUCTION] = Fact(instruction, f"{instruction} (on questions only){why}" if instruction else f"none{why}", recorded=known)
    out[P.EMBEDDER_PRECISION] = Fact(given.get("dtype"), f"{given.get('dtype')}{why}", recorded=known)
    # Without a record: the index pipelines.index builds at its defaults, or facts recorded before they named the search.
    search = facts.get("vector_search")
    out[P.VECTOR_SEARCH] = (Fact("exact" if search == "exact" else "approximate", f"{search}{note}", recorded=recorded) if search else
                            Fact("exact", f"exact ({NOT_RECORDED}: index.ann=auto builds no ANN up to {AUTO_FLAT_MAX_SENTENCES:,} sentences)", recorded=False) if not recorded else
                            Fact(None, f"{NOT_RECORDED} (an index built with index.ann other than flat searches approximately)", recorded=False))
    return out


def protocol_card(info: Mapping[str, Any], ran: Effective | None = None, built: Any = None) -> ProtocolCard:
    """The card of a run described by `info` (run.json, or {"identity": ...}) against its paper."""
    settings = info.get("settings") or {}
    method = settings.get("method") or (info.get("identity") or {}).get("method") or {}
    paper = P.paper_of(method)
    facts = run_facts(info, ran, built)
    rows = []
    for setting in P.SETTINGS_ORDER:
        expected = paper.expected.get(setting)
        fact = facts.get(setting)
        if expected is None or fact is None:
            continue
        effect = P.effect_of(setting)
        rows.append(CardRow(setting, fact.shown, expected.shown, not expected.accepts(fact.value), expected.source, fact.recorded,
                            expected.official, expected.official_source, effect.moves_numbers, effect.why))
    return ProtocolCard(paper.name, tuple(rows))
