"""Thin entry points and one door to results, checked on the source (with `ast`, nothing imported).

* An entry point (a `pipelines/*.py` module with a `__main__` block) imports no other entry point:
  what two commands share lives in arag/, or in a pipelines helper without a `__main__` block
  (pipelines/config_checks.py: which config keys each command accepts; pipelines/errors.py: how every
  command ends on a user error or Ctrl-C).
* The results folder's layout (run.json, invocations.jsonl, run.lock, episodes/ and failed/ parts) is
  spelled only in arag/evaluation/results.py: every other module, benchmarks included, reads and writes
  a run through it, and no reader of results (evaluation, report, viewer, pipelines, benchmarks) globs
  for Parquet files.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RESULTS_MODULE = Path("arag/evaluation/results.py")
# Names only the layout uses: a string holding one is a results path being built by hand.
LAYOUT_NAMES = ("run.json", "run.lock", "invocations.jsonl", "failed.parquet")
# A layout folder as a path component of a string ("{root}/episodes/*.parquet"), not prose ("episodes/min").
LAYOUT_PATH = re.compile(r"(?:^|[/{}*])(?:episodes|failed)/")
# The layout's folders: `<path> / "episodes"` builds a results path.
LAYOUT_FOLDERS = ("episodes", "failed")
# Where results are consumed; a Parquet glob here would read the layout around the store (an index's
# files are asked of arag.index.store, so a glob in a benchmark is never needed).
RESULT_READERS = ("arag/evaluation", "arag/report", "arag/viewer", "pipelines", "benchmarks")


def is_entry_point(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__"
        for node in tree.body
    )


def pipeline_imports(tree: ast.Module) -> list[tuple[str, int]]:
    """(pipelines module, line) of every import of a sibling, inside functions too."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names if a.name.startswith("pipelines.")]
        elif isinstance(node, ast.ImportFrom):
            module = "pipelines." + (node.module or "") if node.level else node.module or ""
            if module == "pipelines" or module == "pipelines.":
                out += [(f"pipelines.{a.name}", node.lineno) for a in node.names]
            elif module.startswith("pipelines."):
                out.append((module, node.lineno))
    return out


def sibling_entry_point_imports(repo: Path) -> list[str]:
    folder = repo / "pipelines"
    trees = {f"pipelines.{p.stem}": (p, ast.parse(p.read_text(), str(p))) for p in sorted(folder.glob("*.py"))}
    entry_points = {name for name, (_, tree) in trees.items() if is_entry_point(tree)}
    return [
        f"{path.relative_to(repo)}:{line}: imports the entry point {target}"
        for name, (path, tree) in trees.items()
        for target, line in pipeline_imports(tree)
        if target in entry_points and target != name
    ]


def docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                ids.add(id(first.value))
    return ids


def layout_spellings(repo: Path) -> list[str]:
    """Each place outside the results module that spells the layout: a layout name in a string (not a
    docstring), a path joined with a layout folder, or a Parquet glob where results are read."""
    found = []
    files = [*sorted((repo / "arag").rglob("*.py")), *sorted((repo / "pipelines").glob("*.py")), *sorted((repo / "benchmarks").rglob("*.py"))]
    for path in files:
        rel = path.relative_to(repo)
        if rel == RESULTS_MODULE:
            continue
        tree = ast.parse(path.read_text(), str(path))
        skip = docstrings(tree)
        reader = any(str(rel).startswith(prefix + "/") for prefix in RESULT_READERS)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
                names = [n for n in LAYOUT_NAMES if n in node.value] + [m.group(0).lstrip("/{}*") for m in LAYOUT_PATH.finditer(node.value)]
                if names:
                    found.append(f"{rel}:{node.lineno}: {names[0]!r} in a string")
            elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.right, ast.Constant) and node.right.value in LAYOUT_FOLDERS:
                found.append(f"{rel}:{node.lineno}: path / {node.right.value!r}")
            elif reader and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("glob", "rglob"):
                pattern = node.args[0] if node.args else None
                parts = pattern.values if isinstance(pattern, ast.JoinedStr) else [pattern]
                if any(isinstance(p, ast.Constant) and isinstance(p.value, str) and "parquet" in p.value for p in parts):
                    found.append(f"{rel}:{node.lineno}: a Parquet glob")
    return found


def test_entry_points_import_no_other_entry_point():
    offenders = sibling_entry_point_imports(REPO)
    assert not offenders, "entry points importing entry points (move what they share into arag/):\n" + "\n".join(offenders)


def test_the_results_layout_is_spelled_only_in_the_results_module():
    offenders = layout_spellings(REPO)
    assert not offenders, f"results paths built outside {RESULTS_MODULE} (ask RunStore / find_run_dirs / row_files instead):\n" + "\n".join(offenders)


def test_the_checks_see_what_they_forbid(tmp_path):
    """The checks themselves, on a made-up tree: a helper may be shared, an entry point may not; a
    layout name, a joined layout folder and a Parquet glob are found, a docstring is not."""
    main = 'if __name__ == "__main__":\n    main()\n'
    files = {
        "pipelines/config_checks.py": "def check(): ...\n",
        "pipelines/evaluate.py": "from pipelines.config_checks import check\ndef summarize(): ...\n" + main,
        "pipelines/rejudge.py": "from pipelines.config_checks import check\ndef f():\n    from pipelines.evaluate import summarize\n" + main,
        "pipelines/report.py": "from pipelines import evaluate\n" + main,
        "arag/evaluation/results.py": 'INFO = "run.json"\n',
        "arag/evaluation/other.py": '"""Reads run.json (a docstring may say so)."""\ndef f(root):\n    return root / "episodes", (root / "x").glob("*.parquet")\n',
        "arag/viewer.py": 'def f(run):\n    return run / "run.json", f"{run}/failed/x", "12 episodes/min"\n',
        "arag/index/parts.py": 'def f(root):\n    return root.glob("part-*.parquet")\n',
        "benchmarks/tally.py": 'def f(tree):\n    return f"{tree}/**/episodes/*.parquet"\n',
        "benchmarks/cpu/count.py": 'def f(tree):\n    return sorted(tree.rglob("*.parquet"))\n',
        "arag/report/read.py": 'def f(tree):\n    return tree.glob(f"**/*.parquet")\n',
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert sibling_entry_point_imports(tmp_path) == [
        "pipelines/rejudge.py:3: imports the entry point pipelines.evaluate",
        "pipelines/report.py:1: imports the entry point pipelines.evaluate",
    ]
    assert sorted(layout_spellings(tmp_path)) == [
        "arag/evaluation/other.py:3: a Parquet glob",
        "arag/evaluation/other.py:3: path / 'episodes'",
        "arag/report/read.py:2: a Parquet glob",
        "arag/viewer.py:2: 'failed/' in a string",
        "arag/viewer.py:2: 'run.json' in a string",
        "benchmarks/cpu/count.py:2: a Parquet glob",
        "benchmarks/tally.py:2: 'episodes/' in a string",
    ]
