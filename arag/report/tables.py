"""How a report table fits a page: a column the same on every row is stated once above it, and a table
still wider than MAX_COLUMNS is split into tables of its column groups, each repeating the row keys."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from arag.report.format import markdown_table

# The widest table the report writes (columns); wider ones are split by topic.
MAX_COLUMNS = 12
CONSTANT_SEPARATOR = " · "


@dataclass
class Topic:
    """One table of a section: its title (bold, above it; "" for none), header and rows. `align`: one
    letter a column ("l", "r", "c"); by default the row keys left, the rest right. `keep`: headers
    never dropped as constant (the table's structure, like the dataset columns of a pivot)."""

    title: str
    header: Sequence[str]
    rows: Sequence[Sequence[str]]
    align: Sequence[str] | None = None
    keep: Sequence[str] = field(default_factory=tuple)


def constant_columns(header: Sequence[str], rows: Sequence[Sequence[str]], keep: Sequence[str] = ()) -> list[int]:
    """The columns the same on every row, `keep` aside; none under two rows (one would state all of itself)."""
    return [] if len(rows) < 2 else [i for i, h in enumerate(header) if h not in keep and all(r[i] == rows[0][i] for r in rows)]


def constants_line(pairs: Sequence[tuple[str, str]]) -> str:
    """The constants stated above a table: "header: value" each, in column order."""
    return "Same on every row: " + CONSTANT_SEPARATOR.join(f"{h}: {v}" for h, v in pairs)


def _without(columns: Sequence[int], values: Sequence) -> list:
    return [v for i, v in enumerate(values) if i not in columns]


def fitted_tables(keys: int, topics: Sequence[Topic], limit: int = MAX_COLUMNS) -> list[str]:
    """Markdown lines for a section's tables sharing their first `keys` columns and rows: constant columns
    stated once above (the row keys' above the first table), a table wider than `limit` split in parts."""
    first = topics[0]
    shared = [i for i in constant_columns(first.header, first.rows, first.keep) if i < keys]
    shared_pairs = [(first.header[i], first.rows[0][i]) for i in shared]
    out = [constants_line(shared_pairs), ""] if shared and len(topics) > 1 else []
    kept_keys = keys - len(shared)
    for topic in topics:
        own = [i for i in constant_columns(topic.header, topic.rows, topic.keep) if i >= keys]
        pairs = [*(shared_pairs if len(topics) == 1 else []), *((topic.header[i], topic.rows[0][i]) for i in own)]
        dropped = [*shared, *own]
        header = _without(dropped, topic.header)
        rows = [_without(dropped, r) for r in topic.rows]
        align = _without(dropped, topic.align or ["l"] * keys + ["r"] * (len(topic.header) - keys))
        width = max(1, limit - kept_keys)
        parts = [range(at, min(len(header), at + width)) for at in range(kept_keys, len(header), width)]
        if not parts and (len(topic.header) == keys or len(topics) == 1):  # its rows are listed nowhere else
            parts = [range(0)]
        if not parts:  # every value the same, the rows listed in the other tables: the line says it all
            out += [*([f"**{topic.title}**", ""] if topic.title else []), constants_line(pairs), ""]
        for n, part in enumerate(parts):
            columns = [*range(kept_keys), *part]
            title = f"{topic.title or 'Columns'} ({n + 1}/{len(parts)})" if len(parts) > 1 else topic.title
            out += [f"**{title}**", ""] if title else []
            out += [constants_line(pairs), ""] if pairs and n == 0 else []
            out += [markdown_table([header[i] for i in columns], [[r[i] for i in columns] for r in rows], [align[i] for i in columns]), ""]
    return out
