"""Plugins from installed packages: tests/project/plugin_package declares a tool, a backend and a method kind as
entry points (its pyproject.toml); put on sys.path with a dist-info folder, as pip would leave it, arag
finds each by name through importlib.metadata and a method config and a model config use them."""

from __future__ import annotations

import shutil
import sys
import tomllib
from pathlib import Path

import pytest

from arag import registry

PACKAGE = Path(__file__).parent / "plugin_package"


def entry_points_txt(pyproject: Path) -> str:
    """The entry_points.txt an install writes from the project's `[project.entry-points]` tables."""
    groups = tomllib.loads(pyproject.read_text())["project"]["entry-points"]
    return "".join(f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in points.items()) + "\n" for group, points in groups.items())


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """The toy plugin package as an installed distribution on sys.path; taken out again afterwards."""
    shutil.copy(PACKAGE / "arag_toy_plugin.py", tmp_path)
    info = tmp_path / "arag_toy_plugin-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: arag-toy-plugin\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(entry_points_txt(PACKAGE / "pyproject.toml"))
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.discover()
    yield tmp_path
    for kind, name in ((registry.TOOL, "toy_plugin_lookup"), (registry.BACKEND, "toy_plugin_backend"), (registry.METHOD, "toy_plugin_method")):
        registry.unregister(kind, name)
    sys.modules.pop("arag_toy_plugin", None)
    monkeypatch.undo()
    registry.discover()


def test_an_installed_package_registers_a_tool_a_backend_and_a_method(installed):
    from arag.llm.factory import KINDS as BACKENDS, default_concurrency, make_backend
    from arag.methods import KINDS as METHODS, evidence_of, method_from_config
    from arag.tools import TOOLS

    assert "toy_plugin_lookup" in TOOLS and "toy_plugin_backend" in BACKENDS and "toy_plugin_method" in METHODS
    assert evidence_of("toy_plugin_lookup") == "snippet"  # the tool's own declaration
    method = method_from_config({"name": "toy", "kind": "toy_plugin_method", "system_prompt": "s", "tools": ["toy_plugin_lookup"], "depth": 2})
    assert type(method).__name__ == "ToyPluginMethod" and method.depth == 2
    assert [s["function"]["name"] for s in method.tool_schemas()] == ["toy_plugin_lookup"]
    model = {"backend": "toy_plugin_backend", "protocol": "json", "model": "toy", "script": [{"answer": "x"}]}
    assert type(make_backend(model)).__name__ == "ToyPluginBackend" and default_concurrency(model) == 7
    assert TOOLS["toy_plugin_lookup"].call(None, {"title": "Lothair II"}).text == "[0#0] Lothair II"


def test_a_plugin_that_does_not_load_is_named(tmp_path, monkeypatch):
    info = tmp_path / "arag_broken-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: arag-broken\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[arag.tools]\nbroken_tool = arag_no_such_module:SPEC\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(registry.PluginLoadError, match=r"the tool 'broken_tool' of entry point group arag.tools \(arag_no_such_module:SPEC\) did not load: ModuleNotFoundError"):
        registry.discover(registry.TOOL)
    monkeypatch.undo()
    registry.discover(registry.TOOL)
    assert "broken_tool" not in registry.plugins(registry.TOOL)


def test_without_plugin_packages_only_the_builtins_are_registered():
    from arag.tools import TOOLS

    assert "toy_plugin_lookup" not in TOOLS and "keyword_search" in TOOLS
