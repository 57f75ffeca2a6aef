"""How CLI commands print results: tables for people, plain columns and JSON lines for scripts.

stdout carries results only; summaries, progress bars and errors go to stderr, so
``strata consume ... > file`` holds records and nothing else. A table is a Rich table when
stdout is a terminal and plain left-aligned columns (two spaces apart, never wrapped or
truncated) when it is not, so ``awk``/``cut`` see the same columns at any width.
``--format json`` prints one JSON object per line (JSON Lines) with Kafka's field names.

Progress bars (``progress``) draw on stderr only when it is a terminal; otherwise they are
disabled and print nothing.
"""

from __future__ import annotations

import enum
import json
import sys
from collections.abc import Sequence
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table


class OutputFormat(enum.StrEnum):
    """``--format`` of listing commands."""

    TEXT = "text"
    JSON = "json"


RowsFormatOption = Annotated[
    OutputFormat,
    typer.Option("--format", help="text (a table) or json (a line per row)."),
]


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """``rows`` under ``headers``: a Rich table on a terminal, plain columns otherwise."""
    cells = [[str(cell) for cell in row] for row in rows]
    if sys.stdout.isatty():
        table = Table(*headers, box=box.SIMPLE_HEAD)
        for row in cells:
            table.add_row(*row)
        Console().print(table)
        return
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    for row in [list(headers), *cells]:
        line = "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True))
        sys.stdout.write(line.rstrip() + "\n")


def print_json_line(document: Any) -> None:
    sys.stdout.write(json.dumps(document, separators=(",", ":")) + "\n")


def _cell(value: Any) -> str:
    if isinstance(value, list):
        return ",".join(map(str, value)) or "-"
    return "-" if value is None else str(value)


def print_rows(output: OutputFormat, rows: Sequence[dict[str, Any]]) -> None:
    """Result rows (dicts with the same keys): a JSON line each, or a table headed by the
    upper-cased keys, lists shown as ``1,2,3`` and empty ones or None as ``-``."""
    if output is OutputFormat.JSON:
        for row in rows:
            print_json_line(row)
    elif rows:
        print_table([key.upper() for key in rows[0]],
                    [[_cell(value) for value in row.values()] for row in rows])


def stderr_console() -> Console:
    return Console(stderr=True)


def progress(*, bar: bool) -> Progress:
    """A transient progress display on stderr: a bar (the total is known), else a spinner
    with a record count. The caller adds its task (``add_task``) and advances it.

    Disabled (prints nothing) when stderr is not a terminal.
    """
    console = stderr_console()
    columns = (
        [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
         TaskProgressColumn(), TimeElapsedColumn()]
        if bar
        else [SpinnerColumn(), TextColumn("{task.description}"),
              TextColumn("{task.completed:.0f} records"), TimeElapsedColumn()]
    )
    return Progress(*columns, console=console, transient=True,
                    disable=not console.is_terminal)
