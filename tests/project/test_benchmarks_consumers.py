"""Benchmarks are consumers of the project, checked on the source (with `ast`, nothing imported): they
run as `python -m benchmarks.<name>` from the checkout without editing sys.path, and tests never lean
on them: what tests and benchmarks share lives in tests/support/ (a benchmark's logic that a test
checks too), and a test runs a benchmark only through its command line."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

def imported_modules(path: Path) -> list[tuple[str, int]]:
    """(module, line) of every absolute import, inside functions too; `from a import b` yields `a.b`."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out += [(f"{node.module}.{alias.name}" if node.module == "benchmarks" else node.module, node.lineno) for alias in node.names]
    return out


def benchmark_imports_in_tests(repo: Path) -> list[str]:
    found = []
    for path in sorted((repo / "tests").rglob("*.py")):
        rel = str(path.relative_to(repo))
        found += [f"{rel}:{line}: imports {module}" for module, line in imported_modules(path)
                  if module == "benchmarks" or module.startswith("benchmarks.")]
    return found


def sys_path_edits(repo: Path) -> list[str]:
    return [
        f"{path.relative_to(repo)}:{n}: {line.strip()}"
        for path in sorted((repo / "benchmarks").rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "sys.path" in line
    ]


def test_no_test_imports_a_benchmark_for_a_fixture():
    offenders = benchmark_imports_in_tests(REPO)
    assert not offenders, "tests importing benchmarks (move the shared stand-in to tests/support/):\n" + "\n".join(offenders)


def test_benchmarks_do_not_edit_sys_path():
    offenders = sys_path_edits(REPO)
    assert not offenders, "benchmarks editing sys.path (run them as `python -m benchmarks.<name>` from the checkout):\n" + "\n".join(offenders)


def test_every_benchmark_folder_is_a_package():
    """`python -m benchmarks.<folder>.<name>` needs the folders to be packages."""
    folders = {p.parent for p in (REPO / "benchmarks").rglob("*.py")}
    assert all((folder / "__init__.py").is_file() for folder in folders), sorted(str(f) for f in folders if not (f / "__init__.py").is_file())


def test_the_checks_see_what_they_forbid(tmp_path):
    files = {
        "tests/test_a.py": "from benchmarks.synthetic_index import write\nfrom tests.support import tools_reference\n",
        "tests/tools/test_b.py": "def f():\n    from benchmarks import tools_reference\n    import benchmarks.ann_data\n",
        "tests/test_rehearsal.py": "from benchmarks import rehearsal\nfrom benchmarks import model_server_sim\n",
        "benchmarks/x.py": "import sys\nsys.path.insert(0, '..')\n",
        "benchmarks/y.py": "from tests.support.synthetic_index import write\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert benchmark_imports_in_tests(tmp_path) == [
        "tests/test_a.py:1: imports benchmarks.synthetic_index",
        "tests/test_rehearsal.py:1: imports benchmarks.rehearsal",
        "tests/test_rehearsal.py:2: imports benchmarks.model_server_sim",
        "tests/tools/test_b.py:2: imports benchmarks.tools_reference",
        "tests/tools/test_b.py:3: imports benchmarks.ann_data",
    ]
    assert sys_path_edits(tmp_path) == ["benchmarks/x.py:2: sys.path.insert(0, '..')"]


def uncited_runs(repo: Path) -> list[str]:
    """Committed run folders (benchmarks/**/results/<set>/<run id>) whose run id no document names."""
    from arag.evaluation.results import find_run_dirs

    text = "\n".join(p.read_text() for p in [repo / "README.md", *sorted((repo / "docs").rglob("*.md")), *sorted((repo / "benchmarks").rglob("*.md"))]
                     if p.is_file())
    runs = [run for results in sorted((repo / "benchmarks").rglob("results")) if results.is_dir() for run in find_run_dirs(results)]
    return [str(run.relative_to(repo)) for run in runs if run.name not in text]


def test_every_committed_run_is_cited_by_a_document():
    """Results trees are committed only for the figures the docs quote: a run nothing names is dead weight."""
    offenders = uncited_runs(REPO)
    assert not offenders, "committed runs no document names (cite them or delete them):\n" + "\n".join(offenders)


def test_the_citation_check_sees_an_uncited_run(tmp_path):
    from arag.evaluation.results import RunStore

    for run_id in ("cited0123456789", "orphan012345678"):
        with RunStore(tmp_path / "benchmarks" / "evals" / "results" / "set", run_id) as store:
            store.write_run_info({"run_id": run_id})
    (tmp_path / "benchmarks" / "evals" / "README.md").write_text("The run `cited0123456789` gives the table.\n")
    assert uncited_runs(tmp_path) == ["benchmarks/evals/results/set/orphan012345678"]
