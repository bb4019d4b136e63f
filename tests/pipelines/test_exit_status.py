"""The commands tell the truth: pipelines.evaluate and pipelines.rejudge end with exit status 1 and
one line per incomplete run (how many failed, the most common causes) when failed rows remain;
the shipped no-LLM smoke run (`+smoke=scripted`) answers its question and ends with status 0."""

from __future__ import annotations

import io

import pytest
from hydra import compose, initialize_config_dir

from arag.evaluation.summary import unfinished
from arag.runtime.evaluate import evaluate
from pipelines.config_checks import checked_settings
from tests.support.scripted_evaluation import CONF, base_overrides, compose_evaluate, read_rows

# A judge whose every call fails: each question it is asked about gets no verdict.
BROKEN_JUDGE = "{backend:scripted,protocol:json,model:broken,replay:true,script:[{error:'judge endpoint down'}]}"


def exit_line(main, cfg) -> str | None:
    """What the command's main ends with: its error line, or None for exit status 0."""
    try:
        main(cfg)
    except SystemExit as done:
        assert done.code not in (0, None)
        return str(done.code)
    return None


def test_evaluate_exits_1_naming_the_failed_episodes_and_their_cause(ray_local, eval_index, questions_file, tmp_path, capfd):
    from pipelines.evaluate import main

    results = tmp_path / "results"
    # max_steps=1: the scripted agent's second action comes in the forced final call, which is no answer.
    line = exit_line(main, compose_evaluate(*base_overrides(eval_index.path, questions_file, results, "agent.max_steps=1")))
    assert line is not None and line.startswith("error: run ") and "6 questions: 6 failed episodes" in line
    assert "most common causes: 6 × the forced final reply was not an answer" in line and "rerun the same command" in line
    printed = capfd.readouterr().out  # nothing answered: no accuracy, the failures instead
    assert "contain-acc" not in printed and "no accuracy: none of the 6 stored episodes has an answer (6 failed; most common causes: 6 × the forced final reply" in printed
    assert exit_line(main, compose_evaluate(*base_overrides(eval_index.path, questions_file, results))) is None  # a complete run: status 0


def test_rejudge_exits_1_naming_the_questions_without_a_verdict(ray_local, eval_index, questions_file, tmp_path):
    from pipelines.rejudge import main

    results = tmp_path / "results"
    source = evaluate(compose_evaluate(*base_overrides(eval_index.path, questions_file, results)), out=io.StringIO())
    assert source["failed"] == 0
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose(config_name="rejudge", overrides=[f"results.path={results}", "progress=false", "judge=strict", f"judge.model={BROKEN_JUDGE}"])
    checked_settings(cfg)
    line = exit_line(main, cfg)
    # q0's and q4's answers are gold ones (exact matches: no judge call); the other four get no verdict.
    assert line is not None and "6 questions: 4 judge failures (no verdict)" in line and "4 × judge: LLMError: judge endpoint down" in line


def test_a_summary_names_the_most_common_causes_first():
    summary = {"run_id": "r1", "questions": 10, "failed": 4, "judge_failed": 2,
               "failure_causes": [("episode", "timeout", 3), ("episode", "model error", 1), ("judge", "unusable reply", 2)]}
    assert unfinished(summary) == "run r1, 10 questions: 4 failed episodes (most common causes: 3 × timeout; 1 × model error)"
    assert unfinished(summary, judge_failures=True) == (
        "run r1, 10 questions: 4 failed episodes, 2 judge failures (no verdict) "
        "(most common causes: 3 × episode: timeout; 1 × episode: model error; 2 × judge: unusable reply)")
    assert unfinished(summary | {"failed": 0}) is None


def test_the_shipped_smoke_run_answers_its_question_without_a_model(ray_local, eval_index, questions_file, tmp_path):
    """conf/smoke/scripted.yaml over the test index: its script's search, read (of the 2Wiki index's
    chunk 0:0, unknown here: a tool error the agent goes on from) and answer, judged by its scripted judge."""
    from pipelines.evaluate import main

    results = tmp_path / "results"
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose(config_name="evaluate", overrides=["+smoke=scripted", f"index.path={eval_index.path}", f"questions.path={questions_file}",
                                                         f"results.path={results}", "runtime.worker_cpus=0.5"])
    checked_settings(cfg)
    assert cfg.model.backend == "scripted" and cfg.judge.model.backend == "scripted" and cfg.limit == 1
    assert exit_line(main, cfg) is None
    (row,) = read_rows(results)
    assert row["question_id"] == "q0" and row["status"] == "ok" and row["prediction"] == "20 March 851" and row["llm_acc"] == 1.0
    assert row["calls_keyword_search"] == 1 and row["calls_chunk_read"] == 1


@pytest.mark.parametrize("judge_failures", [False, True])
def test_a_clean_summary_is_complete(judge_failures):
    assert unfinished({"run_id": "r", "questions": 3, "failed": 0, "judge_failed": 0, "failure_causes": []}, judge_failures=judge_failures) is None


@pytest.mark.parametrize("ids", ["8e500123", "0a012345,8e500123"])
def test_rejudge_names_the_run_ids_as_typed_not_as_hydra_read_them(tmp_path, ids):
    """Unquoted, 8e500123 is a number to Hydra (infinity); the error names the ids the user typed."""
    import subprocess
    import sys

    (tmp_path / "results").mkdir()
    done = subprocess.run([sys.executable, "-m", "pipelines.rejudge", f"results.path={tmp_path / 'results'}", f"runs=[{ids}]", f"hydra.run.dir={tmp_path / 'hydra'}"],
                          cwd=CONF.rsplit("/conf", 1)[0], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and done.stderr.strip() == f"error: no run {ids.replace(',', ', ')} under {tmp_path / 'results'}; its runs: none", done.stderr


def test_rejudge_names_a_bare_run_id_as_typed(tmp_path):
    """runs takes a list: a bare id is named as typed in the error, not as the number Hydra read."""
    import subprocess
    import sys

    (tmp_path / "results").mkdir()
    done = subprocess.run([sys.executable, "-m", "pipelines.rejudge", f"results.path={tmp_path / 'results'}", "runs=8e500123", f"hydra.run.dir={tmp_path / 'hydra'}"],
                          cwd=CONF.rsplit("/conf", 1)[0], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and done.stderr.strip() == "error: runs must be a list of run ids, e.g. runs=[8e500123], got '8e500123'", done.stderr
