"""A newcomer's common mistakes with `python -m pipelines.evaluate` (issue 51): each is answered before
any work with one `error:` line naming the setting, the value and what is valid, and exit status 1.
"Before any work": the results folder is never created (the run's folder comes before Ray starts), and
for a mistake on the command line Hydra's job never starts either (its run folder is never created)."""

from __future__ import annotations

import http.server
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from arag.config.files import conf_dir
from tests.conftest import write_jsonl

REPO = Path(__file__).resolve().parents[2]
METHODS = sorted(p.stem for p in (conf_dir() / "method").glob("*.yaml"))
MODELS = sorted(p.stem for p in (conf_dir() / "model").glob("*.yaml"))
CORPORA = sorted(p.stem for p in (conf_dir() / "corpus").glob("*.yaml"))


def evaluate(tmp_path: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(
        [sys.executable, "-m", "pipelines.evaluate", *args, f"results.path={tmp_path / 'results'}", f"hydra.run.dir={tmp_path / 'hydra'}"],
        cwd=REPO, capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})},
    )


def only_line(done: subprocess.CompletedProcess) -> str:
    """The command's one line on stderr, after checking it failed with exit status 1 and said nothing else."""
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "contain-acc" not in done.stdout and "Traceback" not in done.stderr and "HYDRA_FULL_ERROR" not in done.stderr
    return lines[0]


UNKNOWN_CHOICES = [
    (["method=nonexistent"], "error: unknown method=nonexistent; the choices of method (conf/method/): " + ", ".join(METHODS)),
    (["model=gpt4"], "error: unknown model=gpt4; the choices of model (conf/model/): " + ", ".join(MODELS)),
    (["+corpus=2wikimultihop"], "error: unknown corpus=2wikimultihop (did you mean 2wikimultihopqa?); the choices of corpus (conf/corpus/): " + ", ".join(CORPORA)),
    (["-m", "method=arag_full,arag_ful"], "error: unknown method=arag_ful (did you mean arag_full?); the choices of method (conf/method/): " + ", ".join(METHODS)),
    (["smoke=scripted"], "error: smoke=scripted: evaluate's config chooses no smoke to replace; add one with +smoke=scripted (the choices of smoke: scripted)"),
    (["+method=naive_rag"], "error: +method=naive_rag: evaluate's config chooses a method already; replace it with method=naive_rag"),
]


@pytest.mark.parametrize("args, line", UNKNOWN_CHOICES, ids=[" ".join(args) for args, _ in UNKNOWN_CHOICES])
def test_an_unknown_or_misplaced_group_choice_is_one_line_with_the_choices(tmp_path, args, line):
    """Instead of Hydra's error with its search path and HYDRA_FULL_ERROR advice (20 lines)."""
    done = evaluate(tmp_path, "index.path=indexes/2wiki", *args)
    assert only_line(done) == line
    assert not (tmp_path / "hydra").exists() and not (tmp_path / "results").exists()


def test_a_limit_that_is_not_a_number_names_limit_its_value_and_the_type(tmp_path):
    done = evaluate(tmp_path, f"questions.path={tmp_path / 'q.jsonl'}", "model=scripted", "limit=abc")
    assert only_line(done) == "error: setting limit='abc' (a str): limit takes a whole number of questions of at least 1, or null for all of them"
    assert not (tmp_path / "results").exists()


def free_port() -> int:
    """A port nothing listens on: bound, then released (a connection to it is refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_model_endpoint_that_is_not_there_is_named_before_ray_starts(tmp_path):
    url = f"http://127.0.0.1:{free_port()}/v1"
    questions = write_jsonl(tmp_path / "q.jsonl", [{"id": "q0", "question": "Q?", "answers": ["A"], "supporting_titles": []}])
    done = evaluate(tmp_path, f"questions.path={questions}", f"index.path={tmp_path / 'index'}", "method=arag_full", "model=openai", "limit=1",
                    env={"ARAG_OPENAI_BASE_URL": url, "RAY_ADDRESS": ""})
    line = only_line(done)
    assert line.startswith(f"error: model.base_url={url} (from ARAG_OPENAI_BASE_URL): no model endpoint answers there (GET {url}/models: ConnectError: ")
    assert line.endswith("; start the model server, or set model.base_url=<url> or ARAG_OPENAI_BASE_URL=<url>")
    assert "rerun" not in line
    assert not (tmp_path / "results").exists()  # no run folder: it comes before Ray starts


def compose_openai(tmp_path: Path, *overrides: str):
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        return compose(config_name="evaluate", overrides=[f"questions.path={tmp_path / 'q.jsonl'}", f"index.path={tmp_path / 'index'}",
                                                          f"results.path={tmp_path / 'results'}", "model=openai", *overrides])


def test_the_endpoint_check_comes_before_ray_and_the_run_folder(tmp_path, monkeypatch):
    """In process: pipelines.evaluate's main never reaches Ray's start when nothing answers."""
    import arag.runtime.cluster as cluster
    from pipelines.evaluate import main

    def no_ray(*args, **kwargs):
        raise AssertionError("Ray was started")

    monkeypatch.setattr(cluster, "init_ray", no_ray)
    monkeypatch.delenv("ARAG_OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(SystemExit) as ended:
        main(compose_openai(tmp_path, f"model.base_url={url}"))
    assert str(ended.value.code).startswith(f"error: model.base_url={url}: no model endpoint answers there (GET {url}/models: ConnectError: ")
    assert str(ended.value.code).endswith("; start the model server, or set model.base_url=<url>")
    assert not (tmp_path / "results").exists()


def test_the_default_endpoint_says_the_variable_is_not_set(tmp_path, monkeypatch):
    from pipelines.endpoints import endpoint_problem

    monkeypatch.delenv("ARAG_OPENAI_BASE_URL", raising=False)
    cfg = compose_openai(tmp_path)
    assert cfg.model.base_url == "http://127.0.0.1:8000/v1"
    import pipelines.endpoints as endpoints

    asked = []
    # whatever this machine runs on port 8000, the default's wording is what is checked
    monkeypatch.setattr(endpoints, "unreachable", lambda url: asked.append(url) or "ConnectError: refused")
    problem = endpoint_problem(cfg.model, "model")
    assert asked == ["http://127.0.0.1:8000/v1"]
    assert problem is not None and problem.startswith("model.base_url=http://127.0.0.1:8000/v1 (the default: ARAG_OPENAI_BASE_URL is not set): no model endpoint")


class NotFound(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_any_reply_counts_as_an_endpoint_that_is_there(tmp_path, monkeypatch):
    """A server that does not list its models (404), or wants a key (401), still listens: the run's own calls say what is wrong."""
    from arag.llm.endpoint import unreachable
    from pipelines.endpoints import check_model_endpoints

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        assert unreachable(url) is None
        check_model_endpoints(compose_openai(tmp_path, f"model.base_url={url}"))  # raises nothing
    finally:
        server.shutdown()
        server.server_close()
    assert unreachable(url) is not None  # and once it is gone, it is not there


def test_a_loopback_endpoint_is_left_to_the_workers_of_a_cluster(tmp_path, monkeypatch):
    """With RAY_ADDRESS naming a cluster, 127.0.0.1 is each node's own server, which the driver cannot see."""
    from pipelines.endpoints import endpoint_problem

    cfg = compose_openai(tmp_path, f"model.base_url=http://127.0.0.1:{free_port()}/v1")
    monkeypatch.setenv("RAY_ADDRESS", "head:6379")
    assert endpoint_problem(cfg.model, "model") is None
    monkeypatch.setenv("RAY_ADDRESS", "local")
    assert endpoint_problem(cfg.model, "model") is not None


def test_a_run_where_nothing_was_answered_prints_no_accuracy():
    from arag.evaluation.summary import SUMMARY_KEYS, format_summary

    summary = {**dict.fromkeys(SUMMARY_KEYS), "run_id": "r1", "questions": 3, "stored": 3, "ok": 0, "failed": 3, "contain_acc": 0.0, "llm_acc": 0.0, "path": "/tmp/r",
               "failure_causes": [("episode", "model call failed after 4 attempt(s): connection error", 3)]}
    assert format_summary(summary).splitlines() == [
        "evaluated 3/3 questions: 0 answered, 3 failed",
        "no accuracy: none of the 3 stored episodes has an answer (3 failed; most common causes: 3 × model call failed after 4 attempt(s): connection error)",
        "results: /tmp/r",
    ]
    answered = format_summary(summary | {"ok": 1, "failed": 2})
    assert "contain-acc 0.0  llm-acc 0.0" in answered and "no accuracy" not in answered  # one answer: a measured accuracy


@pytest.mark.parametrize("config, arg, start", [
    ("ask", "method=nonexistent", "unknown method=nonexistent; the choices of method (conf/method/): a2rag, "),
    ("index", "+corpus=wikki", "unknown corpus=wikki (did you mean wiki?); the choices of corpus (conf/corpus/): 2wikimultihopqa, "),
    ("graph", "model@graph.extractor.model=gpt4", "unknown model=gpt4; the choices of model (conf/model/): llamacpp_qwen2.5_coder_0.5b, "),
])
def test_every_pipeline_names_the_choices_of_a_group(config, arg, start):
    """The check is the command line's, shared by every pipeline (pipelines.config_checks)."""
    from pipelines.config_checks import check_command_line

    with pytest.raises(ValueError) as caught:
        check_command_line(config, [arg])
    assert str(caught.value).startswith(start) and "\n" not in str(caught.value)
