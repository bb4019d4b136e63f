"""The layering docs/development.md draws, checked on the source (with `ast`, nothing imported): Ray only in
arag/runtime/, every package on a floor that imports only lower floors, and no import cycles, neither
between arag's packages nor between modules. Every
import counts, including those inside functions and under TYPE_CHECKING: a cycle kept alive by lazy
imports is still a cycle."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ARAG = Path(__file__).resolve().parents[2] / "arag"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ARAG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> list[tuple[str, int]]:
    """(absolute module name, line) of every import in the file; `from a import b` also yields `a.b`
    (b may be a module)."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            out.append((base, node.lineno))
            out += [(f"{base}.{alias.name}", node.lineno) for alias in node.names]
    return out


def sources() -> list[Path]:
    return sorted(ARAG.rglob("*.py"))


def module_graph() -> dict[str, dict[str, str]]:
    """module -> {imported arag module: "file:line"}."""
    modules = {module_name(p): p for p in sources()}
    graph: dict[str, dict[str, str]] = {m: {} for m in modules}
    for module, path in modules.items():
        for name, line in imports_of(path):
            if name in modules and name != module:
                graph[module].setdefault(name, f"{path.relative_to(ARAG.parent)}:{line}")
    return graph


def package_of(module: str) -> str:
    """arag's top-level unit a module belongs to: `arag.agent.loop` -> `agent`, `arag.strict_settings` -> `strict_settings`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "(arag)"


def cycles(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def describe(component: list[str], graph: dict[str, dict[str, str]]) -> str:
    members = set(component)
    edges = [f"{a} -> {b} ({where})" for a in component for b, where in sorted(graph[a].items()) if b in members]
    return "{" + ", ".join(component) + "}: " + "; ".join(edges)


def package_graph(graph: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    packages: dict[str, dict[str, str]] = {}
    for module, targets in graph.items():
        edges = packages.setdefault(package_of(module), {})
        for target, where in targets.items():
            if package_of(target) != package_of(module):
                edges.setdefault(package_of(target), where)
    return packages


def test_ray_is_imported_only_in_the_runtime():
    offenders = [
        f"{path.relative_to(ARAG.parent)}:{line}: import {name}"
        for path in sources()
        if "runtime" not in path.relative_to(ARAG).parts[:1]
        for name, line in imports_of(path)
        if name == "ray" or name.startswith("ray.")
    ]
    assert not offenders, "Ray outside arag/runtime/:\n" + "\n".join(offenders)


def test_no_cycle_between_arag_packages():
    graph = package_graph(module_graph())
    found = cycles(graph)
    assert not found, "import cycles between arag packages:\n" + "\n".join(describe(c, graph) for c in found)


def test_no_cycle_between_arag_modules():
    graph = module_graph()
    found = cycles(graph)
    assert not found, "import cycles between arag modules:\n" + "\n".join(describe(c, graph) for c in found)


# arag's rooms by floor, the ground first (docs/development.md draws them): a room imports only rooms on
# lower floors, so the tree reads in the order data flows and no arrow runs back up.
FLOORS: list[tuple[str, ...]] = [
    ("(arag)", "small_sorted", "strict_settings", "open_files", "registry", "verbosity"),
    ("corpus", "llm", "config"),
    ("index",),
    ("graph", "tools"),
    ("serve", "methods"),
    ("agent",),
    ("evaluation",),
    ("report",),
    ("viewer",),
    ("runtime",),
]


def arrows_back_up(graph: dict[str, dict[str, str]], floors: list[tuple[str, ...]]) -> list[str]:
    """Package imports that do not go strictly down the floors, and packages on no floor."""
    floor = {room: n for n, rooms in enumerate(floors) for room in rooms}
    unplaced = [f"{room}: on no floor of FLOORS" for room in sorted(graph) if room not in floor]
    return unplaced + [
        f"{source} (floor {floor[source]}) -> {target} (floor {floor[target]}) at {where}"
        for source, targets in sorted(graph.items()) if source in floor
        for target, where in sorted(targets.items()) if target in floor and floor[target] >= floor[source]
    ]


def test_rooms_import_only_lower_floors():
    found = arrows_back_up(package_graph(module_graph()), FLOORS)
    assert not found, "imports that do not go down arag's floors:\n" + "\n".join(found)


def test_tool_specs_do_not_import_their_hosting():
    """arag.tools.hosting runs the tool specs; a spec that imported its host would tie the two back together.
    Only the package's face (arag/tools/__init__.py) hands the host's ToolContext on."""
    offenders = [
        f"{module} -> {target} ({where})"
        for module, targets in module_graph().items()
        if module.startswith("arag.tools.") and not module.startswith("arag.tools.hosting")
        for target, where in targets.items() if target.startswith("arag.tools.hosting")
    ]
    assert not offenders, "tool specs importing their hosting:\n" + "\n".join(offenders)


def test_the_floor_check_sees_an_arrow_back_up_and_an_unplaced_room():
    graph = {"a": {"b": "arag/a/x.py:1"}, "b": {}, "c": {"a": "arag/c/z.py:3"}}
    assert arrows_back_up(graph, [("a",), ("b",)]) == ["c: on no floor of FLOORS", "a (floor 0) -> b (floor 1) at arag/a/x.py:1"]
    assert arrows_back_up(graph, [("b",), ("a",), ("c",)]) == []


def test_the_checks_see_cycles_and_ray(tmp_path, monkeypatch):
    """The checks themselves: a made-up tree with a lazy-import package cycle and a stray Ray import."""
    fake = tmp_path / "arag"
    for folder, files in {"a": {"__init__.py": "", "x.py": "def f():\n    from arag.b.y import g\n"}, "b": {"__init__.py": "", "y.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..a import x\nimport ray\n"}}.items():
        (fake / folder).mkdir(parents=True)
        for name, text in files.items():
            (fake / folder / name).write_text(text)
    (fake / "__init__.py").write_text("")
    monkeypatch.setattr(sys.modules[__name__], "ARAG", fake)
    graph = module_graph()
    assert cycles(package_graph(graph)) == [["a", "b"]] and cycles(graph) == [["arag.a.x", "arag.b.y"]]
    assert "arag/a/x.py:2" in describe(["arag.a.x", "arag.b.y"], graph)
    with pytest.raises(AssertionError, match=r"arag/b/y.py:4: import ray"):
        test_ray_is_imported_only_in_the_runtime()


# Files that still name this machine's folders, each being rewritten on another branch: the lead
# deletes the entry when merging that rewrite.
MACHINE_PATHS_TO_REMOVE_AT_MERGE: dict[str, str] = {}


def test_no_machine_specific_paths():
    """Tests, benchmarks, library and configs find outside data through settings and environment
    variables (tests/support/paths.py), never through a folder of the machine they were written on."""
    repo = ARAG.parent
    offenders = [
        f"{path.relative_to(repo)}:{n}: {line.strip()}"
        for folder in ("arag", "pipelines", "conf", "tests", "benchmarks", "cluster", ".ci")
        for path in sorted((repo / folder).rglob("*"))
        if path.is_file() and path.suffix in (".py", ".yaml", ".sh", "") and path != Path(__file__).resolve()
        and str(path.relative_to(repo)) not in MACHINE_PATHS_TO_REMOVE_AT_MERGE
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if '"/work/' in line or "'/work/" in line or " /work/" in line
    ]
    assert not offenders, "machine-specific paths:\n" + "\n".join(offenders)


def constants_naming(path: Path, names: set[str]) -> dict[str, str]:
    """Module-level constants of the file bound to one of `names` (SUMMARIZE_TOOL = "summarize")."""
    return {
        target.id: node.value.value
        for node in ast.parse(path.read_text(), str(path)).body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value in names
        for target in node.targets if isinstance(target, ast.Name)
    }


def compared_names(path: Path, names: set[str], constants: dict[str, str] | None = None) -> list[tuple[int, str]]:
    """(line, name) of every comparison (==, !=, in, not in) of a value with one of `names` in the file,
    spelled out or through one of `constants` (a constant bound to such a name)."""
    constants = constants or {}
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                strings = operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else [operand]
                found += [(node.lineno, s.value) for s in strings if isinstance(s, ast.Constant) and s.value in names]
                found += [(node.lineno, constants[s.id]) for s in strings if isinstance(s, ast.Name) and s.id in constants]
        elif isinstance(node, ast.match_case) and isinstance(node.pattern, ast.MatchValue):
            value = node.pattern.value
            if isinstance(value, ast.Constant) and value.value in names:
                found.append((node.pattern.lineno, value.value))
    return found


def name_comparisons_outside(home: str, names: set[str]) -> list[str]:
    """Comparisons with a plugin's name in arag/ and pipelines/ outside the plugin's own package `home`."""
    repo = ARAG.parent
    paths = [path for folder in ("arag", "pipelines") for path in sorted((repo / folder).rglob("*.py")) if not path.is_relative_to(repo / home)]
    constants = {k: v for path in paths for k, v in constants_naming(path, names).items()}  # imported ones count too
    return [f"{path.relative_to(repo)}:{line}: compares with {name!r}" for path in paths for line, name in compared_names(path, names, constants)]


def test_no_module_outside_arag_llm_compares_a_backends_name():
    """A backend states its concurrency, per-worker keys, threads and runtime (arag.llm.base.LLMBackend):
    nothing else branches on which backend it is."""
    from arag.llm.factory import KINDS

    found = name_comparisons_outside("arag/llm", set(KINDS))
    assert not found, "backend names compared outside arag/llm (ask the backend class instead):\n" + "\n".join(found)


def test_the_name_check_sees_comparisons(tmp_path):
    source = tmp_path / "x.py"
    source.write_text('if cfg["backend"] == "vllm" or kind in ("openai", "other"):\n    pass\nmatch kind:\n    case "scripted":\n        pass\nx = {"backend": "vllm"}\n')
    assert sorted(compared_names(source, {"vllm", "openai", "scripted"})) == [(1, "openai"), (1, "vllm"), (4, "scripted")]
    named = tmp_path / "y.py"
    named.write_text('SUMMARIZE_TOOL = "summarize"\nOTHER = "x"\ndef f(record):\n    return record.name == SUMMARIZE_TOOL or record.name == OTHER\n')
    constants = constants_naming(named, {"summarize"})
    assert constants == {"SUMMARIZE_TOOL": "summarize"} and compared_names(named, {"summarize"}, constants) == [(4, "summarize")]


def test_no_module_outside_arag_tools_compares_a_tools_name():
    """A tool states whether it tracks reads, the ids it takes from earlier results, its warm-up call,
    what a client mirrors, the result settings it follows, whether it compacts the context and how its
    schema follows a method's document-tool settings (arag.tools.base.ToolSpec): the agent loop, the
    methods, the protocol card, the server and its client ask it."""
    from arag.tools import TOOLS

    found = name_comparisons_outside("arag/tools", set(TOOLS))
    assert not found, "tool names compared outside arag/tools (ask the tool's ToolSpec instead):\n" + "\n".join(found)
