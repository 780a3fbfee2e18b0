"""``tessera count``: exact answers of a workload on data (NOT PRIVATE)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from tessera.cli.common import (
    DelimiterOpt,
    NaOpt,
    NoHeaderOpt,
    SchemaOpt,
    SkipRowsOpt,
    TableOpt,
    csv_options,
    err,
    fail,
    user_errors,
)


@user_errors
def count_command(
    data: Annotated[Path, typer.Argument(help="CSV, Parquet or DuckDB file.", exists=True)],
    workload: Annotated[Path, typer.Argument(help="Workload file.", exists=True)],
    schema: SchemaOpt,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write the answers here (CSV; Parquet for .parquet)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON instead of CSV.")] = False,
    on_invalid: Annotated[
        str, typer.Option(help="Values outside the schema: 'error' (default) or 'drop' (reported).")
    ] = "error",
    no_header: NoHeaderOpt = False,
    delimiter: DelimiterOpt = None,
    na: NaOpt = None,
    skip_rows: SkipRowsOpt = 0,
    table: TableOpt = None,
) -> None:
    """Exact answers of WORKLOAD on DATA as `query,answer` rows. NOT PRIVATE."""
    from tessera.counts import NOT_PRIVATE, count
    from tessera.domain import Domain
    from tessera.workload import Workload

    if on_invalid not in ("error", "drop"):
        fail(f"--on-invalid {on_invalid!r}: use 'error' or 'drop'")
    domain = Domain.load(schema)
    w = Workload.load(workload, domain)
    with Progress(
        TextColumn("counting"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} scopes"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    ) as bar:
        task = bar.add_task("count", total=None)
        result = count(
            str(data),
            w,
            on_invalid=on_invalid,  # type: ignore[arg-type]
            csv=csv_options(no_header, delimiter, na, skip_rows),
            table=table,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
        )
    err.print(
        f"[bold red]{NOT_PRIVATE}[/] ({result.n_rows:,} rows, {len(w):,} queries)", markup=True
    )
    if result.dropped:
        err.print(
            f"dropped {result.dropped:,} rows with values outside the schema (--on-invalid drop):"
        )
        for iv in result.invalid:
            err.print(f"  {iv.describe()}", markup=False)
    frame = result.to_frame()
    if output is not None and output.suffix.lower() == ".parquet":
        if as_json:
            fail("--json and a .parquet output exclude each other")
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pandas(frame, preserve_index=False).replace_schema_metadata(
            {"tessera.privacy": NOT_PRIVATE}
        )
        pq.write_table(table, output)
        err.print(f"wrote {len(frame):,} answers to {output}")
        return
    if as_json:
        payload = {
            "privacy": NOT_PRIVATE,
            "rows": result.n_rows,
            "dropped_rows": result.dropped,
            "answers": [
                {"query": q, "answer": int(a)} for q, a in zip(frame["query"], frame["answer"])
            ],
        }
        text = json.dumps(payload, indent=1) + "\n"
    else:
        text = frame.to_csv(index=False)
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text)
        err.print(f"wrote {len(frame):,} answers to {output}")


def register(app: typer.Typer) -> None:
    app.command("count")(count_command)
