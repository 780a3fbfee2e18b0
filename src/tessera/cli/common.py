"""Shared CLI plumbing: one-line errors without tracebacks, consoles, exit codes, the command
classes every command is drawn with, and the options several commands share.

Every command is a module-level function with ``Annotated`` options, registered by its module's
``register(app)`` with ``cls=Command``; it parses its options, calls one library function and
prints. Imports of the library stay inside the command functions, so ``tessera --help`` starts
without loading numpy, DuckDB or the solvers.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import warnings
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, ExitStack
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from typer.core import TyperCommand, TyperGroup

from tessera.errors import TesseraError

if TYPE_CHECKING:
    import click

    from tessera.data.table import CsvOptions

F = TypeVar("F", bound=Callable[..., Any])

#: Exit code for invalid input (schema, workload, data).
EXIT_INPUT = 2

out = Console(soft_wrap=True)
#: stderr: errors, warnings and every NOT PRIVATE mark (never silenced).
err = Console(stderr=True, soft_wrap=True, highlight=False)
#: stderr: informational messages (summaries, files written, progress, spinners), silenced by
#: the global ``--quiet`` (:func:`tessera.cli.logs.configure`).
info = Console(stderr=True, soft_wrap=True, highlight=False)


def fail(message: str, code: int = EXIT_INPUT) -> None:
    """Print one error line per line of ``message`` to stderr and exit non-zero."""
    for line in str(message).splitlines() or [""]:
        err.print(f"[bold red]error:[/] {line}", markup=True, highlight=False)
    raise typer.Exit(code)


def user_errors(fn: F) -> F:
    """Turn :class:`TesseraError` (and missing files) into one-line errors, no traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with ExitStack() as held:  # what the command holds (a Spark session), closed at its end
            token = _HELD.set(held)
            try:
                with warnings.catch_warnings():
                    warnings.showwarning = _show_warning
                    return fn(*args, **kwargs)
            except TesseraError as e:
                fail(_escape(str(e)))
            except FileNotFoundError as e:
                fail(_escape(f"{e.filename}: no such file"))
            except OSError as e:  # the environment (a full disk, permissions): one line
                fail(_escape(f"{e.filename + ': ' if e.filename else ''}{e.strerror or e}"))
            except KeyboardInterrupt:
                interrupted()
            except Exception as e:
                if not is_interruption(e):
                    raise
                interrupted()
            finally:
                _HELD.reset(token)

    return wrapper  # type: ignore[return-value]


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: Any = None, line: str | None = None) -> None:
    """Tessera's own warnings as one ``warning:`` line on stderr; others as Python prints them."""
    from tessera.errors import TesseraWarning

    if issubclass(category, TesseraWarning):
        err.print(f"[yellow]warning:[/] {_escape(str(message))}")
    else:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


#: Exit code after Ctrl-C (128 + SIGINT, as shells report it).
EXIT_INTERRUPTED = 130


def interrupted() -> None:
    """The one message for Ctrl-C, wherever it lands: ``interrupted`` on stderr, exit 130.
    (A release interrupted after its charge has already been marked aborted by the library.)"""
    err.print("interrupted")
    sys.exit(EXIT_INTERRUPTED)


def is_interruption(e: BaseException) -> bool:
    """Ctrl-C as an engine reports it: DuckDB turns SIGINT inside a query into its
    ``InterruptException`` or a ``RuntimeError: Query interrupted`` (also when wrapped in another
    error, so the chain is searched)."""
    seen: set[int] = set()
    current: BaseException | None = e
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, KeyboardInterrupt) or type(current).__name__ == \
                "InterruptException" or (isinstance(current, RuntimeError)
                                         and str(current).strip() == "Query interrupted"):
            return True
        current = current.__cause__ or current.__context__
    return False


#: The resources of the running command (:func:`hold`), released when it ends however it ends.
_HELD: ContextVar[ExitStack | None] = ContextVar("tessera_cli_held", default=None)


def hold(resource: AbstractContextManager[Any]) -> None:
    """Enter ``resource`` until the running command (a :func:`user_errors` function) ends,
    normally, by an error or by Ctrl-C; outside a command it is not entered."""
    held = _HELD.get()
    if held is not None:
        held.enter_context(resource)


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


# -- how commands are drawn in --help ----------------------------------------------------------

#: A required argument as typer ≥ 0.29 writes it in the usage line: ``{DATA}`` (optional ones
#: stay ``[DATA]``).
_BRACED = re.compile(r"^\{(.+)\}")


def _plain_flags(params: Iterable[click.Parameter]) -> None:
    """Flags take no value: no ``<bool>`` after ``--json`` or ``--help`` (typer ≥ 0.29 draws
    one; an empty metavar is what its help panel prints instead)."""
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""


class Command(TyperCommand):
    """A typer command whose help reads ``Usage: tessera count [OPTIONS] DATA WORKLOAD`` and
    shows no value type after flags."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _plain_flags(self.params)

    def collect_usage_pieces(self, ctx: click.Context) -> list[str]:
        return [_BRACED.sub(r"\1", piece) for piece in super().collect_usage_pieces(ctx)]

    def get_help_option(self, ctx: click.Context) -> Any:
        option = super().get_help_option(ctx)
        if option is not None:
            _plain_flags([option])
        return option


class Group(TyperGroup):
    """A typer group (``tessera``, ``tessera schema``, …) whose ``--help`` shows no ``<bool>``,
    and where Ctrl-C outside a command's own handling is :func:`interrupted` too (not click's
    ``Aborted!``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _plain_flags(self.params)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            interrupted()
        except Exception as e:
            if not is_interruption(e):
                raise
            interrupted()

    def get_help_option(self, ctx: click.Context) -> Any:
        option = super().get_help_option(ctx)
        if option is not None:
            _plain_flags([option])
        return option


# -- options shared by several commands ----------------------------------------------------------

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
#: Text, not a Path: with --engine spark it may be a URI (``s3a://bucket/t``), which a Path would
#: mangle; a missing local file is the library's one-line "no such file" error.
DataArg = Annotated[
    str, typer.Argument(help="CSV, Parquet or DuckDB file, or a directory of Parquet files "
                        "(with --engine spark: any path or URI Spark reads).", metavar="DATA")
]
WorkloadArg = Annotated[
    Path,
    typer.Argument(
        help="Workload file (one WHERE clause per line, or YAML/JSON; tessera answer also "
             "takes SELECT COUNT/SUM/AVG … GROUP BY statements).",
        metavar="WORKLOAD",
        exists=True,
        dir_okay=False,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output (JSON).")]
TimeLimitOpt = Annotated[
    float | None,
    typer.Option(
        "--time-limit",
        help="Seconds for the overlap search and its bounds (value classes and the witness "
        "check, linear in the workload, come on top); past it, a proven upper bound.",
    ),
]
NeighboursOpt = Annotated[
    str,
    typer.Option(
        "--neighbours", "-n", help="Neighbouring data sets: add-remove or substitute."
    ),
]

# -- options of the commands that read data ------------------------------------------------------

PrivacyIdOpt = Annotated[
    str | None,
    typer.Option(
        "--privacy-id", metavar="COLUMN",
        help="The unit of privacy is one person: the rows with one value of COLUMN (it need "
        "not be in the schema; it is never released). Needs --max-rows.",
    ),
]
MaxRowsOpt = Annotated[
    int | None,
    typer.Option(
        "--max-rows", metavar="K", min=1,
        help="With --privacy-id: keep at most K rows of each person (chosen by a hash of the "
        "row: each person's own rows decide); the noise grows by K.",
    ),
]
CountOpt = Annotated[
    str | None,
    typer.Option(
        "--count", metavar="rows|people",
        help="With --privacy-id: what each query counts — rows (every kept row; the default: "
        "a person costs K × a row) or people (each person with a kept row in the query, once: "
        "COUNT(DISTINCT id); a person costs the coverage of K rows, at most that).",
    ),
]
OnInvalidOpt = Annotated[
    str, typer.Option(help="Values outside the schema: 'error' (default) or 'drop' (reported).")
]
ExtraColumnsOpt = Annotated[
    str, typer.Option(help="Data columns the schema does not declare: 'error' (default) or "
                      "'ignore' (not read; named on stderr).")
]


def check_policies(on_invalid: str, extra_columns: str) -> None:
    """``--on-invalid`` and ``--extra-columns`` checked before anything is read."""
    if on_invalid not in ("error", "drop"):
        fail(f"--on-invalid {on_invalid!r}: use 'error' or 'drop'")
    if extra_columns not in ("error", "ignore"):
        fail(f"--extra-columns {extra_columns!r}: use 'error' or 'ignore'")


SeedOpt = Annotated[
    int | None, typer.Option("--seed", help="Seeded randomness for TESTS: output NOT PRIVATE.")
]
DeltaOpt = Annotated[float | None, typer.Option("--delta", help="δ of an (ε,δ) budget.")]
RhoOpt = Annotated[float | None, typer.Option("--rho", help="ρ-zCDP (discrete Gaussian).")]
LabelOpt = Annotated[str | None, typer.Option("--label", help="Name of the release.")]
NoHeaderOpt = Annotated[
    bool, typer.Option("--no-header", help="CSV without a header row: columns follow the schema.")
]
DelimiterOpt = Annotated[
    str | None,
    typer.Option("--delimiter", "-d", help="CSV field separator, e.g. ', ' (default: sniffed)."),
]
NaOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--na", help="Text that marks a missing value (repeatable), e.g. '?'.", metavar="<str>"
    ),
]
SkipRowsOpt = Annotated[int, typer.Option("--skip-rows", help="Lines to skip at the top of a CSV.")]
TableOpt = Annotated[
    str | None, typer.Option("--table", help="Table name inside a DuckDB database file.")
]


EngineOpt = Annotated[
    str,
    typer.Option(
        "--engine",
        help="Where the data are counted: duckdb (embedded, larger than memory) or spark "
        "(pip install '.\\[spark]', Java 17+; only aggregates leave Spark).",
    ),
]
SparkMasterOpt = Annotated[
    str,
    typer.Option("--spark-master", help="Spark master URL with --engine spark (local[2], "
                 "spark://host:7077, yarn).", metavar="URL"),
]
#: The default of ``--spark-master``: every core of the local machine.
DEFAULT_SPARK_MASTER = "local[*]"


#: Set to 1 to see Spark's own log, progress bars and PySpark's warnings (quiet by default).
SPARK_VERBOSE_ENV = "TESSERA_SPARK_VERBOSE"


def data_source(data: Path | str, engine: str = "duckdb",
                spark_master: str = DEFAULT_SPARK_MASTER) -> Any:
    """What the library reads for DATA: the path itself (DuckDB), or a
    :class:`~tessera.data.spark_source.SparkSource` on ``spark_master`` for ``--engine spark``; an
    unknown engine is a one-line error.

    With Spark, the rest of the command runs in a
    :func:`~tessera.data.spark_source.spark_scope`: the session it starts is stopped when the
    command ends (however it ends), and is quiet unless ``TESSERA_SPARK_VERBOSE=1``."""
    if engine == "duckdb":
        return str(data)
    if engine == "spark":
        from tessera.data.spark_session import spark_scope
        from tessera.data.spark_source import SparkSource

        hold(spark_scope(quiet=os.environ.get(SPARK_VERBOSE_ENV, "") in ("", "0")))
        return SparkSource(str(data), master=spark_master)
    fail(f"--engine {engine!r}: use 'duckdb' or 'spark'")
    raise AssertionError  # unreachable: fail exits


def csv_options(
    no_header: bool, delimiter: str | None, na: list[str] | None, skip_rows: int
) -> CsvOptions:
    """The library's :class:`~tessera.data.table.CsvOptions` from the CSV flags above."""
    from tessera.data.table import CsvOptions

    return CsvOptions(
        header=False if no_header else None,
        delimiter=delimiter,
        na_values=tuple(na or ()),
        skip_rows=skip_rows,
    )


def spent_text(charge: Any) -> str:
    """``before → after`` of a ledger :class:`~tessera.release.ledger_records.Charge`, rounded
    up to the 6th significant digit of ``after`` (1.499999999998972 reads 1.5)."""
    from tessera.release.decimals import format_budget

    scale = charge.spent_after if charge.spent_after > 0 else 1.0
    return (f"{format_budget(charge.spent_before, scale, up=True)} → "
            f"{format_budget(charge.spent_after, scale, up=True)}")


def privacy_unit(privacy_id: str | None, max_rows: int | None, count: str | None = None
                 ) -> Any:
    """The :class:`~tessera.privacy.PrivacyUnit` of ``--privacy-id``, ``--max-rows`` (both or
    neither) and ``--count`` (rows or people, with them); a clear error otherwise."""
    from tessera.privacy import PrivacyUnit

    return PrivacyUnit.of(privacy_id, max_rows, count)
