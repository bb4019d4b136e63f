"""The `python -m pipelines.index` entry point: clear errors before any work starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


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
