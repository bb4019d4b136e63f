"""ARAG_REQUIRE_TESTS (tests/required_tests.py) in a pytest run of its own, on a made-up project."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONFTEST = """
from tests.required_tests import RequiredTests

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
