"""How ``batchcrawl sql`` prints a result for people (the ``table`` format).

A result is cut to a row limit (:data:`DEFAULT_LIMIT` unless ``--limit N`` or ``--all``) and a last
line says how many rows were left out, like ``psql``'s pager and DuckDB's shell. A result wider than
the terminal is printed vertically, one block per row with one ``column | value`` line per column
(``psql``'s ``\\x`` expanded display), so no value is cut to a few characters.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

#: Rows printed by default in the table format (``--limit N`` / ``--all`` change it).
DEFAULT_LIMIT = 100


def cell(value: Any) -> str:
    """One value as text: ``""`` for NULL, JSON for lists, structs and maps, ``str`` otherwise."""
    if value is None:
        return ""
    if isinstance(value, (list, dict, tuple)):
        return json.dumps(value, default=str)
    return str(value)


def table_width(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> int:
    """Characters a one-line-per-row table of ``rows`` needs: each column as wide as its widest
    cell or header, plus a 3-character separator (rich's box and padding)."""
    widths = [len(c) for c in columns]
    for row in rows:
        for i, v in enumerate(row):
            widths[i] = max(widths[i], max((len(x) for x in v.splitlines()), default=0))
    return sum(widths) + 3 * len(widths) + 1


def vertical_lines(
    columns: Sequence[str], rows: Sequence[Sequence[str]], first: int = 1
) -> list[str]:
    """``rows`` as blocks: ``-[ row N ]-`` then one ``column | value`` line per column (names
    padded to the longest); ``first`` is the number of the first row."""
    pad = max((len(c) for c in columns), default=0)
    out: list[str] = []
    for n, row in enumerate(rows, first):
        out.append(f"-[ row {n} ]" + "-" * max(0, pad - 6))
        out += [f"{c.ljust(pad)} | {v}" for c, v in zip(columns, row, strict=True)]
    return out


def more_rows_line(shown: int, total: int) -> str | None:
    """The line after a cut result (``"... 4,900 more rows (5,000 in all); --limit N or --all
    shows more"``), or None when every row was shown."""
    if total <= shown:
        return None
    return (f"... {total - shown:,} more rows ({total:,} in all); --limit N or --all shows more, "
            "--format csv|json prints them for a program")  # fmt: skip
