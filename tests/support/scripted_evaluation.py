"""Fixtures for the evaluation tests: a tiny 2Wiki-like index (written directly, no pipeline), its
questions file, and Hydra configs for `pipelines.evaluate` with the scripted backend.

The scripted agent searches by keyword, reads one chunk and answers "20 March 851" (replayed for
every question); keyword search and chunk_read need no embedding model, so workers start fast.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from arag.config.files import conf_dir
from tests.conftest import write_jsonl
from tests.support.tiny_index import Doc, make_index

CONF = str(conf_dir())

EVAL_DOCS = [
    Doc("0", "Teutberga", [["Teutberga died 11 November 875.", "She was a queen of Lotharingia by marriage to Lothair II."]]),
    Doc("1", "Lothair II", [["Lothair II was the king of Lotharingia from 855.", "His mother was Ermengarde of Tours."], ["Lothair II died in 869."]]),
    Doc("2", "Ermengarde of Tours", [["Ermengarde of Tours was the wife of Lothair I.", "She died on 20 March 851."]]),
    Doc("3", "Phoolwari", [["Phoolwari is a 1946 Indian film.", "It was directed by Chaturbhuj Doshi."]], part=1),
    Doc("4", "Aas Ka Panchhi", [["Aas Ka Panchhi is a 1961 Hindi film."]], part=1),
]

QUESTIONS = [
    {"id": "q0", "question": "When did Lothair II's mother die?", "answers": ["20 March 851"], "supporting_titles": ["Lothair II", "Ermengarde of Tours"]},
    {"id": "q1", "question": "Which film came out first, Aas Ka Panchhi or Phoolwari?", "answers": ["Phoolwari"], "supporting_titles": ["Aas Ka Panchhi", "Phoolwari"]},
    {"id": "q2", "question": "When did Teutberga die?", "answers": ["11 November 875"], "supporting_titles": ["Teutberga"]},
    {"id": "q3", "question": "Who directed Phoolwari?", "answers": ["Chaturbhuj Doshi"], "supporting_titles": ["Phoolwari"]},
    {"id": "q4", "question": "When did Ermengarde of Tours die?", "answers": ["20 March 851", "851"], "supporting_titles": ["Ermengarde of Tours"]},
    {"id": "q5", "question": "Who was Lothair II's wife?", "answers": ["Teutberga"], "supporting_titles": []},
]

# Hydra override syntax for the replayed script: keyword search, read Ermengarde's chunk, answer.
SCRIPT = "[{tool:keyword_search,arguments:{keywords:[Lothair]}},{tool:chunk_read,arguments:{chunk_ids:['2#0']}},{answer:'20 March 851'}]"
JUDGE = "{backend:scripted,protocol:json,model:judge,replay:true,script:[{verdict:correct}]}"


@pytest.fixture(scope="session")
def eval_index(tmp_path_factory):
    return make_index(tmp_path_factory.mktemp("eval") / "index", EVAL_DOCS)


@pytest.fixture
def questions_file(tmp_path) -> Path:
    return write_jsonl(tmp_path / "bench" / "questions.jsonl", QUESTIONS)


def base_overrides(index: Path, questions: Path, results: Path, *extra: str) -> list[str]:
    return [
        f"index.path={index}",
        f"questions.path={questions}",
        f"results.path={results}",
        "model=scripted",
        "model.replay=true",
        f"model.script={SCRIPT}",
        f"judge.model={JUDGE}",
        "runtime.worker_cpus=0.5",
        "progress=false",
        *extra,
    ]


def compose_evaluate(*overrides: str):
    """The typed settings `python -m pipelines.evaluate <overrides>` runs, checked as the command checks them."""
    from pipelines.config_checks import checked_settings

    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        return checked_settings(compose(config_name="evaluate", overrides=list(overrides)))


def read_rows(results: Path) -> list[dict]:
    import duckdb

    files = sorted(str(p) for p in results.glob("**/*.parquet"))
    if not files:
        return []
    rel = duckdb.sql(f"SELECT * FROM read_parquet({json.dumps(files)}) ORDER BY run_id, question_id")
    return [dict(zip(rel.columns, r)) for r in rel.fetchall()]
