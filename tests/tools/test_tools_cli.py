"""`python -m arag.tools <index_dir> <tool> '<json>'`, checked from outside as a user would run it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "arag.tools", *args], capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture(scope="module")
def cli_index(edge_index, edge_ctx):
    # edge_ctx has already built the tools cache, so the CLI only opens it.
    return str(edge_index.path)


def test_text_output(cli_index):
    out = cli(cli_index, "keyword_search", '{"keywords": ["Lothair II"], "top_k": 3}')
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("Chunk ID: 0#1, Matched keywords in chunk: ... Lothair II repudiated her. ... The marriage of Lothair II failed. ...")


def test_json_output(cli_index):
    out = cli(cli_index, "keyword_search", '{"keywords": ["tie"]}', "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert [(r["chunk_id"], r["score"], r["snippets"]) for r in data["results"]] == [("5#0", 6.0, ["tie tie."]), ("5#1", 6.0, ["tie tie."])]
    assert data["retrieved_tokens"] > 0 and data["error"] is None


def test_chunk_read_and_full_text(cli_index):
    out = cli(cli_index, "chunk_read", '{"chunk_ids": ["1#1", "zz"]}')
    assert out.returncode == 0 and "previous: 1#0 | next: 1#2" in out.stdout and '["zz"]' in out.stdout
    out = cli(cli_index, "keyword_search", '{"keywords": ["aardvark"]}', "--full-text", "--json")
    assert json.loads(out.stdout)["results"][0]["snippets"] == ["This chunk never names its title. It says aardvark."]


def test_tool_errors_exit_1(cli_index):
    out = cli(cli_index, "keyword_search", '{"keywords": "x"}')
    assert out.returncode == 1 and out.stdout.startswith("Error in keyword_search:")
    out = cli(cli_index, "keyword_search", "{not json", "--json")
    assert out.returncode == 1 and "not valid JSON" in json.loads(out.stdout)["error"]


def test_schema(cli_index):
    out = cli(cli_index, "semantic_search", "--schema")
    schema = json.loads(out.stdout)
    assert schema["function"]["name"] == "semantic_search" and "query" in schema["function"]["parameters"]["properties"]


def test_refuses_incomplete_index(tmp_path, edge_index):
    (tmp_path / "chunks").mkdir()
    out = cli(str(tmp_path), "keyword_search", '{"keywords": ["x"]}')
    assert out.returncode == 2 and "no manifest.json" in out.stderr
    out = cli(str(tmp_path / "missing"), "keyword_search", '{"keywords": ["x"]}')
    assert out.returncode == 2 and "no index directory" in out.stderr
    out = cli(str(edge_index.path), "no_such_tool", "{}")
    assert out.returncode == 2 and "unknown tool" in out.stderr
