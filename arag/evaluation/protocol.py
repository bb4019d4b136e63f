"""A run's protocol card: for every setting that the paper its method comes from states
(arag.evaluation.protocol_papers), our value beside the paper's and whether they differ.

The card is built from a run's description (run.json: its `settings`, else its `identity`, as the
rows carry it). The index's embedder and chunking come from `settings.index_facts` (recorded at
evaluation time from the index's manifest), else from the manifest at `settings.index_path` when it
is still there, else they are assumed to be what `pipelines.index +corpus=<dataset>` builds by
default, and say so. A field a run does not record (it predates the field) reads as what the code did
before it was recorded: such a row has `recorded` False.

`pipelines.evaluate` writes the card into each new run's run.json (`protocol`); it is never part of
the run's identity (every value on it comes from settings that already are, or from the index,
whose fingerprint is).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from arag.evaluation import protocol_papers as P
from arag.index.layout import IndexLayout

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
    differs: bool
    source: str
    recorded: bool = True


@dataclass(frozen=True)
class ProtocolCard:
    paper: str
    rows: tuple[CardRow, ...]

    @property
    def deviations(self) -> tuple[CardRow, ...]:
        return tuple(r for r in self.rows if r.differs)

    def to_json(self) -> dict[str, Any]:
        return {"paper": self.paper, "rows": [asdict(r) for r in self.rows], "deviations": len(self.deviations)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "ProtocolCard":
        return cls(str(data["paper"]), tuple(CardRow(**r) for r in data["rows"]))


# ---- what a run did ------------------------------------------------------------------------------
def index_facts(index_path: str | Path, build_fingerprint: str | None = None, manifest: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The embedder and chunking of the index at `index_path`, from its manifest (`manifest`: as
    already read); None without one, or when `build_fingerprint` is given and the manifest's differs
    (another index now lives there)."""
    if manifest is None:
        try:
            manifest = json.loads(IndexLayout(index_path).manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
    # An A2RAG run's fingerprint is the index's with its graph's appended (`<index>+graph-<graph>`).
    if build_fingerprint is not None and manifest.get("build_fingerprint") != build_fingerprint.split("+graph-")[0]:
        return None
    chunking = manifest.get("chunking") or {}
    return {
        "embedder": (manifest.get("embedding") or {}).get("model"),
        "chunking": chunking.get("mode"),
        "chunk_tokens": chunking.get("chunk_tokens"),
        "chunk_overlap": chunking.get("chunk_overlap"),
    }


@lru_cache(maxsize=1)
def _index_defaults() -> tuple[str, dict[str, Any]]:
    """pipelines.index's default embedder name and its index section (conf/index.yaml over its schema)."""
    import dataclasses

    import yaml

    from arag.config.files import conf_path
    from arag.config.schemas import IndexBuild

    index_conf = yaml.safe_load(conf_path("index.yaml").read_text())
    embedder = next(d["embedder"] for d in index_conf["defaults"] if isinstance(d, dict) and "embedder" in d)
    name = yaml.safe_load(conf_path("embedder", f"{embedder}.yaml").read_text())["name"]
    return str(name), {**dataclasses.asdict(IndexBuild()), **index_conf["index"]}


def assumed_index_facts(corpus: Mapping[str, Any] | None) -> dict[str, Any]:
    """What `pipelines.index +corpus=<corpus>` builds at its defaults (conf/index.yaml)."""
    from omegaconf import OmegaConf

    name, section = _index_defaults()
    cfg = OmegaConf.create({"corpus": dict(corpus or {}), "index": section})

    def pick(key: str) -> Any:
        return OmegaConf.select(cfg, f"index.{key}", throw_on_resolution_failure=False)

    return {"embedder": name, "chunking": pick("chunking"), "chunk_tokens": pick("chunk_tokens"), "chunk_overlap": pick("chunk_overlap")}


@lru_cache(maxsize=1)
def judge_presets() -> dict[str, tuple[str, str]]:
    """The judge presets (conf/judge/*.yaml) by name: (system prompt, user template)."""
    import yaml

    from arag.config.files import conf_path

    out = {}
    for path in sorted(conf_path("judge").glob("*.yaml")):
        cfg = yaml.safe_load(path.read_text())
        out[str(cfg.get("name") or path.stem)] = (str(cfg["system_prompt"]), str(cfg["user_template"]))
    return out


def judge_preset(judge: Mapping[str, Any]) -> str:
    """The judge preset a run's judge settings are: its `name` (', prompts changed' when its prompts
    are not that preset's), else the preset whose prompts it has, else 'unnamed'."""
    prompts = (str(judge.get("system_prompt")), str(judge.get("user_template")))
    presets = judge_presets()
    name = judge.get("name")
    if name:
        return f"preset {name}" + ("" if name not in presets or presets[name] == prompts else ", prompts changed")
    same = [n for n, p in presets.items() if p == prompts]
    return f"preset {same[0]}" if same else "unnamed preset"


def judge_model_name(judge_model: Any, agent_model: str | None) -> str | None:
    """The judge's model name: judge.model's, else the agent's (its model at the model's defaults)."""
    if judge_model is None or judge_model == "agent":
        return agent_model
    if isinstance(judge_model, Mapping):
        at_defaults = judge_model.get("agent_model_at_defaults")
        if isinstance(at_defaults, Mapping):
            return str(at_defaults.get("model") or agent_model)
        return str(judge_model.get("model")) if judge_model.get("model") is not None else agent_model
    return agent_model


def guard_rails_label(rails: Mapping[str, Any] | None) -> str:
    """The guard rails that are on, as the report names them ('off' when none)."""
    rails = rails or {}
    on = [f"tool_steps={rails['tool_steps']}"] if int(rails.get("tool_steps") or 0) > 0 else []
    on += [k for k in ("require_read_before_answer", "shown_chunk_ids_only") if rails.get(k)]
    return " ".join(on) or "off"


def _reply_cap(model: Mapping[str, Any], agent: Mapping[str, Any]) -> Fact:
    from arag.llm.base import PAPER_REPLY_TOKENS

    cap = agent.get("max_reply_tokens") or model.get("max_tokens") or PAPER_REPLY_TOKENS
    window = model.get("context_window") or model.get("n_ctx")
    if window and int(window) < int(cap):
        return Fact(int(window), f"{window} (the whole {window}-token window; cap {cap})")
    return Fact(int(cap), str(cap) + (f" (in a {window}-token window)" if window else ""))


def _method_setting(method: Mapping[str, Any], key: str, before: Any, shown_before: str) -> Fact:
    if key in method:
        value = method[key]
        return Fact(value, str(value).lower() if isinstance(value, bool) else str(value))
    return Fact(before, f"{shown_before} ({NOT_RECORDED})", recorded=False)


def run_facts(info: Mapping[str, Any]) -> dict[str, Fact]:
    """What a run did, per card setting, from its description (run.json, or {"identity": ...} as
    a row's `settings` column holds it); settings that do not apply to its method are absent."""
    settings = info.get("settings") or {}
    identity = info.get("identity") or {}

    def part(key: str) -> dict[str, Any]:
        return dict(settings.get(key) or identity.get(key) or {})

    model, agent, method, judge = part("model"), part("agent"), part("method"), part("judge")
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
    effort = model.get("reasoning_effort")
    facts[P.REASONING_EFFORT] = Fact((effort, str(name).lower()), str(effort) if effort else "the model's default")
    temperature = model.get("temperature")
    facts[P.TEMPERATURE] = Fact(float(temperature) if temperature is not None else 0.0, str(temperature if temperature is not None else "0 (default)"))
    facts[P.REPLY_CAP] = _reply_cap(model, agent)
    if settings.get("index_build_fingerprint") or identity.get("index"):
        facts.update(_index_rows(settings, info.get("config") or {}))
        tokenizer = settings.get("retrieved_tokens_tokenizer")
        facts[P.TOKENIZER] = Fact(tokenizer, str(tokenizer)) if tokenizer else Fact("cl100k_base", f"cl100k_base ({NOT_RECORDED})", recorded=False)
    if kind in LOOP_KINDS and tools:
        facts[P.MAX_STEPS] = Fact(agent.get("max_steps"), str(agent.get("max_steps")))
        budget = agent.get("token_budget")
        facts[P.TOKEN_BUDGET] = Fact(budget, str(budget) if budget is not None else "the model's window")
        rails = guard_rails_label(agent.get("guard_rails"))
        facts[P.GUARD_RAILS] = Fact(rails, rails)
    facts[P.PROMPT_VARIANT] = _method_setting(method, "prompt_variant", "pre-paper prompts", "pre-paper prompts")
    from arag.tools import result_settings_of

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


def _index_rows(settings: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Fact]:
    recorded = settings.get("index_facts")
    where = ""
    if not recorded and settings.get("index_path"):
        recorded = index_facts(settings["index_path"], settings.get("index_build_fingerprint"))
        where = " (from the index's manifest)" if recorded else ""
    facts = recorded or assumed_index_facts(config.get("corpus"))
    note = where if recorded else f" ({NOT_RECORDED}: pipelines.index's default assumed)"
    mode, tokens, overlap = facts.get("chunking"), facts.get("chunk_tokens"), facts.get("chunk_overlap")
    out = {
        P.EMBEDDER: Fact(facts.get("embedder"), f"{facts.get('embedder')}{note}", recorded=bool(recorded)),
        P.CHUNKING: Fact(f"{mode}, {tokens} tokens", f"{mode}, {tokens} tokens{note}", recorded=bool(recorded)),
    }
    if mode == "packed":
        out[P.CHUNK_OVERLAP] = Fact(overlap, f"{overlap} tokens{note}", recorded=bool(recorded))
    return out


# ---- the card ------------------------------------------------------------------------------------
def protocol_card(info: Mapping[str, Any]) -> ProtocolCard:
    """The card of a run described by `info` (run.json, or {"identity": ...}), against the paper its
    method comes from."""
    settings = info.get("settings") or {}
    method = settings.get("method") or (info.get("identity") or {}).get("method") or {}
    paper = P.paper_of(method)
    facts = run_facts(info)
    rows = []
    for setting in P.SETTINGS_ORDER:
        expected = paper.expected.get(setting)
        fact = facts.get(setting)
        if expected is None or fact is None:
            continue
        rows.append(CardRow(setting, fact.shown, expected.shown, not expected.accepts(fact.value), expected.source, fact.recorded))
    return ProtocolCard(paper.name, tuple(rows))
