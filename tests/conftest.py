"""Shared fixtures: small corpora written on the fly, a Ray instance shared by a test session."""

from __future__ import annotations

import bz2
import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # tests talk only to Ray instances they start
os.environ.setdefault("RAY_DEDUP_LOGS", "0")

# Fixtures that tests in several rooms use (tiny indexes, the scripted evaluation's inputs, a tool server
# started for real): defined in tests/support/, named here because a fixture in one folder's conftest is
# not visible to its sibling folders.
pytest_plugins = [
    "tests.support.tiny_index",
    "tests.support.agent_index",
    "tests.support.scripted_evaluation",
    "tests.support.graph_index",
    "tests.support.tool_server",
]


def write_jsonl(path: Path, rows: list[dict | str | bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        for row in rows:
            if isinstance(row, dict):
                row = json.dumps(row, ensure_ascii=False)
            if isinstance(row, str):
                row = row.encode("utf-8")
            f.write(row + b"\n")
    return path


def wiki_doc(doc_id: str, title: str, body: str) -> str:
    return f'<doc id="{doc_id}" url="https://en.wikipedia.org/wiki?curid={doc_id}" title="{title}">\n{title}\n\n{body}\n</doc>\n'


def write_wiki(path: Path, docs: list[tuple[str, str, str]], compress: bool = True, level: int = 9) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(wiki_doc(*d) for d in docs).encode("utf-8")
    path.write_bytes(bz2.compress(data, compresslevel=level) if compress else data)
    return path


SAMPLE_PASSAGES = [
    {"doc_id": "0", "title": "Teutberga", "text": "Teutberga (died 11 November 875) was a queen of Lotharingia by marriage to Lothair II. She was a daughter of Boso the Elder."},
    {"doc_id": "1", "title": "Lothair II", "text": "Lothair II was the king of Lotharingia from 855 until his death. His mother was Ermengarde of Tours."},
    {"doc_id": "2", "title": "Ermengarde of Tours", "text": "Ermengarde of Tours was the wife of Lothair I. She died on 20 March 851."},
    {"doc_id": "3", "title": "Phoolwari", "text": "Phoolwari is a 1946 Indian film. It was directed by Chaturbhuj Doshi."},
    {"doc_id": "4", "title": "Aas Ka Panchhi", "text": "Aas Ka Panchhi is a 1961 Hindi film. The music was composed by Shankar Jaikishan. It was a box office success."},
]


@pytest.fixture
def passages_corpus(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "corpus" / "corpus.jsonl", SAMPLE_PASSAGES)


@pytest.fixture
def ray_local():
    """A small local Ray instance, started once and shared by the tests that run the pipeline
    in-process (started again if a cluster test shut it down)."""
    import ray

    from arag.runtime.cluster import init_ray

    init_ray(num_cpus=2)
    return ray


# Optional parts (the embedded model, llama.cpp's server, vLLM, the real 2Wiki index) skip their tests
# where they are absent, which is right on a laptop and wrong in CI: there `.ci/run` installs them and
# names the test files in ARAG_REQUIRE_TESTS; tests/support/required_tests.py fails the run when one of them
# skips or is not there at all.
def pytest_configure(config) -> None:
    from tests.support.required_tests import RequiredTests

    config.pluginmanager.register(RequiredTests.from_env(config), "arag-required-tests")
