"""A run's one-paragraph summary: averages over its stored rows (DuckDB over the files the results
store lists), as `pipelines.evaluate` and `pipelines.rejudge` print them."""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable

import duckdb
import pyarrow as pa

from arag.evaluation.results import RunStore

TOP_CAUSES = 3  # causes a summary names per kind (episode, judge), the most common first
SUMMARY_KEYS = (
    "stored", "ok", "failed", "contain_acc", "llm_acc", "judge_failed", "exact_match", "f1",
    "evidence_recall_read", "evidence_recall_seen", "retrieved_tokens", "steps", "wall_s_per_episode",
)


def summarize_run(store: RunStore, question_ids: Iterable[str] | None = None) -> dict[str, Any]:
    """Averages over the stored rows of `question_ids` (None: every question stored)."""
    files = [str(p) for p in store.row_files()]
    con = duckdb.connect()
    if files:
        con.read_parquet(files, union_by_name=True).create_view("rows")
    ids = list(question_ids) if question_ids is not None else [q for (q,) in con.execute("SELECT DISTINCT question_id FROM rows").fetchall()] if files else []
    summary: dict[str, Any] = {"questions": len(ids), **dict.fromkeys(SUMMARY_KEYS), "stored": 0, "ok": 0, "failed": 0, "failure_causes": [], "run_id": store.run_id, "path": str(store.root)}
    if not files:
        return summary
    con.register("wanted", pa.table({"qid": pa.array(ids, pa.string())}))
    row = con.execute(
        """
        SELECT count(*), count(*) FILTER (status = 'ok'), count(*) FILTER (status = 'failed'),
               avg(contain_acc) FILTER (coalesce(judge_status, '') <> 'failed'), avg(llm_acc), count(*) FILTER (judge_status = 'failed'), avg(exact_match), avg(f1),
               avg(evidence_recall_read), avg(evidence_recall_seen), avg(retrieved_tokens), avg(steps), avg(wall_s)
        FROM rows WHERE question_id IN (SELECT qid FROM wanted)
        """
    ).fetchone()
    causes = con.execute(
        """
        SELECT CASE WHEN status = 'failed' THEN 'episode' ELSE 'judge' END, CASE WHEN status = 'failed' THEN failure ELSE judge_error END
        FROM rows WHERE question_id IN (SELECT qid FROM wanted) AND (status = 'failed' OR judge_status = 'failed')
        """
    ).fetchall()
    counted = Counter((kind, first_line(cause or "no cause recorded")) for kind, cause in causes).most_common()
    top = [(kind, cause, n) for wanted in ("episode", "judge") for (kind, cause), n in [c for c in counted if c[0][0] == wanted][:TOP_CAUSES]]
    return summary | dict(zip(SUMMARY_KEYS, row)) | {"failure_causes": top}


def first_line(text: str, width: int = 160) -> str:
    line = (text.strip().splitlines() or [""])[0]
    return line if len(line) <= width else line[: width - 1] + "…"


def unfinished(s: dict[str, Any], *, judge_failures: bool = False) -> str | None:
    """The line a command exits non-zero with when the rows hold failures (None without)."""
    failed, judged = s.get("failed") or 0, (s.get("judge_failed") or 0) if judge_failures else 0
    if not failed + judged:
        return None
    causes = [(kind, cause, n) for kind, cause, n in s.get("failure_causes") or [] if judge_failures or kind == "episode"]
    counts = ", ".join([*([f"{failed} failed episodes"] if failed else []), *([f"{judged} judge failures (no verdict)"] if judged else [])])
    listed = "; ".join(f"{n} × {kind}: {cause}" if judge_failures else f"{n} × {cause}" for kind, cause, n in causes)
    return f"run {s['run_id']}, {s['questions']} questions: {counts}" + (f" (most common causes: {listed})" if listed else "")


def unscored(s: dict[str, Any]) -> str:
    """The line in place of the accuracies when no episode has an answer: a score over failures only
    would read as a measured 0."""
    causes = "; ".join(f"{n} × {cause}" for kind, cause, n in s.get("failure_causes") or [] if kind == "episode")
    return f"no accuracy: none of the {s['stored']} stored episodes has an answer ({s['failed']} failed" + (f"; most common causes: {causes})" if causes else ")")


def format_summary(s: dict[str, Any]) -> str:
    def pct(key: str) -> str:
        v = s.get(key)
        return "-" if v is None else f"{100 * v:.1f}"

    lines = [
        f"evaluated {s['stored']}/{s['questions']} questions: {s['ok']} answered, {s['failed']} failed"
        + (f" ({s['ran']} run now in {s['wall_s']:.1f}s, {s['per_min']:.0f} episodes/min" + (f", {s['requeued']} requeued after {s['workers_lost']} lost workers" if s.get("workers_lost") else "") + ")" if s.get("ran") else ""),
    ]
    if s["stored"] and not s["ok"]:
        lines.append(unscored(s))
    elif s["stored"]:
        lines.append(
            f"contain-acc {pct('contain_acc')}  llm-acc {pct('llm_acc')}"
            + (f" (both over the same questions: {s['judge_failed']} judge failures left out)" if s.get("judge_failed") else "")
            + f"  EM {pct('exact_match')}  F1 {pct('f1')}  evidence read {pct('evidence_recall_read')} / seen {pct('evidence_recall_seen')}"
            + f"  retrieved tokens {s['retrieved_tokens'] or 0:.0f}  steps {s['steps'] or 0:.1f}"
        )
    lines.append(f"results: {s['path']}")
    return "\n".join(lines)
