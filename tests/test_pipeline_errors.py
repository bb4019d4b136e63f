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
