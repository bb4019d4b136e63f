"""pipelines/errors.py: the one way every command ends on a user error or Ctrl-C."""

from __future__ import annotations

import pytest

from pipelines.errors import exit_on_error


def test_a_user_error_ends_with_one_error_line():
    from arag.evaluation.questions import QuestionFileError

    for exc in (ValueError("bad setting x"), FileNotFoundError("no file y"), QuestionFileError("bad line 3")):
        with pytest.raises(SystemExit) as ended, exit_on_error():
            raise exc
        assert ended.value.code == f"error: {exc}"


def test_ctrl_c_exits_130_saying_what_was_kept(capsys):
    with pytest.raises(SystemExit) as ended, exit_on_error(interrupted="the rows so far are stored"):
        raise KeyboardInterrupt
    assert ended.value.code == 130 and capsys.readouterr().err == "interrupted: the rows so far are stored\n"


def test_a_bug_keeps_its_traceback_unless_the_command_names_its_type():
    with pytest.raises(KeyError), exit_on_error():
        raise KeyError("bug")
    with pytest.raises(SystemExit) as ended, exit_on_error(also=(RuntimeError,)):
        raise RuntimeError("the model could not load")
    assert ended.value.code == "error: the model could not load"


def test_every_entry_point_ends_through_the_one_helper():
    """Each `python -m pipelines.<name>` reports a user error through exit_on_error, and none spells the
    `error: ...` line itself (a run that ended with failures is reported through pipelines.errors too)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "pipelines"
    entry_points = [p for p in sorted(root.glob("*.py")) if "pipeline_main(" in p.read_text(encoding="utf-8")]
    assert {p.stem for p in entry_points} >= {"ask", "evaluate", "graph", "index", "rejudge", "report", "serve", "view"}
    for path in entry_points:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
        assert any(getattr(c.func, "id", None) == "exit_on_error" for c in calls), f"{path.name} does not use exit_on_error"
        spelled = [
            c.lineno for c in calls
            if getattr(c.func, "attr", None) == "exit" and c.args and "error:" in ast.unparse(c.args[0])
        ]
        assert not spelled, f"{path.name}:{spelled} writes its own error line; raise inside exit_on_error instead"
