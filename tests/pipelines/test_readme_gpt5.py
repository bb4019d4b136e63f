"""The manual's GPT-5-mini commands (docs/evaluation.md: the test-time-scaling sweeps and their report), run as written
against an in-process stand-in for OpenAI's endpoint that refuses what OpenAI documents GPT-5 models
to refuse (the openai_endpoint preset of tests/support/model_server.py, served on 127.0.0.1 by
uvicorn and named by ARAG_OPENAI_BASE_URL), on the tiny evaluation index. Slow: two Hydra multiruns on local Ray."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from arag.config.files import conf_dir
from tests.support.model_server import openai_endpoint, serve
from tests.conftest import write_jsonl
from tests.support.scripted_evaluation import QUESTIONS, read_rows

pytest.importorskip("httpx")
pytest.importorskip("uvicorn", reason="serving the mock needs uvicorn (pip install -e '.[serve]')")

pytestmark = pytest.mark.slow

REPO = Path(conf_dir()).parent
PAGE = REPO / "docs" / "evaluation.md"  # where the commands are documented


def readme_gpt5_block() -> list[str]:
    """The manual's command lines in the bash block that runs GPT-5-mini (continuations joined)."""
    blocks = re.findall(r"```bash\n(.*?)```", PAGE.read_text(), flags=re.S)
    found = [b for b in blocks if "model.model=gpt-5-mini" in b]
    assert len(found) == 1, f"expected one bash block running gpt-5-mini in {PAGE.name}, found {len(found)}"
    return [line.strip() for line in found[0].replace("\\\n", " ").splitlines() if line.strip()]


def test_the_readme_block_names_the_endpoint_by_environment():
    lines = readme_gpt5_block()
    exports = [line for line in lines if line.startswith("export ")]
    assert exports and "ARAG_OPENAI_BASE_URL=https://api.openai.com/v1" in exports[0]
    commands = [line for line in lines if line.startswith("python -m ")]
    assert len(commands) == 3 and all("base_url" not in c for c in commands)  # the endpoint comes from the environment


def test_the_readme_gpt5_commands_run_against_the_mock(eval_index, tmp_path):
    commands = [shlex.split(line, comments=True) for line in readme_gpt5_block() if line.startswith("python -m ")]
    # The commands' relative paths, in a scratch folder: indexes/2wiki is the tiny index, the
    # benchmark's questions file comes from ARAG_DATA_DIR.
    (tmp_path / "indexes").mkdir()
    (tmp_path / "indexes" / "2wiki").symlink_to(eval_index.path, target_is_directory=True)
    write_jsonl(tmp_path / "data" / "2wikimultihopqa" / "questions.jsonl", QUESTIONS)
    mock = openai_endpoint()
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    with serve(mock) as url:
        env.update(ARAG_OPENAI_BASE_URL=url, OPENAI_API_KEY="sk-test", ARAG_DATA_DIR=str(tmp_path / "data"), RAY_AUTH_MODE="disabled")
        for argv in commands:
            assert argv[:3] == ["python", "-m", argv[2]]
            done = subprocess.run([sys.executable, *argv[1:]], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200)
            assert done.returncode == 0, f"{shlex.join(argv)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"

    assert not mock.refused, [(param, body.get("reasoning_effort")) for param, body in mock.refused[:5]]
    assert mock.requests and {r["model"] for r in mock.requests} == {"gpt-5-mini"}
    assert all("max_completion_tokens" in r and "max_tokens" not in r and "temperature" not in r for r in mock.requests)
    judge = [r for r in mock.requests if "verdict" in json.dumps(r.get("response_format") or {})]
    agent = [r for r in mock.requests if r not in judge]
    assert {r.get("reasoning_effort") for r in agent} == {"minimal", "low", "medium", "high"}
    # Every run of both sweeps judged by the same request apart from its content (the answer judged).
    assert judge and len({json.dumps({k: v for k, v in r.items() if k != "messages"} | {"system": r["messages"][0]}, sort_keys=True) for r in judge}) == 1
    assert "reasoning_effort" not in judge[0]

    results = tmp_path / "results" / "tts"
    rows = read_rows(results)
    runs = {r["run_id"] for r in rows}
    assert len(runs) == 7  # 4 + 4 runs, one of them shared by both sweeps (the official step count at medium)
    assert len(rows) == 7 * len(QUESTIONS) and {r["status"] for r in rows} == {"ok"} and {r["judge_status"] for r in rows} <= {"correct", "exact_match"}
    report = (results / "report" / "report.md").read_text()
    assert "Test-time scaling" in report and "gpt-5-mini" in report
