"""Shared CLI plumbing: one-line errors without tracebacks, consoles, exit codes."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from rich.console import Console

from tessera.errors import TesseraError

F = TypeVar("F", bound=Callable[..., Any])

#: Exit code for invalid input (schema, workload, data).
EXIT_INPUT = 2

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True, highlight=False)


def fail(message: str, code: int = EXIT_INPUT) -> None:
    """Print one error line per line of ``message`` to stderr and exit non-zero."""
    for line in str(message).splitlines() or [""]:
        err.print(f"[bold red]error:[/] {line}", markup=True, highlight=False)
    raise typer.Exit(code)


def user_errors(fn: F) -> F:
    """Turn :class:`TesseraError` (and missing files) into one-line errors, no traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except TesseraError as e:
            fail(_escape(str(e)))
        except FileNotFoundError as e:
            fail(_escape(f"{e.filename}: no such file"))
        except KeyboardInterrupt:
            err.print("interrupted")
            sys.exit(130)

    return wrapper  # type: ignore[return-value]


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


# -- options shared by the commands that read data --------------------------------------------

from pathlib import Path  # noqa: E402
from typing import Annotated  # noqa: E402

SchemaOpt = Annotated[
    Path,
    typer.Option(
        "--schema",
        "-s",
        help="Public schema (YAML/JSON, or a Private-PGM domain JSON).",
        exists=True,
        dir_okay=False,
    ),
]
NoHeaderOpt = Annotated[
    bool, typer.Option("--no-header", help="CSV without a header row: columns follow the schema.")
]
DelimiterOpt = Annotated[
    str | None,
    typer.Option("--delimiter", "-d", help="CSV field separator, e.g. ', ' (default: sniffed)."),
]
NaOpt = Annotated[
    list[str] | None,
    typer.Option("--na", help="Text that marks a missing value (repeatable), e.g. '?'."),
]
SkipRowsOpt = Annotated[int, typer.Option("--skip-rows", help="Lines to skip at the top of a CSV.")]
TableOpt = Annotated[
    str | None, typer.Option("--table", help="Table name inside a DuckDB database file.")
]


def csv_options(no_header: bool, delimiter: str | None, na: list[str] | None, skip_rows: int):  # type: ignore[no-untyped-def]
    from tessera.data import CsvOptions

    return CsvOptions(
        header=False if no_header else None,
        delimiter=delimiter,
        na_values=tuple(na or ()),
        skip_rows=skip_rows,
    )
