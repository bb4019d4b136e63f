"""pipelines.rejudge: a finished run's answers scored again by another judge, as a new run beside
it; resume, episodes the source finished since, failed episodes, re-judging a re-judge, bad input."""

from __future__ import annotations

import io
import json

import pytest
from hydra import compose, initialize_config_dir

from arag.report.build import build_report
from arag.runtime.evaluate import evaluate
from arag.runtime.rejudge import rejudge
from pipelines.config_checks import checked_settings
from tests.support.scripted_evaluation import CONF, base_overrides, compose_evaluate, read_rows
from tests.support.report_tables import table

# A second judge model that calls every answer incorrect (exact matches are still skipped as correct).
NAYSAYER = "{backend:scripted,protocol:json,model:naysayer,replay:true,script:[{verdict:incorrect}]}"


def compose_rejudge(*overrides: str):
    """The config `python -m pipelines.rejudge <overrides>` runs, its keys checked as the command checks them."""
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose(config_name="rejudge", overrides=list(overrides))
    checked_settings(cfg)
    return cfg


def run_rejudge(results, *extra):
    out = io.StringIO()
    summaries = rejudge(compose_rejudge(f"results.path={results}", "progress=false", *extra), out=out)
    return summaries, out.getvalue()


def evaluate_source(eval_index, questions_file, results, *extra):
    return evaluate(compose_evaluate(*base_overrides(eval_index.path, questions_file, results, *extra)), out=io.StringIO())


def rows_of(results, run_id):
    return {r["question_id"]: r for r in read_rows(results) if r["run_id"] == run_id}


def test_rejudge_scores_the_stored_answers_again_as_a_new_run(ray_local, eval_index, questions_file, tmp_path):
    results = tmp_path / "results"
    evaluate_source(eval_index, questions_file, results, "limit=2")
    # A slow model and a tight episode time limit (run-time settings: the same run) fail the other four.
    source = evaluate_source(eval_index, questions_file, results, "model.latency_s=0.5", "runtime.episode_timeout_s=0.2")
    assert source["ok"] == 2 and source["failed"] == 4

    (first,), text = run_rejudge(results, "judge=strict", f"judge.model={NAYSAYER}", "batch_size=1")
    new_id = first["run_id"]
    assert new_id != source["run_id"] and first["rejudged_from"] == source["run_id"]
    assert "2 answered episodes, 0 judged before, 2 judged now, 4 failed episodes copied" in text
    old, new = rows_of(results, source["run_id"]), rows_of(results, new_id)
    assert sorted(new) == sorted(old) == ["q0", "q1", "q2", "q3", "q4", "q5"]
    # q0's answer is the gold one (exact match: no judge call); the naysayer calls q1's incorrect,
    # where the source's judge had said correct. Everything the agent did is as it was.
    assert old["q1"]["judge_status"] == "correct" and new["q1"]["judge_status"] == "incorrect" and new["q1"]["llm_acc"] == 0.0
    assert new["q0"]["judge_status"] == "exact_match" and new["q0"]["llm_acc"] == 1.0
    for q in ("q0", "q1"):
        for column in ("prediction", "trajectory", "contain_acc", "retrieved_tokens", "evidence_recall_read", "llm_s", "attempt"):
            assert new[q][column] == old[q][column], (q, column)
        assert new[q]["wall_s"] == pytest.approx(old[q]["wall_s"] - old[q]["judge_s"] + new[q]["judge_s"])  # the new judge's time
    assert all(new[q]["status"] == "failed" and new[q]["failure"] == old[q]["failure"] for q in ("q2", "q3", "q4", "q5"))
    assert first["llm_acc"] == pytest.approx(1 / 6) and first["contain_acc"] == pytest.approx(1 / 6)

    # Identity: the source's, with the judge replaced, the source named and the judging code added.
    info = json.loads((results / new_id / "run.json").read_text())
    source_identity = json.loads((results / source["run_id"] / "run.json").read_text())["identity"]
    identity = info["identity"]
    assert identity["rejudged_from"] == source["run_id"] and identity["judge"]["name"] == "strict" and identity["judge_model"]["model"] == "naysayer"
    assert {k: v for k, v in identity.items() if k not in ("judge", "judge_model", "rejudged_from", "judge_code")} == {
        k: v for k, v in source_identity.items() if k not in ("judge", "judge_model")
    }
    assert json.loads(new["q1"]["settings"]) == identity

    # Resume: nothing to judge again; then the source retries its failed episodes and the re-judge
    # picks them up, each question still stored once.
    (again,), text = run_rejudge(results, "judge=strict", f"judge.model={NAYSAYER}")
    assert again["run_id"] == new_id and "2 judged before, 0 judged now" in text
    evaluate_source(eval_index, questions_file, results)
    # quoted: Hydra reads an unquoted hex run id such as 8e500123 as a number
    (later,), text = run_rejudge(results, "judge=strict", f"judge.model={NAYSAYER}", f"runs=['{source['run_id']}']")
    assert later["run_id"] == new_id and "6 answered episodes, 2 judged before, 4 judged now, 0 failed episodes copied" in text
    new = rows_of(results, new_id)
    assert len(read_rows(results)) == 12 and {r["status"] for r in new.values()} == {"ok"}
    assert not list((results / new_id / "failed").glob("*.parquet"))

    # Re-judging the re-judged run starts from the original run; runs=null skips re-judged runs.
    (chained,), _ = run_rejudge(results, "judge=strict", f"judge.model={NAYSAYER}", f"runs=['{new_id}']")
    assert chained["run_id"] == new_id  # the same judge on the same original run: the same run
    (default_judge,), _ = run_rejudge(results, f"judge.model={NAYSAYER}")  # every original run (one), paper preset
    assert default_judge["rejudged_from"] == source["run_id"] and default_judge["run_id"] not in (new_id, source["run_id"])
    (other,), text = run_rejudge(results, f"judge.model={NAYSAYER}", f"runs=['{new_id}']")  # the paper preset on the re-judged run
    assert other["run_id"] == default_judge["run_id"] and other["rejudged_from"] == source["run_id"]
    assert f"from the original run {source['run_id']}" in text and "6 judged before, 0 judged now" in text

    # The report keeps the three runs apart by judge instead of refusing them.
    main = table(build_report(results, tmp_path / "report").markdown, "Main results")
    assert {"naysayer (preset strict)", "naysayer (preset paper)"} <= set(main.column("judge")) and set(main.column("Method")) == {"A-RAG (Full)"}


def test_rejudge_errors_name_the_problem(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    with pytest.raises(ValueError, match="no runs"):
        run_rejudge(results)
    with pytest.raises(ValueError, match=r"runs=\[\] names no run"):
        run_rejudge(results, "runs=[]")
    with pytest.raises(ValueError, match=r"runs must be a list of run ids, e.g. runs=\[abc\]"):
        run_rejudge(results, "runs=abc")
    with pytest.raises(ValueError, match="judge.enabled=false: re-judging needs a judge"):
        run_rejudge(results, "judge.enabled=false", "runs=[abc]")
    (results / "abc").mkdir()
    (results / "abc" / "run.json").write_text("{}")
    with pytest.raises(ValueError, match="no run nope under .*its runs: abc"):
        run_rejudge(results, "runs=[nope]")
    with pytest.raises(ValueError, match=r"abc/run.json: not a run description"):
        run_rejudge(results, "runs=[abc]")
    with pytest.raises(ValueError, match="judge.verdict_prompt"):
        run_rejudge(results, "+judge.verdict_prompt=x")
    with pytest.raises(ValueError, match="concurency"):
        run_rejudge(results, "+concurency=4")
