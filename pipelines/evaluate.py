"""Evaluate a method on benchmark questions:
`python -m pipelines.evaluate +corpus=2wikimultihopqa index.path=<dir> method=arag_full results.path=<dir> [limit=N]`.

Config → `RunSettings` (the run id) → the run's folder under `results.path` → the questions not yet
answered there → Ray workers (arag.runtime.evaluate_job) → Parquet rows. Rerunning the same command
finishes what is missing; `-m` sweeps run every combination into the same results tree.
"""

from __future__ import annotations

import datetime as dt
import logging
import sys
import time
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from arag.conf_files import conf_dir
from arag.evaluation.judge import JudgeConfig
from arag.evaluation.questions import QuestionFileError, load_questions
from arag.evaluation.results import RunLockedError, RunStore
from arag.evaluation.settings import RunSettings, answer_style_for
from arag.index.fingerprint import index_build_fingerprint
from arag.index.store import IncompleteIndexError, open_index
from arag.methods import method_from_config
from pipelines.settings import check_evaluate_config

log = logging.getLogger("pipelines.evaluate")


def task_overrides() -> list[str]:
    """The command-line overrides of this job (a sweep's settings among them); none outside Hydra's main."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return list(HydraConfig.get().overrides.task)
    except Exception:
        return []


def dataset_name(cfg: DictConfig, questions_name: str) -> str:
    corpus = cfg.get("corpus")
    return str(corpus.name) if corpus is not None and corpus.get("name") else questions_name


def run_settings(cfg: DictConfig, question_set) -> RunSettings:
    method_cfg = OmegaConf.to_container(cfg.method, resolve=True)
    # short answers for the multi-hop sets, free-form for GraphRAG-Bench, unless the method sets one
    method_cfg.setdefault("answer_style", answer_style_for(dataset_name(cfg, question_set.name)))
    method = method_from_config(method_cfg)
    index_path = fingerprint = chunk_ids = None
    index_url = OmegaConf.select(cfg, "index.url", default=None)
    token_env = OmegaConf.select(cfg, "index.token_env", default=None)
    if method.needs_index() and index_url:
        from arag.service.client import open_tools

        with open_tools(index_url=index_url, token_env=token_env, require_tools=method.tools) as served:  # fails now, not in every worker
            fingerprint = served.fingerprint  # the served index's own: the same run as with index.path
            chunk_ids = served.chunk_ids.to_json()
    elif method.needs_index():
        given = OmegaConf.select(cfg, "index.path", throw_on_resolution_failure=False)
        if not given:
            raise ValueError(f"method {method.name} needs an index: give index.path=<dir> or index.url=http://host:port")
        index_path = str(Path(str(given)).resolve())
        chunk_ids = open_index(index_path).chunk_ids.to_json()  # opening fails now, with the path named, rather than in every worker
        fingerprint = index_build_fingerprint(index_path)
    judge = OmegaConf.to_container(cfg.judge, resolve=True)
    judge_model = judge.pop("model", None)
    JudgeConfig.from_dict(judge)  # a bad judge template fails now, named, rather than in every worker
    return RunSettings(
        dataset=dataset_name(cfg, question_set.name),
        method=method_cfg,
        model=OmegaConf.to_container(cfg.model, resolve=True),
        agent=OmegaConf.to_container(cfg.agent, resolve=True),
        judge=judge,
        judge_model=judge_model,
        questions_path=str(question_set.path.resolve()),
        questions_sha256=question_set.sha256,
        index_path=index_path,
        index_build_fingerprint=fingerprint,
        index_url=str(index_url) if method.needs_index() and index_url else None,
        index_token_env=token_env,
        chunk_ids=chunk_ids,
    )


def resolved_config(cfg: DictConfig) -> dict[str, Any]:
    """The whole config with interpolations resolved; keys that cannot resolve (e.g. corpus-based
    defaults when no corpus was chosen) are kept as written."""
    try:
        return OmegaConf.to_container(cfg, resolve=True)
    except Exception:
        return OmegaConf.to_container(cfg, resolve=False)


def evaluate(cfg: DictConfig, *, out=sys.stdout) -> dict[str, Any]:
    """Run (or finish) the evaluation `cfg` describes; returns the run's summary."""
    from arag.runtime.cluster import init_ray
    from arag.runtime.evaluate_job import EvalRuntime, run_episodes

    started = time.time()
    check_evaluate_config(cfg)
    questions_path = OmegaConf.select(cfg, "questions.path", throw_on_resolution_failure=False)
    if not questions_path:
        raise QuestionFileError("choose the benchmark with +corpus=<name> (its questions.jsonl in data_dir) or give questions.path=<file>")
    question_set = load_questions(str(questions_path), str(cfg.questions.on_bad_line))
    if question_set.rejects:
        print(f"{len(question_set.rejects)} bad lines in {question_set.path} were skipped (questions.on_bad_line=skip):", file=out)
        for reject in question_set.rejects[:5]:
            print(f"  {reject.describe(question_set.path)}", file=out)
    settings = run_settings(cfg, question_set)
    overrides = task_overrides()
    runtime = EvalRuntime.from_dict(OmegaConf.to_container(cfg.runtime, resolve=True))
    limit = cfg.get("limit")
    selected = question_set.questions[: int(limit)] if limit is not None else question_set.questions
    with RunStore(str(cfg.results.path), settings.run_id) as store:
        store.write_run_info(
            {
                "run_id": settings.run_id,
                "created": dt.datetime.now(dt.timezone.utc).isoformat(),
                "identity": settings.identity(),
                "settings": settings.to_json(),
                "overrides": overrides,
                "questions": {"path": str(question_set.path), "sha256": question_set.sha256, "count": len(question_set.questions), "rejected": [r.describe(question_set.path) for r in question_set.rejects]},
                "config": resolved_config(cfg),
            }
        )
        done = store.done_ids()
        todo = [q for q in selected if q.id not in done]
        attempts = store.claim_failed(q.id for q in todo)
        print(
            f"run {settings.run_id} ({settings.dataset}, {settings.method_name}, {settings.model.get('model')}): "
            f"{len(selected)} questions, {len(selected) - len(todo)} already answered, {len(attempts)} failed before (retrying), {len(todo)} to run",
            file=out,
        )
        counts = None
        if todo:
            init_ray(num_cpus=cfg.runtime.num_cpus)  # logs the cluster it joined or started
            counts = run_episodes(settings, todo, store, runtime, attempts=attempts, overrides=overrides, progress=bool(cfg.progress))
        summary = summarize_run(store.root, [q.id for q in selected])
        store.log_invocation(
            {
                "started": dt.datetime.fromtimestamp(started, dt.timezone.utc).isoformat(),
                "finished": dt.datetime.now(dt.timezone.utc).isoformat(),
                "selected": len(selected),
                "to_run": len(todo),
                "ran": counts.ran if counts else 0,
                "ok": counts.ok if counts else 0,
                "failed": counts.failed if counts else 0,
                "requeued": counts.requeued if counts else 0,
                "workers_lost": counts.workers_lost if counts else 0,
                "wall_s": counts.wall_s if counts else 0.0,
                "runtime": OmegaConf.to_container(cfg.runtime, resolve=True),
                "overrides": overrides,
            }
        )
    summary.update(run_id=settings.run_id, path=str(store.root), ran=counts.ran if counts else 0, wall_s=counts.wall_s if counts else 0.0)
    summary["per_min"] = counts.per_min if counts else 0.0
    summary["requeued"] = counts.requeued if counts else 0
    summary["workers_lost"] = counts.workers_lost if counts else 0
    print(format_summary(summary), file=out)
    return summary


def summarize_run(run_dir: Path, question_ids: list[str]) -> dict[str, Any]:
    """Averages over the selected questions stored in the run (DuckDB over its Parquet files)."""
    import duckdb
    import pyarrow as pa

    files = [str(p) for p in sorted(run_dir.glob("*/*.parquet"))]
    empty = {"questions": len(question_ids), "stored": 0, "ok": 0, "failed": 0}
    if not files:
        return empty
    con = duckdb.connect()
    con.register("wanted", pa.table({"qid": pa.array(question_ids, pa.string())}))
    row = con.execute(
        """
        SELECT count(*), count(*) FILTER (status = 'ok'), count(*) FILTER (status = 'failed'),
               avg(contain_acc) FILTER (coalesce(judge_status, '') <> 'failed'), avg(llm_acc), count(*) FILTER (judge_status = 'failed'), avg(exact_match), avg(f1),
               avg(evidence_recall_read), avg(evidence_recall_seen), avg(retrieved_tokens), avg(steps), avg(wall_s)
        FROM read_parquet($files) WHERE question_id IN (SELECT qid FROM wanted)
        """,
        {"files": files},
    ).fetchone()
    keys = ["stored", "ok", "failed", "contain_acc", "llm_acc", "judge_failed", "exact_match", "f1", "evidence_recall_read", "evidence_recall_seen", "retrieved_tokens", "steps", "wall_s_per_episode"]
    return {"questions": len(question_ids), **dict(zip(keys, row))}


def format_summary(s: dict[str, Any]) -> str:
    def pct(key: str) -> str:
        v = s.get(key)
        return "-" if v is None else f"{100 * v:.1f}"

    lines = [
        f"evaluated {s['stored']}/{s['questions']} questions: {s['ok']} answered, {s['failed']} failed"
        + (f" ({s['ran']} run now in {s['wall_s']:.1f}s, {s['per_min']:.0f} episodes/min" + (f", {s['requeued']} requeued after {s['workers_lost']} lost workers" if s.get("workers_lost") else "") + ")" if s.get("ran") else ""),
    ]
    if s["stored"]:
        lines.append(
            f"contain-acc {pct('contain_acc')}  llm-acc {pct('llm_acc')}"
            + (f" (both over the same questions: {s['judge_failed']} judge failures left out)" if s.get("judge_failed") else "")
            + f"  EM {pct('exact_match')}  F1 {pct('f1')}  evidence read {pct('evidence_recall_read')} / seen {pct('evidence_recall_seen')}"
            + f"  retrieved tokens {s['retrieved_tokens'] or 0:.0f}  steps {s['steps'] or 0:.1f}"
        )
    lines.append(f"results: {s['path']}")
    return "\n".join(lines)


@hydra.main(config_path=str(conf_dir()), config_name="evaluate", version_base="1.3")
def main(cfg: DictConfig) -> None:
    from arag.runtime.evaluate_job import EvaluationError
    from arag.service.client import ToolServerError

    try:
        summary = evaluate(cfg)
    except (QuestionFileError, RunLockedError, EvaluationError, IncompleteIndexError, FileNotFoundError, ImportError, ValueError, ToolServerError) as exc:
        sys.exit(f"error: {exc}")
    except KeyboardInterrupt:
        print("interrupted: the episodes received so far are stored; rerun the same command to finish", file=sys.stderr)
        sys.exit(130)
    if summary["stored"] < summary["questions"]:
        sys.exit(f"error: {summary['questions'] - summary['stored']} questions have no stored result; rerun the same command to finish them")


if __name__ == "__main__":
    main()
