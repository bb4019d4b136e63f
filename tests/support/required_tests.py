"""ARAG_REQUIRE_TESTS: test files (paths relative to the repository, space-separated) that must run.

CI installs every optional part and names the files whose tests would otherwise skip without them.
The run fails when such a file skips a test (or all of it), or when it was not collected at all: a
renamed or deleted file must not pass silently. Paths match exactly, never by suffix."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ENV = "ARAG_REQUIRE_TESTS"


class RequiredTests:
    def __init__(self, rootpath: Path, required: list[str]):
        self.rootpath = rootpath
        self.required = [Path(p).as_posix() for p in required]
        self.problems: list[str] = []

    @classmethod
    def from_env(cls, config) -> "RequiredTests":
        return cls(Path(config.rootpath), os.environ.get(ENV, "").split())

    def _path(self, nodeid: str) -> str:
        return nodeid.split("::", 1)[0]

    def _note_skip(self, report) -> None:
        if report.skipped and self._path(report.nodeid) in self.required:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            self.problems.append(f"{report.nodeid}: {reason}")

    def pytest_collectreport(self, report) -> None:
        self._note_skip(report)

    def pytest_runtest_logreport(self, report) -> None:
        self._note_skip(report)

    def pytest_collection_finish(self, session) -> None:
        collected = {self._path(item.nodeid) for item in session.items}
        for path in self.required:
            if not (self.rootpath / path).is_file():
                self.problems.append(f"{path}: required test file does not exist (renamed? update {ENV} in .ci/run)")
            elif path not in collected:
                self.problems.append(f"{path}: required test file was not collected (no tests ran from it)")

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.problems:
            terminalreporter.section(f"required tests did not run ({ENV})", red=True)
            for line in self.problems:
                terminalreporter.line(line)

    def pytest_sessionfinish(self, session, exitstatus) -> None:
        if self.problems and exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
