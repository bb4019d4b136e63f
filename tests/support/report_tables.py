"""The tables of a Markdown report read back for tests: each with its title, the constants stated
above it ("Same on every row: dataset: 2wiki · model: qwen", arag.report.tables) and its rows as
{header: cell} with those constants filled in, so a test looks a cell up by its header whether or
not the column was dropped as constant."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from arag.report.tables import CONSTANT_SEPARATOR

CONSTANTS_PREFIX = "Same on every row: "


@dataclass
class Table:
    title: str  # the nearest heading or bold line above the table
    header: list[str]
    rows: list[list[str]]
    constants: dict[str, str] = field(default_factory=dict)  # the columns dropped as the same on every row
    section: str = ""  # the heading of its section

    @property
    def records(self) -> list[dict[str, str]]:
        return [{**self.constants, **dict(zip(self.header, r))} for r in self.rows]

    def column(self, name: str) -> list[str]:
        """The column's cells by its header, a constant one repeated on every row."""
        if name in self.header:
            return [r[self.header.index(name)] for r in self.rows]
        if name in self.constants:
            return [self.constants[name]] * len(self.rows)
        raise KeyError(f"no column {name!r} in table {self.title!r}: {self.header} (constants {list(self.constants)})")

    def row(self, **match: str) -> dict[str, str]:
        """The one row whose cells equal `match` (header names with spaces as underscores allowed)."""
        found = [r for r in self.records if all(r.get(k.replace("_", " "), r.get(k)) == v for k, v in match.items())]
        assert len(found) == 1, f"{len(found)} rows match {match} in table {self.title!r}"
        return found[0]


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip()[1:-1].split(" | ")]


def parse_constants(line: str) -> dict[str, str]:
    pairs = line[len(CONSTANTS_PREFIX) :].split(CONSTANT_SEPARATOR)
    return dict(p.split(": ", 1) for p in pairs)


def report_tables(markdown: str) -> list[Table]:
    """Every table of the report, in order. Constants stated above a section's first table (its
    row keys') apply to every table up to the next heading; those right above a table, to it."""
    lines = markdown.splitlines()
    out: list[Table] = []
    title, heading, section, own = "", "", {}, {}
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            title, section, own = line.lstrip("# "), {}, {}
            heading = title
        elif line.startswith("**"):
            title, own = line.strip("*").split("**")[0], {}
        elif line.startswith(CONSTANTS_PREFIX):
            constants = parse_constants(line)
            after = lines[i + 2] if i + 2 < len(lines) else ""
            if after.startswith("| "):  # right above a table: that table's
                own = constants
            elif lines[i - 2].startswith("**"):  # under a title with no table: every value of it was the same
                out.append(Table(title, [], [], {**section, **constants}, heading))
            else:  # above a section's titled tables: their row keys'
                section = constants
        elif line.startswith("| ") and i + 1 < len(lines) and lines[i + 1].startswith(("| ---", "| :--")):
            header = _cells(line)
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("| "):
                rows.append(_cells(lines[i]))
                i += 1
            part = re.fullmatch(r"(.*) \((\d+)/\d+\)", title)
            if part and int(part[2]) > 1 and out and out[-1].title.startswith(part[1] + " ("):  # a split table's constants are stated above its first part
                own = {**out[-1].constants, **own}
            out.append(Table(title, header, rows, {**section, **own}, heading))
            own = {}
            continue
        i += 1
    return out


def table(markdown: str, title: str, section: str = "") -> Table:
    """The one table whose title starts with `title` (in the section whose heading starts with `section`)."""
    found = [t for t in report_tables(markdown) if t.title.startswith(title) and t.section.startswith(section)]
    assert len(found) == 1, f"{len(found)} tables titled {title!r}: {[(t.section, t.title) for t in report_tables(markdown)]}"
    return found[0]
