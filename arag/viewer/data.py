"""What the viewer shows, read from a results tree through arag.evaluation.results: the runs with
their settings and the summary columns of their episodes, one episode's whole row and trajectory,
and the same question across runs."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arag.agent.episode import unpack_messages
from arag.evaluation.rows import OK
from arag.evaluation.results import RunStore, find_run_dirs

# The columns the listing pages need (the trajectory, the largest column, is read per episode).
SUMMARY_COLUMNS = (
    "run_id", "dataset", "question_id", "question", "gold_answers", "method", "model", "status", "prediction", "failure",
    "max_steps", "reasoning_effort", "forced", "forced_reason", "steps", "tool_calls", "prompt_tokens", "completion_tokens",
    "retrieved_tokens", "llm_acc", "judge_status", "contain_acc", "evidence_recall_seen", "evidence_recall_read", "wall_s",
)  # fmt: skip
# An episode's outcome: the judge's verdict, or why there is none.
OUTCOMES = ("correct", "wrong", "unjudged", "failed")


def outcome(row: dict[str, Any]) -> str:
    """correct / wrong by the judge (LLM-Acc); unjudged: answered but the judge gave no verdict or was off;
    failed: no answer."""
    if row.get("status") != OK:
        return "failed"
    if row.get("llm_acc") is None:
        return "unjudged"
    return "correct" if row["llm_acc"] >= 0.5 else "wrong"


@dataclass
class Run:
    run_id: str
    path: Path
    info: dict[str, Any]  # run.json
    rows: list[dict[str, Any]]  # SUMMARY_COLUMNS of every stored episode

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

    @property
    def label(self) -> str:
        """What tells this run from its neighbours: method, model and the swept settings."""
        parts = [self.method, self.model]
        if self.max_steps is not None:
            parts.append(f"max_steps {self.max_steps}")
        if self.effort is not None:
            parts.append(f"effort {self.effort}")
        return " · ".join(parts)

    def sort_key(self) -> tuple:
        return (self.dataset, self.method, self.model, _num(self.max_steps), str(self.effort), self.run_id)


def scores(run: Run, column: str) -> dict[str, float]:
    """{question id: 0/1} of an accuracy column over the run's scored questions: a failed episode
    scores 0, an answered one whose score is missing (the judge gave no verdict or was off) is left out."""
    return {r["question_id"]: (r[column] if r["status"] == OK else 0.0) for r in run.rows if not (r["status"] == OK and r[column] is None)}


def run_pairs(runs: list[Run]) -> list[tuple[Run, Run]]:
    """The runs compared question by question, chosen as the report chooses them
    (arag.report.paired.pairs) over the settings the viewer shows: model, max steps, effort."""
    from arag.report.paired import RunKey, pairs

    by_id = {r.run_id: r for r in runs}
    keys = [RunKey(r.run_id, r.dataset, r.method, (("model", r.model), ("max_steps", r.max_steps), ("reasoning_effort", r.effort)),
                   r.info.get("settings") or {}, r.info.get("created")) for r in runs]
    return [(by_id[a.run_id], by_id[b.run_id]) for a, b in pairs(keys)]


def _num(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) else float("inf")


class ResultsTree:
    """The runs under a results folder, re-read when a run's files change (an evaluation may still be
    writing) and kept otherwise."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self._cache: dict[Path, tuple[tuple, Run]] = {}

    def runs(self) -> tuple[list[Run], list[str]]:
        """The runs, sorted by dataset, method, model and settings; and one line per run folder that
        could not be read."""
        runs: list[Run] = []
        problems: list[str] = []
        for path in find_run_dirs(self.root):
            stamp = _stamp(path)
            cached = self._cache.get(path)
            if cached is None or cached[0] != stamp:
                store = RunStore.at(path)
                try:
                    run = Run(path.name, path, store.read_info(), store.read_rows(SUMMARY_COLUMNS))
                except (OSError, ValueError) as exc:  # a broken run.json or Parquet file: the others still show
                    problems.append(f"{path}: {exc}")
                    continue
                cached = self._cache[path] = (stamp, run)
            runs.append(cached[1])
        return sorted(runs, key=Run.sort_key), problems

    def run(self, run_id: str) -> Run | None:
        return next((r for r in self.runs()[0] if r.run_id == run_id), None)

    def episode(self, run: Run, question_id: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The whole row of one episode and its trajectory (with `error` set when it is not readable JSON)."""
        rows = RunStore.at(run.path).read_rows(question_id=question_id)
        if not rows:
            return None
        row = rows[0]
        try:
            trajectory = json.loads(row.get("trajectory") or "{}")
        except ValueError as exc:
            trajectory = {"error": f"the trajectory column is not valid JSON ({exc})"}
        if not isinstance(trajectory, dict):
            return row, {}
        if trajectory.get("messages"):
            trajectory["messages"] = unpack_messages(trajectory)  # each tool result back in the message that showed it
        return row, trajectory

    def same_question(self, dataset: str, question_id: str) -> list[tuple[Run, dict[str, Any], dict[str, Any]]]:
        """Every run's episode of one question, in run order."""
        out = []
        for run in self.runs()[0]:
            if run.dataset == dataset and any(r["question_id"] == question_id for r in run.rows):
                found = self.episode(run, question_id)
                if found is not None:
                    out.append((run, *found))
        return out


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


def filter_rows(runs: list[Run], *, run_id: str = "", dataset: str = "", method: str = "", outcome_: str = "", forced: str = "", text: str = "") -> list[tuple[Run, dict[str, Any]]]:
    """The episodes that pass every given filter (an empty one passes all), in run order then by
    question id. forced: "yes" / "no"; text: a substring of the question or its id (any case)."""
    needle = text.strip().lower()
    out = []
    for run in runs:
        if (run_id and run.run_id != run_id) or (dataset and run.dataset != dataset) or (method and run.method != method):
            continue
        for row in sorted(run.rows, key=lambda r: str(r["question_id"])):
            if outcome_ and outcome(row) != outcome_:
                continue
            if forced and bool(row.get("forced")) != (forced == "yes"):
                continue
            if needle and needle not in str(row.get("question") or "").lower() and needle not in str(row["question_id"]).lower():
                continue
            out.append((run, row))
    return out
