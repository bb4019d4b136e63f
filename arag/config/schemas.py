"""The settings' schemas: one dataclass per config node and one per pipeline (its root), the one home
of their keys, types and defaults (plain Python: no Hydra, no Ray). Each pipeline's YAML builds on its
root (arag.config.store), so Hydra's struct mode refuses an unknown key, and the composed config
becomes these objects in one conversion (arag.config.typed); the keys of the untyped mappings (model,
method, corpus, embedder) are their readers' to check (pipelines.config_checks)."""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from typing import Any, List, Mapping, Optional

from omegaconf import MISSING

from arag.strict_settings import from_settings

# Default token budget: the paper code's (128k), capped by the model's context window (arag.agent.loop.fit_budget).
PAPER_TOKEN_BUDGET = 128_000
# The environment variable a tool server (pipelines.serve) reads its token from, and its clients by default.
TOKEN_ENV = "ARAG_SERVE_TOKEN"


@dataclass
class GuardRails:
    """Extra help for small models; all off by default (the paper's methods run without them) and
    recorded in every episode.

    require_read_before_answer: refuse an answer until some tool call has put whole chunk text into
        the context (chunk_read, a whole-chunk search, or any search of a `full_text` method; search
        snippets are not enough), at most `max_refusals` times per episode (then it is accepted).
    tool_steps: the first `tool_steps` steps may only call tools: the JSON action schema of those
        steps has no answer branch, so the grammar itself rules out answering from memory
        (JSON protocol only).
    shown_chunk_ids_only: chunk_read's chunk_ids may only name ids the episode has been shown
        (search results, chunks read and their neighbours): an enum in the JSON action schema
        that grows as ids are shown; until one is shown, chunk_read is not offered (JSON
        protocol only; no effect on a method without chunk_read).
    """

    require_read_before_answer: bool = False
    max_refusals: int = 2
    tool_steps: int = 0
    shown_chunk_ids_only: bool = False

    def active(self) -> bool:
        return self.require_read_before_answer or self.tool_steps > 0 or self.shown_chunk_ids_only


@dataclass
class AgentConfig:
    max_steps: int = 15  # the official A-RAG configuration's step limit (max_loops: 15 in the paper code's config)
    token_budget: int | None = PAPER_TOKEN_BUDGET  # conversation tokens (prompt + reply) that trigger the forced answer
    max_reply_tokens: int | None = None  # per model call; None: the model config's max_tokens (arag.llm.base.PAPER_REPLY_TOKENS when null)
    llm_attempts: int = 4  # tries per model call (1 + retries) for retryable LLM errors
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 30.0
    backoff_jitter_s: float = 1.0
    keep_messages: bool = True  # store the whole conversation in the episode
    guard_rails: GuardRails = field(default_factory=GuardRails)

    @classmethod
    def from_dict(cls, cfg: dict[str, Any]) -> "AgentConfig":
        """From the `agent` config group; an unknown key (here or in guard_rails) lists the valid ones."""
        guard_rails = from_settings(GuardRails, cfg.get("guard_rails") or {}, "agent.guard_rails")
        return from_settings(cls, cfg, "agent", guard_rails=guard_rails)


@dataclass
class IndexSource:
    """How ask and evaluate reach an index: a folder, or a tool server (pipelines.serve)."""

    path: Any = None  # the index folder (a pipeline's YAML may derive it, e.g. from the corpus name)
    url: str | None = None  # a tool server instead: http://host:8765; path is then unused
    token_env: str | None = TOKEN_ENV  # the environment variable holding the server's token (if it has one)
    timeout_s: float = 120.0  # seconds a served tool call may take, time queued at a busy server included

    def __post_init__(self) -> None:
        if not self.timeout_s > 0:  # the rule of arag.serve.client.index_timeout
            raise ValueError(f"index.timeout_s must be a number of seconds > 0, not {self.timeout_s!r}")


@dataclass
class EvalRuntime:
    """The evaluation's `runtime` node (Ray: a local instance, or the cluster named by RAY_ADDRESS)."""

    num_cpus: int | None = None  # size of a local Ray instance (the driver starts it); None: all cores; ignored with RAY_ADDRESS
    workers: int = 1  # EpisodeWorker actors; each opens the index and builds the backend once
    concurrency: int | None = None  # episodes in flight per worker; None: arag.llm.factory.default_concurrency
    worker_cpus: float = 1  # CPUs Ray reserves per worker
    worker_gpus: float = 0  # GPUs per worker (a worker that runs a GPU engine in-process: one worker per GPU)
    batch_size: int = 25  # rows per written Parquet part
    flush_s: float = 30  # write a part at least this often while rows are waiting
    episode_timeout_s: float | None = None  # wall-clock cap per episode (then recorded as failed); None: none
    max_worker_restarts: int = 4  # replacement workers started in all, after worker/node deaths
    max_losses: int = 3  # dead workers a question may be in flight on before it is recorded failed
    start_timeout_s: float = 900  # give up when no worker has been ready for this long
    spread: bool = True  # SPREAD scheduling: one worker per node first
    engines: int | None = None  # vLLM: engine actors (each model.num_gpus GPUs) the workers share, worker i → engine i mod engines; None: one per worker


TEMPLATE_FIELDS = ("question", "gold", "prediction")  # what judge.user_template may name


@dataclass
class JudgeConfig:
    """What the LLM-Acc judge asks and how (arag.evaluation.judge); the presets in conf/judge/ set the prompts."""

    system_prompt: str
    user_template: str  # fields: {question}, {gold}, {prediction}
    name: str = "custom"  # the preset's name (conf/judge/): how reports tell judges apart
    enabled: bool = True
    max_tokens: int | None = None  # the judge's reply cap; None: its model's default cap (room for a reasoning judge's thinking), never the agent's model.max_tokens
    attempts: int = 3  # tries per question: retryable LLM errors and unusable replies
    skip_exact: bool = True  # a normalised exact match is correct without asking the judge

    def __post_init__(self) -> None:
        try:
            named = {name for _, name, _, _ in string.Formatter().parse(self.user_template) if name is not None}
        except ValueError as exc:
            raise ValueError(f"judge.user_template cannot be filled in: {exc}") from None
        unknown = sorted(named - set(TEMPLATE_FIELDS))
        if unknown:
            listed = ", ".join("{" + f + "}" for f in unknown)
            allowed = ", ".join("{" + f + "}" for f in TEMPLATE_FIELDS)
            raise ValueError(f"judge.user_template names unknown fields {listed}; it may use {allowed} (write {{{{ and }}}} for a literal brace)")

    @classmethod
    def from_dict(cls, cfg: Mapping[str, Any]) -> "JudgeConfig":
        """From the `judge` config group; its `model` (the judge's own backend config, if any) is
        the caller's to build, every other key must be a field."""
        return from_settings(cls, {k: v for k, v in cfg.items() if k != "model"}, "judge")


@dataclass
class JudgeNode(JudgeConfig):
    """The `judge` node of evaluate and rejudge: the judge's settings and its backend."""

    # The judge's model config; None: the agent's model at the model's defaults (arag.llm.instrument),
    # e.g. `+model@judge.model=openai judge.model.model=gpt-4o-mini` for another.
    model: Any = None


@dataclass
class DocumentCeilings:
    """`serve.max_document_settings`: the largest document-tool settings (arag.tools.DocumentToolSettings,
    same names) a client of the tool server may ask for; None: the paper's value, that class's default."""

    max_queries: Optional[int] = None
    search_results: Optional[int] = None
    open_window_lines: Optional[int] = None
    open_max_tokens: Optional[int] = None
    find_max_tokens: Optional[int] = None
    find_passages_per_pattern: Optional[int] = None
    find_context_lines: Optional[int] = None


@dataclass
class ServeConfig:
    """The tool server's `serve:` node (pipelines.serve; docs/configuration.md says what each key does).
    arag.serve.app.ServeSettings adds the checks of values and the token's resolution."""

    transport: str = "http"  # stdio | http
    host: str = "127.0.0.1"
    port: int = 8765
    # Text, but typed as the command line gave it: Hydra reads `serve.token=1e3` as a number, and
    # pipelines.serve takes the override's own characters back (a token is never converted).
    token: Any = None
    token_file: Optional[str] = None
    allowed_hosts: Optional[List[str]] = field(default_factory=list)  # null: none
    allowed_origins: Optional[List[str]] = field(default_factory=list)
    max_request_bytes: int = 256 * 1024
    max_response_bytes: int = 4 * 2**20
    max_document_settings: DocumentCeilings = field(default_factory=DocumentCeilings)
    threads: int = 16
    workers: int = 1
    max_sessions: int = 10_000
    session_idle_s: float = 3600.0
    session_max_bytes: int = 16 * 2**20
    sessions_max_bytes: int = 512 * 2**20
    max_connections: int = 256
    max_waiting_connections: int = 1024
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    keep_alive_s: float = 5.0
    stream_idle_s: float = 60.0
    preload: bool = True
    full_text: bool = False
    tools: Any = None  # null: every tool; a method's tool set or a list of tool names
    log_level: str = "info"


@dataclass
class IndexBuild:
    """pipelines.index's `index:` node: where the index goes and how the corpus is cut and searched
    (conf/index.yaml derives path, chunking and chunk_tokens from the corpus config)."""

    path: Any = None
    chunking: str = "per_document"  # per_document | packed (arag/index/packing.py)
    chunk_tokens: int = 1000  # cl100k_base tokens per chunk, at most
    # packed only: tokens of whole sentences a window repeats from the one before, at most. 100 and the
    # 1,000 of chunk_tokens are LinearRAG's (DEEP-PolyU/LinearRAG src/config.py @ 4ecfa25, chunk_token_size
    # and chunk_overlap_token_size), whose released chunks A-RAG uses (docs/indexing.md, Index format: Chunks)
    chunk_overlap: int = 100
    language: str = "en"  # sentence segmentation rules (sentencex language code)
    faiss_factory: str = "Flat"  # the per-part shards (exact); the ANN is `ann`
    # auto: exact search up to 250k sentences, one IVF-PQ over all shards above (lists and PQ size derived
    # from the corpus); flat; ivfpq; or a FAISS IVF factory string such as "IVF4096,PQ48". Query-time
    # knobs (nprobe, rerank) are chosen at build time for ann_recall; the tools may override them.
    ann: str = "auto"
    # recall@10 against exact search the ANN must keep: the build measures it on held-out queries and
    # records the search settings (nprobe, rerank) that reach it at least cost, which semantic_search
    # uses; auto/ivfpq double the PQ code once if needed; a target that cannot be met is an error
    ann_recall: float = 0.99
    # a questions file (JSON Lines with "question") whose first 1,000 questions join the held-out
    # sentences in that measurement, encoded as queries with the index's model
    ann_questions: Optional[str] = None
    overwrite: bool = False  # rebuild even when a complete index with the same settings exists
    verify_inputs: bool = False  # a rerun hashes every part's input again (else trusts size and mtime)


@dataclass
class EmbedRuntime:
    """How the index job runs its embedding actors on Ray (not part of the index identity)."""

    actors: int = 1  # embedding actors (one per GPU on a GPU cluster)
    num_gpus: float = 0  # per actor
    num_cpus: float = 1  # per actor (torch may still use more threads: see EmbedderSpec.threads)
    rows_per_batch: int = 2048  # sentences of a part encoded per call; each call sorts them by token count into model batches
    # Custom Ray resources each actor needs, e.g. {"embed": 1} to keep embedding on the nodes
    # started with `ray start --resources='{"embed": N}'`.
    # A mapping of resource name to amount; untyped here because Hydra merges a command line's mapping
    # into the node, which OmegaConf can do into an untyped None but not into a typed one (None) or a
    # typed empty mapping (struct mode); __post_init__ checks the amounts.
    resources: Any = None

    def __post_init__(self) -> None:
        if self.resources is None:
            return
        if not isinstance(self.resources, dict):
            raise ValueError(f"setting runtime.embed.resources: a mapping of resource name to amount, e.g. {{embed: 1}}, not {self.resources!r}")
        for name, amount in self.resources.items():
            if isinstance(amount, bool) or not isinstance(amount, (int, float)):
                raise ValueError(f"setting runtime.embed.resources: the amount of {name!r} must be a number, not {amount!r}")


@dataclass
class IndexRuntime:
    """pipelines.index's `runtime:` node (the runtime group, conf/runtime/, sets what differs)."""

    num_cpus: Optional[int] = None  # local Ray instance size; None: all cores (ignored with RAY_ADDRESS)
    embed: EmbedRuntime = field(default_factory=EmbedRuntime)


@dataclass
class ExtractorConfig:
    """`graph.extractor`: how the knowledge graph's triples are extracted (arag.graph.extract)."""

    kind: Optional[str] = None  # llm | rule; None: llm when `model` is set, else rule
    model: Any = None  # the LLM extractor's model config (a conf/model entry)
    prompt: Optional[str] = None  # llm: the OpenIE instruction; None: the built-in one
    max_tokens: int = 512  # llm: reply tokens per chunk
    max_relation_words: int = 5  # rule: longest text between two entities kept as a relation
    max_entity_words: int = 8  # rule: longest capitalised span


@dataclass
class GraphConfig:
    """pipelines.graph's `graph:` node (A2RAG's knowledge graph beside an index)."""

    extractor: ExtractorConfig = field(default_factory=ExtractorConfig)
    chunks_per_part: int = 2000  # chunks per extraction task (and per commit record)
    summaries: Optional[str] = None  # llm | extractive; None: llm when graph.extractor.model is set, else extractive
    summary_sentences: int = 2  # extractive: sentences of each document's first chunk in its gating summary
    overwrite: bool = False  # rebuild a graph built with other settings
    limit_chunks: Optional[int] = None  # only the first N chunks (a slice: smoke tests of the LLM extractor)


@dataclass
class GraphRuntime:
    """How the graph job runs its extraction tasks on Ray."""

    num_cpus: float = 1  # per extraction task
    num_gpus: float = 0  # per extraction task (an LLM extractor on a GPU node)
    max_in_flight: int = 64  # extraction tasks submitted at a time
    merge_num_cpus: float = 1


@dataclass
class GraphPipelineRuntime:
    """pipelines.graph's `runtime:` node."""

    num_cpus: Optional[int] = None  # local Ray: CPUs to use; None: all
    graph: GraphRuntime = field(default_factory=GraphRuntime)


@dataclass
class ResultsTree:
    """The `results:` node of evaluate, rejudge, report and view: the results tree (one folder per run,
    named by its run id; query it with DuckDB: results/**/*.parquet)."""

    path: str = "results"


@dataclass
class QuestionsSource:
    """evaluate's `questions:` node (conf/evaluate.yaml derives path from the corpus)."""

    path: Optional[str] = None  # any JSON Lines file of {id, question, answers, supporting_titles}
    on_bad_line: str = "error"  # error: stop at the first bad line (file:line named); skip: count and list bad lines, go on


@dataclass
class AskShow:
    """ask's `show:` node: how the episode is printed."""

    observation_lines: int = 12  # lines of each tool result to print; 0: all


@dataclass
class ReportConfig:
    """pipelines.report's `report:` node."""

    path: Optional[str] = None  # None: <results.path>/report
    title: str = "Evaluation report"
    where: Optional[str] = None  # an SQL filter over the episode rows, e.g. "model = 'gpt-5-mini'"
    # true: the paper's published numbers (conf/paper_results/) beside ours: Table 1's in the main table,
    # for its backbones (reference rows under any other); Table 3's retrieved tokens
    paper_columns: bool = False


@dataclass
class ViewConfig:
    """pipelines.view's `view:` node."""

    host: str = "127.0.0.1"  # only this machine; 0.0.0.0 to show it to other machines (no login: results are readable by all who reach it)
    port: int = 8770  # 0: any free port (the address is printed)
    open_browser: bool = True  # open the page in this machine's browser once it listens

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ValueError(f"view.port must be a port number from 0 to 65535 (0: any free one), got {self.port!r}")


@dataclass
class ToolOptions:
    """The tool server's `tools:` node: the keyword arguments of arag.tools.hosting.context.ToolContext,
    same names and defaults (its docstring says what each does); None: ToolContext's (or, with
    serve.workers > 1, ToolWorkerPool's) own choice."""

    cache_dir: Optional[str] = None  # where the tools cache lives; None: <index>/tools_cache
    accelerate: bool = True  # word postings for keyword search (same results, faster)
    nprobe: Optional[int] = None  # IVF lists to probe; None: the index's own, chosen for index.ann_recall
    rerank: Optional[int] = None  # exact re-rank candidates per result on an ANN index; None: the index's own
    duckdb_threads: Optional[int] = None
    batch_window_s: float = 0.001  # under load, how long a query batch waits for more queries to join it
    max_active: Optional[int] = None  # tool calls that run at once; None: twice the cores
    encoder_threads: Optional[int] = None  # CPU threads of the query encoder; None: the embedder's setting (a worker pool: its share of the cores)
    resident_vectors: Optional[bool] = None  # ANN re-rank rows held in memory; None: when the shards take at most half the memory available
    probe_slices: Optional[int] = None  # one ANN query's probed lists scanned in this many slices at once; None: 2 (arag.index.ann.AnnSearcher)


@dataclass
class IndexPath:
    """The `index:` node of graph and serve: the index folder."""

    path: Any = None


def _check_count(key: str, value: Any, what: str) -> None:
    """A setting that counts `what` and may be null (all of them): a whole number of at least 1.
    Its default is null, so it is untyped: a type would give OmegaConf's message, not this one."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return
    kind = "" if isinstance(value, int) and not isinstance(value, bool) else f" (a {type(value).__name__})"
    raise ValueError(f"setting {key}={value!r}{kind}: {key} takes a whole number of {what} of at least 1, or null for all of them")


@dataclass
class AgentRun:
    """What ask and evaluate share: the agent, its model, method and index."""

    model: Any = None
    method: Any = None
    agent: AgentConfig = field(default_factory=AgentConfig)
    index: IndexSource = field(default_factory=IndexSource)



@dataclass
class AskPipeline(AgentRun):
    """conf/ask.yaml"""

    show: AskShow = field(default_factory=AskShow)
    question: Optional[str] = None
    question_id: Optional[str] = None
    output: Optional[str] = None  # also write the episode record as JSON here


@dataclass
class EvaluatePipeline(AgentRun):
    """conf/evaluate.yaml"""

    runtime: EvalRuntime = field(default_factory=EvalRuntime)
    judge: JudgeNode = MISSING
    questions: QuestionsSource = field(default_factory=QuestionsSource)
    results: ResultsTree = field(default_factory=ResultsTree)
    corpus: Any = None  # +corpus=<name>: the benchmark
    data_dir: str = MISSING
    limit: Any = None  # the first N questions of the file; a later, larger limit continues the same run
    progress: bool = True

    def __post_init__(self) -> None:
        _check_count("limit", self.limit, "questions")


@dataclass
class RejudgePipeline:
    """conf/rejudge.yaml"""

    judge: JudgeNode = MISSING
    results: ResultsTree = field(default_factory=ResultsTree)
    runs: Any = None  # run ids under results.path; null: every run there that is not itself a re-judge
    out: Optional[str] = None  # the results tree the re-judged runs go to; null: results.path
    concurrency: Optional[int] = None  # judge calls in flight; null: the judge backend's default
    batch_size: int = 25
    progress: bool = True


@dataclass
class IndexPipeline:
    """conf/index.yaml"""

    index: IndexBuild = field(default_factory=IndexBuild)
    runtime: IndexRuntime = field(default_factory=IndexRuntime)
    embedder: Any = None  # a conf/embedder mapping (arag.index.embedding.EmbedderSpec's fields)
    corpus: Any = None  # +corpus=<name>
    data_dir: str = MISSING
    progress: bool = True


@dataclass
class GraphPipeline:
    """conf/graph.yaml"""

    graph: GraphConfig = field(default_factory=GraphConfig)
    runtime: GraphPipelineRuntime = field(default_factory=GraphPipelineRuntime)
    index: IndexPath = field(default_factory=IndexPath)
    progress: bool = True


@dataclass
class ServePipeline:
    """conf/serve.yaml"""

    serve: ServeConfig = field(default_factory=ServeConfig)
    tools: ToolOptions = field(default_factory=ToolOptions)
    index: IndexPath = field(default_factory=IndexPath)


@dataclass
class ReportPipeline:
    """conf/report.yaml"""

    results: ResultsTree = field(default_factory=ResultsTree)
    report: ReportConfig = field(default_factory=ReportConfig)


@dataclass
class ViewPipeline:
    """conf/view.yaml"""

    results: ResultsTree = field(default_factory=ResultsTree)
    view: ViewConfig = field(default_factory=ViewConfig)
