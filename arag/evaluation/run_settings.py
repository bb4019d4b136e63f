"""What defines a run, and its id.

A run is one (dataset, method, model, agent settings, judge, index) combination; its episodes are
keyed by (run id, question id), which is what makes resume exact. The run id hashes the settings
that can change an episode's outcome or score, and nothing else: run-time knobs (threads, worker
counts, concurrency, endpoint address, retry backoff, `limit`) are left out, so rerunning with more
workers or a larger `limit` continues the same run instead of starting a new one.
"""

from __future__ import annotations

import copy
import hashlib
import json
import subprocess
from dataclasses import InitVar, asdict, dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

# Datasets graded on long-form answers (GraphRAG-Bench); every other dataset gets short answers.
FREE_FORM_DATASETS = ("graphrag-bench",)


def answer_style_for(dataset: str) -> str:
    """The answer style (arag.methods.base.ANSWER_STYLES) a dataset's gold answers call for."""
    return "free_form" if dataset.startswith(FREE_FORM_DATASETS) else "short"


# Agent config keys that change retries or what is stored, not the episode.
RUNTIME_AGENT_KEYS = frozenset({"llm_attempts", "backoff_initial_s", "backoff_max_s", "backoff_jitter_s", "keep_messages"})
# Judge keys of the same kind.
RUNTIME_JUDGE_KEYS = frozenset({"attempts"})


@dataclass(frozen=True)
class RunSettings:
    dataset: str
    method: dict[str, Any]  # the method config (conf/method/<name>.yaml, resolved)
    model: dict[str, Any]  # the backend config (conf/model/<name>.yaml, resolved)
    agent: dict[str, Any]  # AgentConfig fields
    judge: dict[str, Any]  # JudgeConfig fields
    judge_model: dict[str, Any] | None  # the judge's backend config; None: the agent's model at its defaults (judge_instrument)
    questions_path: str
    questions_sha256: str
    index_path: str | None = None
    index_build_fingerprint: str | None = None
    # A served index (pipelines.serve) instead of index_path, and the environment variable holding
    # its token; how the index is reached, not which index: not part of the run id.
    index_url: str | None = None
    index_token_env: str | None = None
    index_timeout_s: float | None = None  # per served tool call (index.timeout_s); None: the client's default
    # A re-judged run (pipelines.rejudge): {"run_id", "identity"} of the run whose episodes it scores
    # again. Its identity is that run's with the judge replaced, plus the source and the judging code.
    rejudged_from: dict[str, Any] | None = None
    # The index's chunk-id form and example ({"form", "example"}: arag.index.chunk_ids), as the
    # texts the model reads show them; they enter the run id through those texts. None (settings
    # made without opening the index): the texts keep their slots and the runner fills them.
    chunk_ids: dict[str, str] | None = None
    # The index's embedder and chunking as its manifest states them (arag.evaluation.protocol.index_facts),
    # for the run's protocol card; the index fingerprint already stands for them in the run id.
    index_facts: dict[str, Any] | None = None
    # The tokenizer of the recorded retrieved tokens (arag.index.tokens.RETRIEVED_TOKENS_TOKENIZER);
    # None: a run without retrieval, or one recorded before it was named here (cl100k_base then).
    retrieved_tokens_tokenizer: str | None = None
    # The method `method` builds, when the caller has built it: the identity renders its texts from it.
    built_method: InitVar[Any] = None

    def __post_init__(self, built_method: Any) -> None:
        if built_method is not None:
            object.__setattr__(self, "_identity", self.build_identity(built_method))

    def identity(self) -> dict[str, Any]:
        """The settings hashed into the run id (also stored in run.json and every row): built once per
        settings object (rendering the texts builds the method), a copy each time."""
        return copy.deepcopy(self._identity)

    @cached_property
    def _identity(self) -> dict[str, Any]:
        return self.build_identity()

    def build_identity(self, method: Any = None) -> dict[str, Any]:
        judging = {"judge": _drop(self.judge, RUNTIME_JUDGE_KEYS), "judge_model": self.judge_instrument()}
        if self.rejudged_from is not None:
            return {**self.rejudged_from["identity"], **judging, "rejudged_from": self.rejudged_from["run_id"], "judge_code": code_version()}
        return {
            "dataset": self.dataset,
            "questions_sha256": self.questions_sha256,
            "index": self.index_build_fingerprint,
            "method": self.method,
            "model": _drop(self.model, runtime_model_keys()),
            "agent": _drop(self.agent, RUNTIME_AGENT_KEYS),
            **judging,
            "texts": model_texts(self.method, self.model.get("protocol", "json"), self.chunk_ids, method),
            "code": code_version(),
            **({"retrieved_tokens_tokenizer": self.retrieved_tokens_tokenizer} if self.retrieved_tokens_tokenizer else {}),
        }

    def judge_instrument(self) -> dict[str, Any]:
        """The judge's model as the run id records it: `judge.model`, or by default the agent's model
        at the model's defaults (arag.llm.instrument), the same for every run of a sweep."""
        if self.judge_model is not None:
            return _drop(self.judge_model, runtime_model_keys())
        from arag.llm.factory import AGENT_KEYS
        from arag.llm.instrument import judge_model_config

        agent_only = frozenset(k for k in AGENT_KEYS if k != "backend")
        return {"agent_model_at_defaults": _drop(judge_model_config(self.model), runtime_model_keys() | agent_only)}

    def secret_env_names(self) -> list[str]:
        """The environment variables holding this run's secrets, which every worker needs where it
        runs: the tool server's token (index.url) and each backend's API key (`api_key_env`)."""
        from arag.serve.guard import TOKEN_ENV

        names = [self.index_token_env or TOKEN_ENV] if self.index_url else []
        for model in (self.model, self.judge_model or {}):
            if model.get("api_key_env"):
                names.append(str(model["api_key_env"]))
        return list(dict.fromkeys(names))

    @cached_property
    def identity_json(self) -> str:
        """The identity as canonical JSON: what the run id hashes, and every row's `settings` column."""
        return json.dumps(self._identity, sort_keys=True, ensure_ascii=False, default=str)

    @cached_property
    def run_id(self) -> str:
        return hashlib.sha256(self.identity_json.encode("utf-8")).hexdigest()[:16]

    @property
    def method_name(self) -> str:
        return str(self.method.get("name"))

    def swept(self) -> dict[str, Any]:
        """The settings a sweep usually varies, as row columns."""
        return {
            "max_steps": self.agent.get("max_steps"),
            "token_budget": self.agent.get("token_budget"),
            "reasoning_effort": self.model.get("reasoning_effort"),
            "temperature": self.model.get("temperature"),
        }

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def to_worker_json(self) -> dict[str, Any]:
        """`to_json` with the identity built here: a worker (another process, perhaps on a node with
        another checkout) files its rows under the run id computed once for the run, not its own."""
        return {**self.to_json(), "identity": self.identity()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "RunSettings":
        fields = dict(data)
        identity = fields.pop("identity", None)
        settings = cls(**fields)
        if identity is not None:
            object.__setattr__(settings, "_identity", identity)  # the run's, as `to_worker_json` carried it
        return settings


def runtime_model_keys() -> frozenset[str]:
    """Model config keys that change speed, capacity or plumbing, not replies (llamacpp threads, an
    endpoint's address and limits, vLLM engine placement and memory, the scripted double's delay):
    what each backend declares (arag.llm.factory.runtime_model_keys)."""
    from arag.llm.factory import runtime_model_keys as declared

    return declared()


def _drop(cfg: dict[str, Any], keys: frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in cfg.items() if k not in keys}


def model_texts(method_cfg: dict[str, Any], protocol: str, chunk_ids: dict[str, str] | None = None, method: Any = None) -> dict[str, Any]:
    """Every text the model sees besides the question: the method's prompts (answer style and the
    index's chunk ids in place), the tool descriptions and parameter schemas, the action protocol's
    instructions and the loop's notes. Part of the run id, so a reworded prompt or tool description
    starts a new run. `method`: the method `method_cfg` builds, when the caller has built it already."""
    from arag.agent import loop
    from arag.agent.protocols import describe_actions
    from arag.index.chunk_ids import ChunkIdFormat
    from arag.methods import method_from_config

    method = (method if method is not None else method_from_config(dict(method_cfg))).for_index(ChunkIdFormat.from_json(chunk_ids) if chunk_ids else None)
    schemas = method.tool_schemas()
    return {
        "method": method.texts(),
        "tools": schemas,
        "protocol": protocol,
        "actions": describe_actions(schemas) if schemas else None,
        "notes": [loop.EXTRA_CALL_NOTE, loop.TRUNCATION_NOTE, loop.read_first_note(method.tools)],
    }


@lru_cache(maxsize=1)
def code_version() -> dict[str, str | None]:
    """The package version and, in a git checkout, the commit (an installed package has none)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        package = version("arag")
    except PackageNotFoundError:
        package = None
    root = Path(__file__).resolve().parents[2]
    commit = None
    if (root / ".git").exists():
        try:
            commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10, check=True).stdout.strip() or None
        except (OSError, subprocess.SubprocessError):
            commit = None
    return {"version": package, "commit": commit}
