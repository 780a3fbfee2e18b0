"""``tessera schema``: draft a schema from data (not private), and check one."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from tessera.cli.common import (
    Command,
    DelimiterOpt,
    Group,
    NaOpt,
    NoHeaderOpt,
    SkipRowsOpt,
    csv_options,
    err,
    out,
    user_errors,
)

if TYPE_CHECKING:
    from tessera.schema.domain import Domain


def register(app: typer.Typer) -> None:
    schema_app = typer.Typer(
        cls=Group, help="Public schemas: draft one from data, check one.", no_args_is_help=True
    )
    schema_app.command("infer", cls=Command)(infer)
    schema_app.command("check", cls=Command)(check)
    app.add_typer(schema_app, name="schema")


@user_errors
def infer(
    data: Annotated[
        Path, typer.Argument(help="CSV or Parquet file.", metavar="DATA", exists=True)
    ],
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Where to write the draft schema (YAML/JSON); "
                     "without it (or with -), the YAML goes to stdout."),
    ] = None,
    no_header: NoHeaderOpt = False,
    delimiter: DelimiterOpt = None,
    na: NaOpt = None,
    skip_rows: SkipRowsOpt = 0,
    max_categories: Annotated[int, typer.Option(help="Most values a text column may have.")] = 100,
    bins: Annotated[int, typer.Option(help="Bins for non-integer numeric columns.")] = 10,
) -> None:
    """Draft a schema from DATA. NOT PRIVATE: it reads bounds and values off the data."""
    from tessera.data.infer import draft_schema

    draft = draft_schema(
        str(data),
        csv=csv_options(no_header, delimiter, na, skip_rows),
        max_categories=max_categories,
        bins=bins,
    )
    domain = draft.domain
    to_stdout = output is None or str(output) == "-"
    if to_stdout:
        sys.stdout.write(domain.to_yaml(header=draft.header()))
        sys.stdout.flush()
    else:
        domain.save(output, header=draft.header())
    for note in draft.notes():
        err.print(note, markup=False)
    err.print(
        "[bold yellow]WARNING: this schema was inferred from the data and is NOT PRIVATE.[/] "
        "Its bounds and value lists leak the data; replace them with public knowledge "
        "before any private release.",
        markup=True,
    )
    if not to_stdout:  # stdout holds the YAML alone
        _print(domain, f"Draft schema written to {output}")


@user_errors
def check(
    schema: Annotated[
        Path, typer.Argument(help="Schema file.", metavar="SCHEMA", exists=True)
    ],
) -> None:
    """Validate a schema file and print its attributes."""
    from tessera.schema.domain import Domain

    domain = Domain.load(schema)
    _print(domain, f"{schema}: {len(domain)} attributes")


def _print(domain: Domain, title: str) -> None:
    """The schema as a table: one row per attribute (see :func:`tessera.data.infer.summarize`)."""
    from tessera.data.infer import summarize

    table = Table(title=title)
    for col in ("attribute", "kind", "codes", "values"):
        table.add_column(col)
    for name, kind, size, detail in summarize(domain):
        table.add_row(name, kind, str(size), detail)
    out.print(table)
    out.print(f"|𝔻| = {domain.size:,} points")
