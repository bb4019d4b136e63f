"""The runs the viewer shows, read from a results tree through arag.evaluation.results: each run's
settings, identity and episode summaries, one episode's row and trajectory, a question across runs.
Each run is kept until one of its files changes (names, sizes, modification times), and knows which
file holds each question, so an episode page reads one file."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from arag.agent.episode import unpack_messages
from arag.evaluation.episode_facts import FACT_INPUT_COLUMNS, EpisodeFacts, parse_trajectory, row_facts
from arag.evaluation.rows import OK
from arag.report.format import failure_cause
from arag.evaluation.results import RunStore, find_run_dirs, read_row

if TYPE_CHECKING:
    from arag.report.paired import Comparison

# The columns the listing pages need; the trajectory is read with them once, to count the episode's
# facts (arag.evaluation.episode_facts: tool errors, repeated calls, the tool mix, evidence), and then dropped.
SUMMARY_COLUMNS = (
    "run_id", "dataset", "question_id", "question", "gold_answers", "method", "model", "status", "prediction", "failure",
    "max_steps", "reasoning_effort", "forced", "forced_reason", "steps", "tool_calls", "prompt_tokens", "completion_tokens",
    "retrieved_tokens", "llm_acc", "judge_status", "contain_acc", "evidence_recall_seen", "evidence_recall_read", "wall_s",
)  # fmt: skip
# An episode's outcome: the judge's verdict, or why there is none.
OUTCOMES = ("correct", "wrong", "unjudged", "failed")
# How many whole episodes (row and parsed trajectory) a tree keeps: pages revisit the last few.
EPISODES_KEPT = 64


def outcome(row: dict[str, Any]) -> str:
    """correct / wrong by the judge; unjudged: no verdict (or no judge); failed: no answer."""
    if row.get("status") != OK:
        return "failed"
    if row.get("llm_acc") is None:
        return "unjudged"
    return "correct" if row["llm_acc"] >= 0.5 else "wrong"


def listed_facts(facts: EpisodeFacts) -> dict[str, Any]:
    """The facts the listing pages show, counted from the trajectory, as row keys; None where it cannot tell."""
    counted = {"tool_calls": facts.tool_calls} if facts.recorded else {}
    return {
        **counted, "unusable_results": facts.tool_errors, "tool_error_kinds": facts.tool_error_kinds, "repeated": facts.repeated_calls,
        "tool_mix": dict(facts.calls), "evidence_supporting": facts.evidence_supporting, "evidence_seen": facts.evidence_seen,
        "evidence_read": facts.evidence_read, "evidence_recall_seen": facts.evidence_recall_seen, "evidence_recall_read": facts.evidence_recall_read,
    }


@dataclass(frozen=True)
class Identity:
    """What tells a run apart beyond method and model: judge, re-judged run, guard rails, code."""

    judge: str  # "<model> (preset <name>)", or "off"
    guard_rails: str  # as the report names them ("off" when none)
    commit: str | None  # the code that ran the episodes (short)
    judge_commit: str | None  # a re-judged run: the code that judged it again (short)
    rejudged_from: str | None  # a re-judged run: the run whose episodes it scores again


def run_identity(info: dict[str, Any]) -> Identity:
    from arag.evaluation.protocol import guard_rails_label, judge_model_name, judge_preset

    settings = info.get("settings") or {}
    identity = info.get("identity") or {}
    judge = settings.get("judge") or identity.get("judge") or {}
    agent_model = (settings.get("model") or identity.get("model") or {}).get("model")
    if judge and judge.get("enabled", True):
        judge_model = settings.get("judge_model") if settings.get("judge_model") is not None else identity.get("judge_model")
        judged = f"{judge_model_name(judge_model, agent_model)} ({judge_preset(judge)})"
    else:
        judged = "off"
    rails = (settings.get("agent") or identity.get("agent") or {}).get("guard_rails")
    rejudged = info.get("rejudged_from") or identity.get("rejudged_from") or (settings.get("rejudged_from") or {}).get("run_id")

    def short(code: Any) -> str | None:
        commit = (code or {}).get("commit") if isinstance(code, dict) else None
        return str(commit)[:7] if commit else None

    return Identity(judged, guard_rails_label(rails), short(identity.get("code")), short(identity.get("judge_code")), str(rejudged) if rejudged else None)


@dataclass
class Run:
    run_id: str
    path: Path
    info: dict[str, Any]  # run.json
    rows: list[dict[str, Any]]  # SUMMARY_COLUMNS of every stored episode, with its `listed_facts`
    where: dict[str, tuple[Path, int]] = field(default_factory=dict)  # question id → (row file, row index)
    _matches: dict[str, frozenset[str]] = field(default_factory=dict, repr=False)  # text → question ids whose trajectory holds it

    def setting(self, *keys: str) -> Any:
        """A value of run.json's settings, e.g. setting("agent", "max_steps"); None when absent."""
        node: Any = self.info.get("settings") or {}
        for key in keys:
            node = node.get(key) if isinstance(node, dict) else None
        return node

    @property
    def dataset(self) -> str:
        return str(self.setting("dataset") or (self.rows[0]["dataset"] if self.rows else "?"))

    @property
    def method(self) -> str:
        return str(self.setting("method", "name") or (self.rows[0]["method"] if self.rows else "?"))

    @property
    def model(self) -> str:
        return str(self.setting("model", "model") or (self.rows[0]["model"] if self.rows else "?"))

    @property
    def max_steps(self) -> Any:
        return self.setting("agent", "max_steps")

    @property
    def effort(self) -> Any:
        return self.setting("model", "reasoning_effort")

    @cached_property
    def identity(self) -> Identity:
        return run_identity(self.info)

    @property
    def label(self) -> str:
        """What tells this run from its neighbours: method, model and the swept settings."""
        swept = {"max_steps": self.max_steps, "effort": self.effort}
        return " · ".join([self.method, self.model, *(f"{k} {v}" for k, v in swept.items() if v is not None)])

    def sort_key(self) -> tuple:
        steps = float(self.max_steps) if isinstance(self.max_steps, (int, float)) else float("inf")
        return (self.dataset, self.method, self.model, steps, str(self.effort), self.run_id)

    def trajectories_holding(self, text: str) -> frozenset[str]:
        """The question ids whose trajectory holds `text` (any case), read once per version of the run."""
        needle = text.lower()
        if needle not in self._matches:
            found = set()
            for _, rows in RunStore.at(self.path).read_rows_by_file(["question_id", "trajectory"]):
                found.update(r["question_id"] for r in rows if needle in (r["trajectory"] or "").lower())
            if len(self._matches) > 32:
                self._matches.clear()
            self._matches[needle] = frozenset(found)
        return self._matches[needle]


def scores(run: Run, column: str) -> dict[str, float]:
    """{question id: 0/1} of an accuracy column over the run's scored questions (arag.report.format.SCORED)."""
    return {r["question_id"]: r[column] for r in run.rows if r["status"] == OK and r[column] is not None}


def failure_causes(run: Run) -> list[str]:
    """The cause of each failed episode of a run (arag.report.format.failure_cause)."""
    return [failure_cause(r.get("failure")) for r in run.rows if r["status"] != OK]


def read_run(path: Path) -> Run:
    """A run folder: run.json, and each stored row's summary columns and where it is."""
    store = RunStore.at(path)
    info = store.read_info()
    rows: list[dict[str, Any]] = []
    where: dict[str, tuple[Path, int]] = {}
    for file, file_rows in store.read_rows_by_file([*SUMMARY_COLUMNS, *FACT_INPUT_COLUMNS, "trajectory"]):
        for i, row in enumerate(file_rows):
            row.update(listed_facts(row_facts(row, parse_trajectory(row.pop("trajectory")))))
            where[row["question_id"]] = (file, i)
            rows.append(row)
    return Run(path.name, path, info, rows, where)


class ResultsTree:
    """The runs under a results folder, re-read when a run's files change; the last episodes shown kept too."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self._cache: dict[Path, tuple[tuple, Run]] = {}
        self._read_episode = lru_cache(maxsize=EPISODES_KEPT)(_read_episode)  # keyed by the run's version too
        self._comparisons_at = lru_cache(maxsize=1)(self._read_comparisons)  # keyed by the runs' versions

    def runs(self) -> tuple[list[Run], list[str]]:
        """The runs, sorted by dataset, method, model and settings, and a line per folder that could not be read."""
        runs: list[Run] = []
        problems: list[str] = []
        for path in find_run_dirs(self.root):
            stamp = _stamp(path)
            cached = self._cache.get(path)
            if cached is None or cached[0] != stamp:
                try:
                    run = read_run(path)
                except (OSError, ValueError) as exc:  # a broken run.json or Parquet file: the others still show
                    problems.append(f"{path}: {exc}")
                    continue
                cached = self._cache[path] = (stamp, run)
            runs.append(cached[1])
        return sorted(runs, key=Run.sort_key), problems

    def comparisons(self) -> tuple[list[Comparison], str | None]:
        """The report's paired comparisons of this tree, kept until a run's files change, and why not, if so."""
        runs, _ = self.runs()
        return self._comparisons_at(tuple((r.path, self._cache[r.path][0]) for r in runs), any(r.rows for r in runs))

    def _read_comparisons(self, stamps: tuple, any_rows: bool) -> tuple[list[Comparison], str | None]:
        import duckdb

        from arag.report.episodes import connect, varying_settings
        from arag.report.paired import comparisons

        if not any_rows:
            return [], None
        try:
            con = connect(self.root)
            return comparisons(con, varying_settings(con)), None
        except (duckdb.Error, OSError, ValueError) as exc:  # a file the report cannot read: the runs still show
            return [], f"paired comparisons: {exc}"

    def run(self, run_id: str) -> Run | None:
        return next((r for r in self.runs()[0] if r.run_id == run_id), None)

    def episode(self, run: Run, question_id: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The whole row of one episode and its trajectory (with `error` set when it is not readable JSON)."""
        return self._read_episode(*run.where[question_id], self._cache[run.path][0]) if question_id in run.where else None

    def same_question(self, dataset: str, question_id: str) -> list[tuple[Run, dict[str, Any], dict[str, Any]]]:
        return [(run, *self.episode(run, question_id)) for run in self.runs()[0] if run.dataset == dataset and question_id in run.where]


def _read_episode(file: Path, index: int, stamp: tuple) -> tuple[dict[str, Any], dict[str, Any]]:
    """A row and its trajectory; `stamp`, the run's version, only tells a rewritten file apart."""
    row = read_row(file, index)
    trajectory = parse_trajectory(row.get("trajectory"))
    if trajectory.get("messages"):
        trajectory["messages"] = unpack_messages(trajectory)  # each tool result back in the message that showed it
    return row, trajectory


def _stamp(run_dir: Path) -> tuple:
    """Names, sizes and modification times of a run's files: any write changes it."""
    out = []
    for f in RunStore.at(run_dir).files():
        try:
            st = f.stat()
        except OSError:
            continue
        out.append((f.name, st.st_size, st.st_mtime_ns))
    return tuple(sorted(out))
