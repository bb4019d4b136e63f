"""The `python -m pipelines.index` entry point: clear errors before any work starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def run(*overrides: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pipelines.index", *overrides, "hydra.run.dir=/tmp/arag-test-hydra", "progress=false"],
        cwd=cwd, capture_output=True, text=True, timeout=120,
    )


def test_missing_corpus_choice_is_explained():
    result = run()
    assert result.returncode != 0
    assert "+corpus=<name>" in result.stderr


def test_missing_input_path_is_named(tmp_path):
    result = run("+corpus=jsonl", f"corpus.path={tmp_path}/nope.jsonl", f"index.path={tmp_path}/idx")
    assert result.returncode != 0
    assert f"input path does not exist: {tmp_path}/nope.jsonl" in result.stderr
    assert not (tmp_path / "idx" / "manifest.json").exists()


def test_unknown_format_and_bad_chunk_size_are_named(tmp_path):
    (tmp_path / "c.jsonl").write_text('{"doc_id": "a", "text": "x"}\n')
    result = run("+corpus=jsonl", f"corpus.path={tmp_path}/c.jsonl", "corpus.format=xml", f"index.path={tmp_path}/idx")
    assert result.returncode != 0 and "unknown format 'xml'" in result.stderr
    result = run("+corpus=jsonl", f"corpus.path={tmp_path}/c.jsonl", "index.chunk_tokens=2", f"index.path={tmp_path}/idx")
    assert result.returncode != 0 and "chunk_tokens must be at least" in result.stderr


ISSUE_42_COMMAND_LINES = [
    # As the shell hands them over: `limt=3`, and `qustion="When did Lothair II's mother die?"` (its quotes gone, the apostrophe kept).
    ("evaluate", ["+corpus=2wikimultihopqa", "index.path=indexes/2wiki", "limt=3"], "error: unknown setting limt (did you mean limit?)"),
    ("ask", ["index.path=indexes/2wiki", "method=arag_full", "qustion=When did Lothair II's mother die?"], "error: unknown setting qustion (did you mean question?)"),
    ("ask", ["--verbose", "qustion=When did Lothair II's mother die?"], "error: unknown setting qustion (did you mean question?)"),
    ("ask", ["question=x's y", "qustion=z"], "error: unknown setting qustion (did you mean question?)"),
]


@pytest.mark.parametrize("pipeline, args, first", ISSUE_42_COMMAND_LINES)
def test_a_misspelled_or_badly_quoted_setting_is_our_one_line_before_hydra(tmp_path, pipeline, args, first):
    """Our check runs before Hydra: no "To append to your config use +limt=3" (wrong advice), no lexer traceback."""
    done = subprocess.run([sys.executable, "-m", f"pipelines.{pipeline}", *args, f"hydra.run.dir={tmp_path}"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [done.stderr.strip()] and done.stderr.startswith(first), done.stderr
    assert "+limt" not in done.stderr and "Traceback" not in done.stderr and "append" not in done.stderr


def test_a_correctly_spelled_question_with_an_apostrophe_passes_the_check(tmp_path):
    done = subprocess.run([sys.executable, "-m", "pipelines.ask", f"index.path={tmp_path / 'none'}", "question=When did Lothair II's mother die?",
                           f"hydra.run.dir={tmp_path}"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and done.stderr.strip() == f"error: no index directory at {tmp_path / 'none'}"  # past the settings, to the index
