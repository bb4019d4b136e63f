"""The manual in docs/: every page is in the site's nav, every included file exists, the site builds
with `mkdocs build --strict` (a broken link, a missing anchor or a page left out of nav fails it), and
the configuration reference states the configs' own defaults: each default written there as a value
is checked against the composed Hydra config, each key there exists, each key of the configs it covers
has a row, and each file of the config groups is named."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from arag.config.files import conf_dir, conf_path

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
REFERENCE = DOCS / "configuration.md"
SNIPPET = re.compile(r'^--8<-- "([^":]+)(?::[^"]*)?"$', re.MULTILINE)
MISSING = object()


def nav_pages(nav) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        return [p for v in nav.values() for p in nav_pages(v)]
    return [p for item in nav for p in nav_pages(item)]


def mkdocs_config() -> dict:
    # mkdocs.yml may hold !!python/name tags in other projects; ours is plain YAML.
    return yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page():
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    nav = nav_pages(mkdocs_config()["nav"])
    assert sorted(nav) == pages
    assert len(set(nav)) == len(nav)


def included() -> set[str]:
    """The files outside docs/ that pages include (pymdownx.snippets, paths from the repository root)."""
    return {path for page in DOCS.rglob("*.md") for path in SNIPPET.findall(page.read_text(encoding="utf-8"))}


def test_included_files_exist():
    assert {"README.md", "benchmarks/RESULTS.md", "cluster/README.md"} <= included()
    for path in included():
        assert (REPO / path).is_file(), f"docs/ includes {path}, which does not exist"


FENCE = re.compile(r"^\s*(```|~~~)")


def unclosed_fences(text: str) -> list[int]:
    """Line numbers of code fences that nothing closes (the rest of the page would render as code)."""
    opened: list[int] = []
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            if opened:
                opened.pop()
            else:
                opened.append(number)
    return opened


def test_every_code_fence_is_closed():
    pages = [*DOCS.rglob("*.md"), *(REPO / path for path in included())]
    assert unclosed_fences("text\n```bash\nrun\n\nprose\n") == [2] and unclosed_fences("```\na\n```\n") == []
    bad = {str(p.relative_to(REPO)): lines for p in pages if (lines := unclosed_fences(p.read_text(encoding="utf-8")))}
    assert not bad, f"code fences opened and never closed (page: lines): {bad}"


def rendered_pages() -> list[Path]:
    """Every page of the site and every file a page includes."""
    return [*DOCS.rglob("*.md"), *(REPO / path for path in included())]


def outside_fences(text: str):
    """(line number, line) of the Markdown outside code fences; a fence line itself as ""."""
    inside = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            inside = not inside
            yield number, ""
        elif not inside:
            yield number, line


def glued_to_table(text: str) -> list[int]:
    """Line numbers of text lines directly under a table row: Markdown renders them as more rows."""
    out, previous = [], ""
    for number, line in outside_fences(text):
        if previous.lstrip().startswith("|") and line.strip() and not line.lstrip().startswith("|"):
            out.append(number)
        previous = line
    return out


def test_no_paragraph_is_glued_to_a_table():
    assert glued_to_table("| a |\n| --- |\n| 1 |\nprose\n") == [4]
    assert glued_to_table("| a |\n| --- |\n| 1 |\n\nprose\n```\n| x |\ncode\n```\n") == []
    bad = {str(p.relative_to(REPO)): lines for p in rendered_pages() if (lines := glued_to_table(p.read_text(encoding="utf-8")))}
    assert not bad, f"text directly under a table row renders as a row; leave a blank line (page: lines): {bad}"


SHELL_FENCE = re.compile(r"^\s*(```|~~~)\s*(bash|sh|shell|console)\s*$")
# Tools a reader has outside the install (a POSIX shell, git, curl, openssl); anything else a shell
# block runs must be a command the install puts next to its Python (python, pip, mkdocs, ray, ...).
SYSTEM_TOOLS = {"cd", "export", ".", "source", "git", "curl", "nice", "openssl", "umask", "cat", "ls", "mkdir", "echo", "kill", "wget", "tar"}
# `NAME=value ` before a command (a quoted value or a $(...) substitution may hold spaces).
ASSIGNMENT = re.compile(r"""^[A-Za-z_][A-Za-z0-9_]*=("[^"]*"|'[^']*'|\$\([^)]*\)|\S)*(\s+|$)""")


def shell_commands(text: str) -> list[tuple[int, str]]:
    """(line number, first word) of each command line in the page's shell code blocks: not a comment,
    not a continuation of the line above, environment assignments before the command skipped."""
    out, inside, continued = [], False, False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            inside = not inside and bool(SHELL_FENCE.match(line))
            continued = False
            continue
        stripped = line.strip().removeprefix("$ ")
        if inside and stripped and not stripped.startswith("#") and not continued:
            command = stripped.lstrip("(")
            while (assignment := ASSIGNMENT.match(command)) and assignment.end():
                command = command[assignment.end():]
            if command:
                out.append((number, command.split()[0].rstrip(";")))
        continued = inside and line.rstrip().endswith("\\")
    return out


def test_every_shell_command_in_the_docs_is_installed():
    """A command in a shell block is one the install provides (a console script next to this Python)
    or a common system tool: `duckdb -c ...` fails on an install that has DuckDB as a Python package only."""
    assert shell_commands("```bash\nA=1 B=\"x y\" C=$(cat f) python -m x \\\n   --flag\n# note\nduckdb -c 'q'\n```\n```\ntree/\n```\n") == [(2, "python"), (5, "duckdb")]
    installed = {p.name for p in Path(sys.executable).parent.iterdir()}
    known = installed | SYSTEM_TOOLS | {"python", "python3", "pip"}
    bad = {f"{p.relative_to(REPO)}:{n}": word for p in rendered_pages() for n, word in shell_commands(p.read_text(encoding="utf-8")) if word not in known}
    assert not bad, f"shell blocks run commands the install does not provide (use the Python package, e.g. python -c \"import duckdb; ...\"): {bad}"


def test_the_build_is_offline_and_strict():
    cfg = mkdocs_config()
    assert cfg["strict"] is True and cfg["theme"]["font"] is False
    plugins = [p if isinstance(p, str) else next(iter(p)) for p in cfg.get("plugins", [])]
    assert set(plugins) <= {"search"}  # nothing that fetches fonts, analytics or social cards
    validation = cfg["validation"]
    assert validation["nav"]["omitted_files"] == "warn" and validation["links"]["not_found"] == "warn"
    assert validation["links"]["anchors"] == "warn"


def build(source: Path, out: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # mkdocs-material's end-of-life banner
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=source, capture_output=True, text=True, timeout=300, env=env,
    )


@pytest.mark.slow
def test_the_site_builds_strictly(tmp_path):
    pytest.importorskip("mkdocs", reason="the docs site needs mkdocs-material: pip install -e '.[docs]'")
    pytest.importorskip("material", reason="the docs site needs mkdocs-material: pip install -e '.[docs]'")
    done = build(REPO, tmp_path / "site")
    assert done.returncode == 0, done.stderr[-4000:]
    reference = (tmp_path / "site" / "configuration.html").read_text(encoding="utf-8")
    assert "agent.max_steps" in reference and "fonts.googleapis.com" not in reference
    results = (tmp_path / "site" / "results.html").read_text(encoding="utf-8")
    assert "Judge agreement" in results  # benchmarks/RESULTS.md, included
    # Long shell commands wrap: the page loads the stylesheet, and its shell boxes carry the class it selects.
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert 'href="stylesheets/code.css"' in index and '<div class="language-bash highlight"><pre>' in index
    css = re.sub(r"/\*.*?\*/", "", (tmp_path / "site" / "stylesheets" / "code.css").read_text(encoding="utf-8"), flags=re.S)
    assert re.search(r"\.md-typeset \.language-bash pre > code,[^{]*\{[^}]*white-space: pre-wrap;", css)
    # The same docs with one broken link and one page left out of nav: each fails the build.
    for breakage in ("link", "orphan"):
        copy = tmp_path / breakage
        shutil.copytree(DOCS, copy / "docs")
        for name in ["mkdocs.yml", *included()]:
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(REPO / name, copy / name)
        if breakage == "link":
            with (copy / "docs" / "viewer.md").open("a", encoding="utf-8") as f:
                f.write("\nSee [nowhere](no-such-page.md).\n")
        else:
            (copy / "docs" / "orphan.md").write_text("# Not in nav\n", encoding="utf-8")
        broken = build(copy, tmp_path / f"site-{breakage}")
        assert broken.returncode != 0, f"a {breakage} did not fail the strict build"
        assert ("no-such-page.md" if breakage == "link" else "orphan.md") in broken.stderr


def test_the_readme_is_the_front_door():
    """README.md stays short, its set-up and test commands are the ones CI runs, and its links lead
    into the manual."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 250
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", readme, flags=re.S)
    setup = [b.strip() for b in blocks if b.startswith("python3 -m venv .venv")]
    assert len(setup) == 2, "the README's two set-up commands"
    index, tests = setup
    install = re.search(r"(CMAKE_ARGS=\S+) pip install -e ('\.\[[^']*\]')", tests)
    assert f"{install[1]} python -m pip install --quiet -e {install[2]}" in ci  # the same build, the same extras
    assert tests.endswith("&& python -m pytest") and "python -m pytest" in ci
    assert index.split(" && ")[-1] in ci  # the 2Wiki index the real-index tests need
    for target in re.findall(r"\]\(((?:docs|benchmarks)/[^)#]+)", readme):
        assert (REPO / target).is_file(), f"README.md links to {target}, which does not exist"


# The configuration reference ---------------------------------------------------------------

# Each `## ` section of the reference documents one pipeline: its config, the overrides it is
# composed with, and the YAML files whose keys must all have rows (a file, the prefix of its keys).
SECTIONS = {
    "pipelines.index": ("index", ["+corpus=jsonl"], [
        ("index.yaml", ""), ("runtime/local.yaml", "runtime."), ("corpus/jsonl.yaml", "corpus."),
        ("embedder/minilm.yaml", "embedder."), ("embedder/minilm-static.yaml", "embedder."),
    ]),
    "pipelines.ask": ("ask", [], [("ask.yaml", "")]),
    "Method prompt settings": ("ask", ["method=arag_full"], [("method/arag_full.yaml", "method.")]),
    "AgenticRAG method settings": ("ask", ["method=agenticrag"], [("method/agenticrag.yaml", "method.")]),
    "A2RAG method settings": ("ask", ["method=a2rag"], [("method/a2rag.yaml", "method.")]),
    "pipelines.evaluate": ("evaluate", ["+corpus=2wikimultihopqa"], [("evaluate.yaml", ""), ("judge/paper.yaml", "judge.")]),
    "pipelines.rejudge": ("rejudge", [], [("rejudge.yaml", ""), ("judge/paper.yaml", "judge.")]),
    "pipelines.report": ("report", [], [("report.yaml", "")]),
    "pipelines.view": ("view", [], [("view.yaml", "")]),
    "pipelines.serve": ("serve", [], [("serve.yaml", "")]),
    "pipelines.graph": ("graph", [], [("graph.yaml", "")]),
}
# Keys a method or group file holds that are not settings of the method: its identity and its texts.
NOT_SETTINGS = re.compile(r"^method\.(name|label|kind|tools|.*prompts?(\..*)?)$|^judge\.(system_prompt|user_template)$")
LITERAL = re.compile(r"-?\d+(\.\d+)?|true|false|null")


@lru_cache(maxsize=None)
def composed(config: str, overrides: tuple[str, ...]) -> dict:
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = compose(config_name=config, overrides=list(overrides))
    return OmegaConf.to_container(cfg, resolve=False)


def lookup(tree: dict, key: str):
    node = tree
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return MISSING
        node = node[part]
    return node


def leaves(tree: dict, prefix: str = ""):
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            yield from leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}"


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split(" | ")]


def sections() -> dict[str, list[list[str]]]:
    """Heading of each `##`/`###` section → the rows of its settings tables (those headed key | default)."""
    found: dict[str, list[list[str]]] = {}
    heading, header = None, None
    for line in REFERENCE.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
            found[heading] = []
        elif not line.startswith("|"):
            header = None
        elif header is None:
            header = cells(line)
        elif heading is not None and header[:2] == ["key", "default"] and not re.fullmatch(r"[|\s:-]+", line):
            found[heading].append(cells(line))
    return found


def section_of(name: str) -> list[list[str]]:
    matches = [rows for heading, rows in sections().items() if name in heading]
    assert len(matches) == 1, f"the reference has no single section for {name}"
    return matches[0]


def row_keys(cell: str) -> list[str]:
    """`a.b`, `a.{b,c}` and "`a`, `b`" cells → the keys they name."""
    keys = []
    for token in re.findall(r"`([^`]+)`", cell):
        m = re.fullmatch(r"(.*)\{(.*)\}(.*)", token)
        keys += [f"{m[1]}{part}{m[3]}" for part in m[2].split(",")] if m else [token]
    return keys


def literals(cell: str, count: int) -> list[str] | None:
    """The default cell as `count` literal values, or None when it is written in words."""
    parts = [p.strip() for p in cell.split(",")] if count > 1 else [cell.strip()]
    if len(parts) != count:
        return None
    values = []
    for part in parts:
        m = re.fullmatch(r"`([^`]*)`", part)
        if m:
            values.append(m[1])
        elif LITERAL.fullmatch(part):
            values.append(part)
        else:
            return None
    return values


def same(written: str, actual) -> bool:
    if isinstance(actual, str):
        return written == actual
    return yaml.safe_load(written) == actual


def group_default(config: str, group: str) -> str | None:
    for entry in yaml.safe_load(conf_path(f"{config}.yaml").read_text())["defaults"]:
        if isinstance(entry, dict) and group in entry:
            return entry[group]
    return None


def test_the_result_format_defaults_are_the_methods():
    """The A-RAG result format keys live in arag.methods.base.Method, not in the method files: the
    reference's defaults must be the dataclass's."""
    import dataclasses

    from arag.methods.base import Method

    defaults = {f.name: f.default for f in dataclasses.fields(Method)}
    rows = section_of("A-RAG result format settings")
    assert [r[0] for r in rows] == ["`method.snippets_per_chunk`", "`method.result_titles`"]
    for row in rows:
        key = row[0].strip("`").removeprefix("method.")
        assert row[1].strip("`") == {None: "null", True: "true", False: "false"}.get(defaults[key], str(defaults[key])), key


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_the_reference_states_the_configs_defaults(section):
    config, overrides, files = SECTIONS[section]
    tree = composed(config, tuple(overrides))
    # A corpus or embedder config holds only the keys it sets: such a row is a setting of some of them.
    alternatives = []
    if config == "index":
        alternatives += [composed(config, (f"+corpus={p.stem}",)) for p in conf_path("corpus").glob("*.yaml")]
        alternatives += [composed(config, (*overrides, f"embedder={p.stem}")) for p in conf_path("embedder").glob("*.yaml")]
    rows = section_of(section)
    assert rows
    checked = 0
    documented: list[str] = []
    for row in rows:
        keys = [k for k in row_keys(row[0]) if not k.endswith("=")]
        documented += keys
        for key in keys:
            assert any(lookup(t, key.removesuffix(".*")) is not MISSING for t in [tree, *alternatives]), f"{section}: {key} is no setting of conf/{config}.yaml"
        if " / " in row[0]:
            continue
        if row_keys(row[0])[0].endswith("="):  # a config group: its default is the entry config's choice
            group = row_keys(row[0])[0].strip("+=")
            value = literals(row[1], 1)
            if value is not None:
                assert group_default(config, group) == value[0], f"{section}: {row[0]}"
                checked += 1
            continue
        values = literals(row[1], len(keys))
        if values is None or keys[0].endswith(".*"):
            continue
        for key, value in zip(keys, values):
            actual = lookup(tree, key)
            assert same(value, actual), f"{section}: {key} is documented as {value!r}, the config says {actual!r}"
            checked += 1
    assert checked, f"{section}: no default checked"
    for file, prefix in files:
        raw = yaml.safe_load(conf_path(file).read_text()) or {}
        raw = {k: v for k, v in raw.items() if k not in ("defaults", "hydra")}
        for key in leaves(raw, prefix):
            if NOT_SETTINGS.match(key):
                continue
            covered = key in documented or any(d.endswith(".*") and key.startswith(d[:-1]) for d in documented)
            assert covered, f"{section}: {key} (conf/{file}) has no row in docs/configuration.md"


def schema_fields(node, path: str = ""):
    """(key, the schema's own default) of every field of the schema-typed nodes (arag.config.schemas)
    under a composed `node`, at any depth."""
    import dataclasses

    from omegaconf import DictConfig

    schema = OmegaConf.get_type(node)
    defaults = {f.name: f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default for f in dataclasses.fields(schema)} if dataclasses.is_dataclass(schema) else {}
    for key in node.keys():
        child = node._get_node(key)
        if isinstance(child, DictConfig) and not child._is_none():
            yield from schema_fields(child, f"{path}{key}.")
        elif key in defaults:
            yield f"{path}{key}", defaults[key]


@pytest.mark.parametrize("section", sorted(s for s in SECTIONS if s.startswith("pipelines.")))
def test_every_schema_field_has_a_row_stating_the_schemas_default(section):
    """The schemas are the one home of the defaults the YAML does not set: each of their fields has a
    row, and a default the pipeline's YAML leaves to the schema is written there as the schema's."""
    config, overrides, _ = SECTIONS[section]
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = compose(config_name=config, overrides=list(overrides))
    tree = OmegaConf.to_container(cfg, resolve=False)
    rows = {key: row for row in section_of(section) if " / " not in row[0] for key in row_keys(row[0])}
    checked, fields = 0, list(schema_fields(cfg))
    for key, default in fields:
        if NOT_SETTINGS.match(key):
            continue
        row = rows.get(key) or next((r for k, r in rows.items() if k.endswith(".*") and key.startswith(k[:-1])), None)
        assert row is not None, f"{section}: {key} (a schema field) has no row in docs/configuration.md"
        keys = row_keys(row[0])
        values = literals(row[1], len(keys))
        if values is None or lookup(tree, key) != default:  # written in words, or the YAML sets its own
            continue
        written = values[keys.index(key)] if key in keys else values[0]
        assert same(written, default), f"{section}: {key} is documented as {written!r}, its schema's default is {default!r}"
        checked += 1
    if fields and config != "rejudge":  # rejudge's judge rows say "as in pipelines.evaluate"
        assert checked, f"{section}: no schema default checked"


def table_after(marker: str) -> list[list[str]]:
    text = REFERENCE.read_text(encoding="utf-8")
    start = text.index(marker)
    rows = []
    for line in text[start:].splitlines()[1:]:
        if line.startswith("|"):
            if not re.fullmatch(r"[|\s:-]+", line):
                rows.append(cells(line))
        elif rows:
            break
    return rows


@pytest.mark.parametrize("marker, group", [("Models (`model=`", "model"), ("Methods (`method=`", "method")])
def test_the_group_tables_state_each_configs_values(marker, group):
    rows = table_after(marker)
    header, body = rows[0], rows[1:]
    assert header[0] == "config"
    files = sorted(p.stem for p in conf_path(group).glob("*.yaml"))
    assert sorted(row[0].strip("`") for row in body) == files
    for row in body:
        tree = composed("ask", (f"{group}={row[0].strip('`')}",))[group]
        for column, cell in zip(header[1:], row[1:]):
            if cell == "–":
                assert column not in tree, f"{row[0]}: {column} is set"
                continue
            value = literals(cell, 1)
            assert value is not None and same(value[0], tree.get(column, MISSING)), f"{row[0]}: {column} {cell} vs {tree.get(column)!r}"


@pytest.mark.parametrize("group", ["corpus", "embedder", "runtime", "model", "method", "judge", "sweep", "protocol", "smoke"])
def test_every_config_file_is_named(group):
    text = REFERENCE.read_text(encoding="utf-8")
    for path in conf_path(group).glob("*.yaml"):
        assert f"`{path.stem}`" in text, f"conf/{group}/{path.name} is not named in docs/configuration.md"


def test_numbers_stated_beside_settings_in_the_manual_are_the_defaults():
    """`serve.threads` (16)-style mentions in any page agree with the config."""
    where = {"serve": ("serve", ()), "agent": ("ask", ()), "runtime": ("evaluate", ("+corpus=2wikimultihopqa",))}
    seen = 0
    for page in DOCS.rglob("*.md"):
        for key, number in re.findall(r"`((?:serve|agent|runtime)\.[a-z_.]+)` \((\d[\d,]*)\)", page.read_text(encoding="utf-8")):
            config, overrides = where[key.split(".")[0]]
            actual = lookup(composed(config, overrides), key)
            assert actual == int(number.replace(",", "")), f"{page.name}: {key} ({number}), the config says {actual!r}"
            seen += 1
    assert seen
