"""``tessera count``: exact answers of a workload on data (NOT PRIVATE)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from tessera.cli.common import (
    Command,
    CountOpt,
    DataArg,
    DelimiterOpt,
    EngineOpt,
    ExtraColumnsOpt,
    JsonOpt,
    MaxRowsOpt,
    NaOpt,
    NoHeaderOpt,
    OnInvalidOpt,
    PrivacyIdOpt,
    SchemaOpt,
    SkipRowsOpt,
    SparkMasterOpt,
    TableOpt,
    WorkloadArg,
    check_policies,
    csv_options,
    data_source,
    err,
    fail,
    info,
    privacy_unit,
    user_errors,
)
from tessera.errors import TesseraError

if TYPE_CHECKING:
    from tessera.data.counts import CountResult
    from tessera.release.exact_aggregates import ExactAggregates
    from tessera.workload.workload import Workload


def register(app: typer.Typer) -> None:
    app.command("count", cls=Command)(count)


@user_errors
def count(
    data: DataArg,
    workload: WorkloadArg,
    schema: SchemaOpt,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write the answers here (CSV; Parquet for .parquet). Families: the long table "
            "family,cell,answer.",
        ),
    ] = None,
    wide: Annotated[
        Path | None,
        typer.Option(
            "--wide",
            help="Families: one CSV per family in this directory (a column per attribute and "
            "answer), with index.csv and queries.csv.",
            file_okay=False,
        ),
    ] = None,
    as_json: JsonOpt = False,
    on_invalid: OnInvalidOpt = "error",
    extra_columns: ExtraColumnsOpt = "error",
    no_header: NoHeaderOpt = False,
    delimiter: DelimiterOpt = None,
    na: NaOpt = None,
    skip_rows: SkipRowsOpt = 0,
    table: TableOpt = None,
    engine: EngineOpt = "duckdb",
    spark_master: SparkMasterOpt = "local[*]",
    privacy_id: PrivacyIdOpt = None,
    max_rows: MaxRowsOpt = None,
    count: CountOpt = None,
) -> None:
    """Exact answers of WORKLOAD on DATA as `query,answer` rows. NOT PRIVATE.

    With --privacy-id COLUMN --max-rows K the answers are those a release for one person
    counts: each person's rows bounded to K first; with --count people each query counts
    the distinct people with a kept row in it.

    Marginals, cubes and hierarchies are counted with one aggregation per family and written
    as the long table `family,cell,answer` (predicate queries: empty family, their name as
    the cell), or with --wide one table per family.

    A workload of SELECT statements gets the rows `tessera answer` publishes for it
    (statement,group,aggregate,answer,…), each the exact COUNT, SUM or AVG.
    """
    from tessera.data.counts import count as exact_counts
    from tessera.schema.domain import Domain
    from tessera.workload.select import is_aggregate_file
    from tessera.workload.workload import Workload

    check_policies(on_invalid, extra_columns)
    unit = privacy_unit(privacy_id, max_rows, count)
    if is_aggregate_file(workload):
        if wide is not None:
            raise TesseraError(
                "--wide cannot be used with aggregate statements: it writes one table per "
                "family, and the answers of SELECT statements are one row per statement, group "
                "and aggregate", hint="drop --wide; -o writes the rows as CSV (Parquet for "
                ".parquet, JSON with --json)")
        _count_aggregates(data, workload, schema, output, as_json, engine, spark_master,
                          csv_options(no_header, delimiter, na, skip_rows), table, on_invalid,
                          extra_columns, unit)
        return
    w = Workload.load(workload, Domain.load(schema))
    if wide is not None and not w.partitions:
        fail("--wide writes one table per family, and the workload has no families")
    source = data_source(data, engine, spark_master)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} " + _steps(w)),
        TimeElapsedColumn(),
        console=info,
        transient=True,
        disable=not info.is_terminal or info.quiet,
    ) as bar:
        # a long scan (reading, validating and coding the data) shows DuckDB's own progress
        scan = bar.add_task("reading", total=100, visible=False)
        task = bar.add_task("counting", total=None)
        result = exact_counts(
            source,
            w,
            on_invalid=on_invalid,  # type: ignore[arg-type]
            extra_columns=extra_columns,  # type: ignore[arg-type]
            csv=csv_options(no_header, delimiter, na, skip_rows),
            table=table,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
            scan_progress=lambda f: bar.update(scan, completed=100 * f, visible=f < 1),
            unit=unit,
        )
        bar.update(scan, visible=False)
    _report(result)
    if wide is not None:
        index = result.write_wide(wide)
        info.print(f"wrote {len(w.partitions):,} families ({w.n_cells:,} cells) to {wide}/ "
                  f"(index: {index.name})")
        if output is None and not as_json:
            return
    _write(result, output, as_json)


def _count_aggregates(data: Path, workload: Path, schema: Path, output: Path | None,
                      as_json: bool, engine: str, spark_master: str, csv: object,
                      table: str | None, on_invalid: str, extra_columns: str,
                      unit: object) -> None:
    """A workload of SELECT statements: :func:`tessera.release.exact_aggregates.
    exact_aggregates`, the NOT PRIVATE mark on stderr, the rows as CSV (JSON with --json,
    Parquet for a .parquet output) on stdout or to ``output``."""
    from tessera.release.exact_aggregates import exact_aggregates
    from tessera.schema.domain import Domain
    from tessera.workload.select import read_aggregates

    if output is not None and output.suffix.lower() == ".parquet" and as_json:
        fail("--json and a .parquet output exclude each other")
    w = read_aggregates(workload, Domain.load(schema))
    with info.status(f"counting {len(w.statements):,} statements…", spinner="dots"):
        result = exact_aggregates(
            data_source(data, engine, spark_master), w, unit=unit,  # type: ignore[arg-type]
            csv=csv, table=table, on_invalid=on_invalid,  # type: ignore[arg-type]
            extra_columns=extra_columns)  # type: ignore[arg-type]
    _report_aggregates(result)
    n = len(result.frame)
    if output is not None and output.suffix.lower() == ".parquet":
        result.write_parquet(output)
    elif output is not None:
        (result.write_json if as_json else result.write_csv)(output)
    else:
        sys.stdout.flush()
        (result.write_json if as_json else result.write_csv)(sys.stdout)
        sys.stdout.flush()
        return
    info.print(f"wrote {n:,} answers to {output}", markup=False, highlight=False)


def _report_aggregates(result: ExactAggregates) -> None:
    """On stderr: the NOT PRIVATE mark with the rows and statements, how they were counted,
    the means left empty and any dropped rows."""
    from tessera.data.counts import NOT_PRIVATE

    w, unit = result.workload, result.unit
    err.print(f"[bold red]{NOT_PRIVATE}[/] ({result.n_rows:,} rows, {len(w.statements):,} "
              f"statements, {len(result.frame):,} answers)", markup=True)
    if unit.counts_people:
        info.print(f"unit: {unit.text} — each person's rows bounded to {unit.max_rows}; every "
                   "group counts distinct people and sums each person's total there, clamped "
                   "once (as tessera answer --count people measures them)", markup=False)
    elif not unit.is_row:
        info.print(f"unit: {unit.text} — each person's rows bounded to {unit.max_rows}, then "
                   "every row counted (as tessera answer measures them)", markup=False)
    if result.empty_means:
        what = "people" if unit.counts_people else "rows"
        info.print(f"AVG: {result.empty_means:,} answer(s) empty, their groups having no "
                   f"{what} (count 0: no mean; tessera answer leaves them empty too)",
                   markup=False)
    if result.dropped:
        err.print(
            f"dropped {result.dropped:,} rows with values outside the schema (--on-invalid drop):"
        )
        for iv in result.invalid:
            err.print(f"  {iv.describe()}", markup=False)


def _steps(w: Workload) -> str:
    """What the progress bar counts: scope groups of predicate queries, then families."""
    if not w.partitions:
        return "scopes"
    return "scopes + families" if len(w) else "families"


def _report(result: CountResult) -> None:
    """On stderr: the NOT PRIVATE mark with the rows and queries, and any dropped rows."""
    from tessera.data.counts import NOT_PRIVATE

    w = result.workload
    what = f"{len(w):,} queries"
    if w.partitions:
        what = (f"{len(w):,} predicate queries, " if len(w) else "") + (
            f"{len(w.partitions):,} families, {w.n_cells:,} cells")
    err.print(f"[bold red]{NOT_PRIVATE}[/] ({result.n_rows:,} rows, {what})", markup=True)
    if result.dropped:
        err.print(
            f"dropped {result.dropped:,} rows with values outside the schema (--on-invalid drop):"
        )
        for iv in result.invalid:
            err.print(f"  {iv.describe()}", markup=False)


def _write(result: CountResult, output: Path | None, as_json: bool) -> None:
    """The answers as CSV or JSON on stdout or to ``output``, or as Parquet for ``.parquet``;
    with families the CSV and Parquet hold the long table (:meth:`CountResult.write_csv`)."""
    n = result.workload.n_queries
    if output is not None and output.suffix.lower() == ".parquet":
        if as_json:
            fail("--json and a .parquet output exclude each other")
        result.write_parquet(output)
        info.print(f"wrote {n:,} answers to {output}")
        return
    if result.workload.partitions and not as_json:
        if output is None:
            sys.stdout.flush()
            result.write_csv(sys.stdout.buffer)
            sys.stdout.buffer.flush()
        else:
            result.write_csv(output)
            info.print(f"wrote {n:,} answers to {output}")
        return
    if as_json:
        text = json.dumps(result.to_dict(), indent=1) + "\n"
    else:
        text = result.to_frame().to_csv(index=False)
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text)
        info.print(f"wrote {n:,} answers to {output}")
