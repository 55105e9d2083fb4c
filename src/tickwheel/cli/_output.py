"""Printing what the admin verbs found: a plain table for people, JSON for scripts.

A command builds its answer once as a list of rows (dicts with the same keys, in
column order) and hands it to ``emit``; ``--format table`` (the default) prints the
keys as an upper-case header and the values in columns two spaces apart, as ``rpk``
and ``kafka-topics.sh`` do, and ``--format json`` prints the same data as one JSON
document, so a script never parses the table.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from typing import TextIO

FORMATS = ("table", "json")

Row = Mapping[str, object]


def add_format_argument(parser: argparse.ArgumentParser) -> None:
    """Give ``parser`` the ``--format table|json`` option."""
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="table",
        help="table for people (default) or json for scripts",
    )


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, list | tuple):
        return ",".join(_cell(item) for item in value)
    return str(value)


def table(rows: Sequence[Row], *, columns: Sequence[str] | None = None) -> str:
    """Render ``rows`` as a plain text table (no trailing spaces, no borders)."""
    names = list(columns if columns is not None else (rows[0].keys() if rows else []))
    cells = [[_cell(row.get(name)) for name in names] for row in rows]
    header = [name.upper().replace("_", "-") for name in names]
    widths = [max(len(text) for text in column) for column in zip(header, *cells, strict=True)]
    lines = [
        "  ".join(text.ljust(width) for text, width in zip(line, widths, strict=True)).rstrip()
        for line in [header, *cells]
    ]
    return "\n".join(lines)


def emit(
    data: object,
    output_format: str,
    *,
    tables: Sequence[tuple[str, Sequence[Row]]] = (),
    out: TextIO | None = None,
) -> None:
    """Print ``data`` as JSON, or ``tables`` (title, rows) as plain tables.

    A table with an empty title is printed without one; tables are separated by a
    blank line.
    """
    stream = sys.stdout if out is None else out
    if output_format == "json":
        print(json.dumps(data, indent=2), file=stream)
        return
    blocks = []
    for title, rows in tables:
        text = table(rows) if rows else "(none)"
        blocks.append(f"{title}\n{text}" if title else text)
    print("\n\n".join(blocks), file=stream)
