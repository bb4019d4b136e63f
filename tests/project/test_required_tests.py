"""ARAG_REQUIRE_TESTS (tests/support/required_tests.py) in a pytest run of its own, on a made-up project."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONFTEST = """
from tests.support.required_tests import RequiredTests

def pytest_configure(config):
    config.pluginmanager.register(RequiredTests.from_env(config), "arag-required-tests")
"""


def run(project: Path, required: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "ARAG_REQUIRE_TESTS": required, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(project)], cwd=project, env=env, capture_output=True, text=True, timeout=120)


def project(tmp_path: Path) -> Path:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "test_present.py").write_text("def test_runs():\n    pass\n")
    (tmp_path / "sub" / "test_optional.py").write_text("import pytest\n\ndef test_needs_a_part():\n    pytest.skip('the part is not installed')\n")
    return tmp_path


def test_a_required_file_that_runs_passes(tmp_path):
    result = run(project(tmp_path), "sub/test_present.py")
    assert result.returncode == 0, result.stdout


def test_a_required_file_that_skips_fails(tmp_path):
    result = run(project(tmp_path), "sub/test_present.py sub/test_optional.py")
    assert result.returncode == 1 and "sub/test_optional.py::test_needs_a_part: Skipped: the part is not installed" in result.stdout


def test_a_renamed_required_file_fails(tmp_path):
    """The file named in ARAG_REQUIRE_TESTS is gone (renamed to test_optional_renamed.py): its skip
    is no longer anyone's business, so the missing file itself must fail the run."""
    root = project(tmp_path)
    (root / "sub" / "test_optional.py").rename(root / "sub" / "test_optional_renamed.py")
    result = run(root, "sub/test_optional.py")
    assert result.returncode == 1 and "sub/test_optional.py: required test file does not exist" in result.stdout


def test_paths_match_exactly_not_by_suffix(tmp_path):
    """A required `sub/test_optional.py` is not satisfied by `other/test_optional.py`, and a bare
    file name matches no path."""
    root = project(tmp_path)
    (root / "other").mkdir()
    (root / "sub" / "test_optional.py").rename(root / "other" / "test_optional.py")
    assert run(root, "sub/test_optional.py").returncode == 1
    result = run(root, "test_present.py")
    assert result.returncode == 1 and "test_present.py: required test file does not exist" in result.stdout


def test_ci_names_files_that_exist():
    """Every test file .ci/run names (ARAG_REQUIRE_TESTS among them) is a path from the repository root that exists."""
    named = re.findall(r"[\w./-]*test_\w+\.py", (REPO / ".ci" / "run").read_text())
    assert named and all(path.startswith("tests/") and (REPO / path).is_file() for path in named), named


# ---- the guard: every test file that can skip for a missing part is required in CI ---------------
# A file that calls pytest.skip / importorskip or carries a skipif can pass green while testing nothing
# wherever the part it needs is missing; CI installs every part, so CI must name it in ARAG_REQUIRE_TESTS.
CAN_SKIP = re.compile(r"importorskip|pytest\.skip\(|skipif\(|mark\.skip\b")
# Files whose skips no installed part decides, with why CI cannot be asked never to skip them.
NOT_REQUIRABLE = {
    "tests/project/test_required_tests.py": "its skip is text of a made-up project that it runs",
    "tests/test_open_files.py": "skips where the machine's hard RLIMIT_NOFILE cannot be raised, a property of the machine, not a part",
}


def ci_required_files(text: str | None = None) -> set[str]:
    """Every test path in the quoted value of a `required=` or `ARAG_REQUIRE_TESTS=` in .ci/run (both
    stages); not the pytest arguments that may follow on the same line."""
    text = (REPO / ".ci" / "run").read_text(encoding="utf-8") if text is None else text
    values = re.findall(r'(?:\brequired|ARAG_REQUIRE_TESTS)="([^"]*)"', text)
    return {m for value in values for m in re.findall(r"tests/[\w/]+\.py", value)}


def files_that_can_skip() -> set[str]:
    return {p.relative_to(REPO).as_posix() for p in (REPO / "tests").rglob("test_*.py") if CAN_SKIP.search(p.read_text(encoding="utf-8"))}


def test_the_guard_sees_skips_and_the_ci_lists():
    can_skip, required = files_that_can_skip(), ci_required_files()
    # known members, so that a broken pattern or parser cannot make the guard below pass vacuously
    assert {"tests/serve/test_serve_http.py", "tests/project/test_docs.py", "tests/llm/test_vllm_actors.py", "tests/pipelines/test_smoke_run.py"} <= required
    assert {"tests/serve/test_serve_http.py", "tests/test_open_files.py", "tests/tools/test_query_device.py"} <= can_skip


def test_a_file_run_but_not_required_on_the_same_line_is_not_counted():
    line = 'ARAG_REQUIRE_TESTS="tests/a/test_x.py" python -m pytest tests/a/test_x.py tests/a/test_y.py\nrequired="$required tests/b/test_z.py"  # tests/c/test_w.py\n'
    assert ci_required_files(line) == {"tests/a/test_x.py", "tests/b/test_z.py"}


def test_every_test_file_that_can_skip_is_required_in_ci():
    missing = sorted(files_that_can_skip() - ci_required_files() - set(NOT_REQUIRABLE))
    assert not missing, f"these test files can skip but .ci/run does not require them (add to `required=` or to NOT_REQUIRABLE with why): {missing}"
    stale = sorted(p for p in NOT_REQUIRABLE if not (REPO / p).is_file())
    assert not stale, f"NOT_REQUIRABLE names files that do not exist: {stale}"
