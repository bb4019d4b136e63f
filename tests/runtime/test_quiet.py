"""Output a user need not act on is off by default and `--verbose` brings it back: the library
loggers, the environment Ray's workers start with, the one C++ line Ray's core worker logs for every
actor pool, and a first command (an index build) whose stderr holds no error-looking line."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from arag.verbosity import QUIET_ENV, VERBOSE_ENV, harmless_ray_lines_hidden, quiet_environment, quiet_loggers, set_verbosity

REPO = Path(__file__).resolve().parents[2]
# What the core worker writes on the driver's stderr when Ray Data starts an actor pool (Ray 2.5x).
ACTOR_POOL_LINE = (b"[2026-11-28 00:33:40,676 E 16945 16945] core_worker.cc:2465: Actor with class name: 'MapWorker(Map(_PartEmbedder))' and ID: "
                   b"'e7bacc570696e643e718645d01000000' has constructor arguments in the object store and max_restarts > 0. If the arguments in "
                   b"the object store go out of scope or are lost, the actor restart will fail. See https://github.com/ray-project/ray/issues/53727 for more details.\n")
# A line a newcomer reads as failure: a log level, a traceback, a C++ error-level prefix.
ERROR_LOOKING = re.compile(r"error|warn|traceback|exception|could not|\bE \d+ \d+\]", re.IGNORECASE)


@pytest.fixture
def quiet(monkeypatch):
    monkeypatch.delenv(VERBOSE_ENV, raising=False)


def test_the_verbose_flag_is_taken_off_the_command_line_and_kept_in_the_environment(quiet, monkeypatch):
    assert set_verbosity(["limit=3"]) == ["limit=3"] and VERBOSE_ENV not in os.environ
    assert logging.getLogger("faiss.loader").level == logging.ERROR and logging.getLogger("ray.data").level == logging.ERROR
    assert set_verbosity(["--verbose", "limit=3"]) == ["limit=3"] and os.environ[VERBOSE_ENV] == "1"
    assert logging.getLogger("faiss.loader").level == logging.INFO
    monkeypatch.delenv(VERBOSE_ENV)
    quiet_loggers()


def test_the_quiet_environment_leaves_what_the_user_exported(quiet, monkeypatch):
    for name in QUIET_ENV:  # an earlier test in this process may have quietened it already
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TRANSFORMERS_VERBOSITY", "info")
    assert quiet_environment() == {k: v for k, v in QUIET_ENV.items() if k != "TRANSFORMERS_VERBOSITY"}
    monkeypatch.setenv(VERBOSE_ENV, "1")
    assert quiet_environment() == {}


def write_stderr(*chunks: bytes) -> None:
    for chunk in chunks:
        os.write(2, chunk)


def test_the_actor_pool_line_is_hidden_and_nothing_else(quiet, capfd):
    with harmless_ray_lines_hidden():
        write_stderr(ACTOR_POOL_LINE, b"a real problem\n", b"\rembedding:  50%")
    assert capfd.readouterr().err == "a real problem\n\rembedding:  50%"
    with pytest.raises(KeyError):  # an exception leaves the block with stderr restored
        with harmless_ray_lines_hidden():
            raise KeyError("x")
    write_stderr(b"after\n")
    assert capfd.readouterr().err == "after\n"


def test_verbose_shows_the_actor_pool_line(monkeypatch, capfd):
    monkeypatch.setenv(VERBOSE_ENV, "1")
    with harmless_ray_lines_hidden():
        write_stderr(ACTOR_POOL_LINE)
    assert capfd.readouterr().err == ACTOR_POOL_LINE.decode()


def without_progress_bars(stderr: str) -> list[str]:
    """stderr's lines, each progress bar's updates (carriage returns) dropped."""
    return [line for line in stderr.splitlines() if line.strip() and "\r" not in line and "it/s]" not in line and "/s]" not in line]


@pytest.mark.slow
def test_the_first_command_prints_no_error_looking_line_and_verbose_brings_the_warnings_back(tmp_path):
    """README command 1 in small (a five-document corpus: the same Ray start, chunking tasks, embedding
    actor pool and model load): its stderr holds progress bars only; with --verbose, Ray's warnings."""
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"doc_id": str(i), "title": f"T{i}", "text": f"Document {i} says something. It is about topic {i}."}) + "\n" for i in range(5)))
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", VERBOSE_ENV, "RAY_AUTH_MODE", *QUIET_ENV)}

    def index(*flags: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pipelines.index", *flags, "+corpus=jsonl", f"corpus.path={corpus}", f"index.path={tmp_path / ('idx' + str(len(flags)))}",
                               f"hydra.run.dir={tmp_path / 'h'}", "runtime.num_cpus=2"], capture_output=True, text=True, timeout=600, cwd=REPO, env=env)

    done = index()
    assert done.returncode == 0, done.stderr[-3000:]
    assert "indexed 5 documents" in done.stdout
    shown = [line for line in without_progress_bars(done.stdout + "\n" + done.stderr) if ERROR_LOOKING.search(line)]
    assert not shown, "error-looking lines a user need not act on:\n" + "\n".join(shown)
    loud = index("--verbose")
    assert loud.returncode == 0 and "WARNING" in loud.stderr, loud.stderr[-3000:]
