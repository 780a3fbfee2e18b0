"""The DuckDB engine of the data layer: reading data into DuckDB and encoding it against the
public domain (docs/theory.md §1), one implementation of :class:`~tessera.data.table.CodedTable`.

The data are never trusted to define the domain: every value of every schema column is checked
against its declared attribute. Values outside the domain are an error that names the column, the
offending values and how many rows hold them — unless the caller chose the explicit ``drop``
policy, in which case the dropped rows are counted and reported. Nothing is dropped silently.

Encoding is exact and single-sourced: the distinct values of each column are fetched from DuckDB
(one ``GROUP BY`` per column) and encoded in Python by :meth:`Attribute.encode`; every row then
gets the code of its distinct value (matched with Arrow's ``index_in``, or with a DuckDB join
should Arrow's equality ever disagree), so no value is encoded twice by different rules.

Larger than memory: every connection made here (:func:`connect`) has a DuckDB ``memory_limit``
(:func:`memory_limit`: ``TESSERA_MEMORY_LIMIT``, else half the machine's RAM) and a private
``temp_directory`` to spill to, Parquet is scanned in place, the codes are streamed into DuckDB
batch by batch (one byte per value for attributes of < 128 codes) and nothing is ever loaded
into pandas, so the peak memory is bounded by the limit, not by the table. Long scans can report
their progress (``scan_progress``: DuckDB's own query progress, polled).

The validation rules (:mod:`tessera.data.validation`) and the interface
(:mod:`tessera.data.table`) are shared with the Spark engine (:mod:`tessera.data.spark_source`);
neither engine imports the other: :func:`tessera.data.source.encode` picks one by the source.

Why this module is long (about 700 lines): reading and encoding are one pipeline with one
invariant, that every value is checked against the domain and encoded once, by one rule. Opening
a source (CSV dialects, Parquet, DuckDB files, in-memory frames), checking its columns, encoding
each column's distinct values and coding the rows share the DuckDB connection, the ``src`` table
or view the source is read into, and the error reporting that names the offending values.
"""

from __future__ import annotations

import csv as _csv
import gzip
import itertools
import os
import re
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tessera.data.table import (
    CSV_SUFFIXES,
    DUCKDB_SUFFIXES,
    CodedTable,
    CsvOptions,
    ExtraColumns,
    InvalidValues,
    OnInvalid,
    ScanProgress,
)
from tessera.data.validation import (
    ColumnCodes,
    bad_measure_error,
    check_columns,
    check_measure_columns,
    check_privacy_id,
    column_codes,
    delimiter_hint,
    first_line,
    guess_delimiter,
    id_type_error,
    invalid_values_error,
    measure_units_sql,
    missing_ids_error,
)
from tessera.errors import DataError
from tessera.privacy import ONE_ROW, PrivacyUnit
from tessera.schema.domain import Attribute, Domain

#: Column types for a headerless CSV, by attribute kind (text kinds are matched as written).
_SQL_TYPES = {"integer": "BIGINT", "binned": "DOUBLE"}
#: The column of ``coded`` holding the privacy id as text, while rows are bounded.
PID = "__pid"
#: DuckDB types a privacy id may have (:data:`tessera.data.validation.ID_TYPES`).
_ID_TYPES = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
             "UINTEGER", "UBIGINT", "UHUGEINT", "VARCHAR"}


def memory_limit() -> str:
    """DuckDB's ``memory_limit`` for the connections made here: ``TESSERA_MEMORY_LIMIT`` (any
    DuckDB size, e.g. ``4GB``) if set, else half the physical memory. Past it DuckDB spills to
    its temporary directory instead of growing (its own default is 80%, too much on a shared
    machine)."""
    env = os.environ.get("TESSERA_MEMORY_LIMIT")
    if env:
        return env
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return "4GB"
    return f"{max(total // 2 // (1 << 20), 256)}MB"


def connect() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with a bounded memory (:func:`memory_limit`) and a
    ``temp_directory`` of its own (under ``TMPDIR``; DuckDB removes its files on close), so that
    data larger than the limit spill to disk instead of failing or swapping."""
    spill = Path(tempfile.gettempdir()) / f"tessera-duckdb-{os.getpid()}"
    return duckdb.connect(config={"memory_limit": memory_limit(), "temp_directory": str(spill)})


@contextmanager
def watched(con: duckdb.DuckDBPyConnection, report: ScanProgress | None) -> Iterator[None]:
    """Poll ``con.query_progress()`` (DuckDB's progress of the running query, −1 when it does
    not know) every 0.2 s while the block runs, and pass it on to ``report`` as a fraction."""
    if report is None:
        yield
        return
    # DuckDB tracks a query's progress only with its progress bar on (printing it off)
    con.execute("SET enable_progress_bar = true")
    con.execute("SET enable_progress_bar_print = false")
    stop = threading.Event()

    def poll() -> None:
        while not stop.wait(0.2):
            try:
                done = float(con.query_progress())
            except duckdb.Error:
                continue
            if done >= 0:
                report(min(done / 100.0, 1.0))

    thread = threading.Thread(target=poll, name="tessera-scan-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()



@dataclass
class EncodedTable:
    """A DuckDB table ``coded`` with one small-integer code column ``c<i>`` per attribute."""

    local_rows: ClassVar[bool] = True

    con: duckdb.DuckDBPyConnection
    domain: Domain
    n_rows: int
    dropped: int
    invalid: list[InvalidValues] = field(default_factory=list)
    #: Sorted codes of each attribute that may occur in the table (a superset of those that do).
    present: list[np.ndarray] = field(default_factory=list)
    #: Whether ``coded`` keeps the privacy id (column :data:`PID`): each query then counts
    #: people, once each (:func:`count_distinct_ids`).
    person_ids: bool = False
    #: The measure columns carried beside the codes, as DOUBLE columns ``m<j>``.
    measures: tuple[str, ...] = ()

    def measure_sums(self, requests: Sequence[tuple[str, str, int, int, int]],
                     batch: int = 200) -> list[int]:
        """Σ u(x) over the kept rows satisfying each condition, for every request (condition
        over the code columns, measure, lo, hi, e; u: :data:`~tessera.data.validation.
        MEASURE_RULE`), exact integers, ``batch`` requests per scan."""
        out: list[int] = []
        for lo in range(0, len(requests), batch):
            part = requests[lo:lo + batch]
            cols = ", ".join(
                f"SUM({measure_units_sql(f'm{self.measures.index(m)}', a, b, e)}) "
                f"FILTER (WHERE {cond}) AS s{i}" for i, (cond, m, a, b, e) in enumerate(part))
            row = self.con.execute(f"SELECT {cols} FROM coded").fetchall()[0]
            out.extend(0 if v is None else int(v) for v in row)
        return out

    def person_sums(self, requests: Sequence[tuple[str, str, int, int]],
                    batch: int = 200) -> list[int]:
        """Counting people: Σ over persons of clamp(T, lo, hi), T the person's total of the
        value over their kept rows satisfying the condition (persons without such a row add
        nothing, not clamp(0)), for every request (condition and value, SQL over the code
        columns ``c<i>`` and measures ``m<j>``; lo, hi): totals per :data:`PID` as HUGEINT,
        then clamped and added, ``batch`` requests per scan; exact integers."""
        if not self.person_ids:
            raise DataError("internal error: the table was coded without its privacy ids",
                            hint="encode with a PrivacyUnit(..., count='people')")
        out: list[int] = []
        for start in range(0, len(requests), batch):
            part = requests[start:start + batch]
            totals = ", ".join(f"SUM(CAST({value} AS HUGEINT)) FILTER (WHERE {cond}) AS t{i}"
                               for i, (cond, value, _, _) in enumerate(part))
            # (GREATEST and LEAST skip NULLs: a person without a row must stay NULL)
            clamped = ", ".join(f"SUM(CASE WHEN t{i} IS NOT NULL THEN LEAST(GREATEST(t{i}, "
                                f"{int(lo)}), {int(hi)}) END) AS s{i}"
                                for i, (_, _, lo, hi) in enumerate(part))
            row = self.con.execute(f"SELECT {clamped} FROM (SELECT {totals} FROM coded "
                                   f"GROUP BY {PID})").fetchall()[0]
            out.extend(0 if v is None else int(v) for v in row)
        return out

    def coarsen(self, class_of_code: dict[str, np.ndarray]) -> str:
        """Materialise table ``classed`` with column ``k<i>`` = class_of_code[name][code].

        ``class_of_code[name]`` is indexed by position in :attr:`present` (so attributes with a
        million possible codes cost only their occurring ones). Returns the table name.
        """
        selects, joins = [], []
        for name, classes in class_of_code.items():
            i = self.domain.index(name)
            table = pa.table(
                {
                    "code": pa.array(self.present[i], pa.int32()),
                    "cls": pa.array(classes, pa.int32()),
                }
            )
            self.con.register(f"cls{i}", table)
            selects.append(f"cls{i}.cls AS k{i}")
            joins.append(f"JOIN cls{i} ON coded.c{i} = cls{i}.code")
        if not selects:
            selects = ["1 AS one"]
        self.con.execute(
            f"CREATE OR REPLACE TEMP TABLE classed AS SELECT {', '.join(selects)} "
            f"FROM coded {' '.join(joins)}"
        )
        return "classed"

    def group_by(
        self, names: Sequence[str], table: str = "coded"
    ) -> tuple[list[np.ndarray], np.ndarray]:
        """One ``GROUP BY`` over ``names``: the occurring cells (one array per name) and counts.

        On ``coded`` the cells are codes; on ``classed`` (see :meth:`coarsen`) class indices.
        """
        if not names:
            return [], np.array([self.n_rows], dtype=np.int64)
        prefix = "c" if table == "coded" else "k"
        cols = [f"{prefix}{self.domain.index(n)}" for n in names]
        res = self.con.sql(
            f"SELECT {', '.join(cols)}, count(*) AS n FROM {table} GROUP BY ALL"
        ).fetchnumpy()
        return [np.asarray(res[c]) for c in cols], np.asarray(res["n"], dtype=np.int64)

    def group_by_many(
        self, requests: Sequence[tuple[Sequence[str], str]]
    ) -> Iterator[tuple[list[np.ndarray], np.ndarray]]:
        """:meth:`group_by` of each ``(names, table)`` in turn, lazily (an engine with a cost
        per query, Spark, answers several in one job instead)."""
        for names, table in requests:
            yield self.group_by(names, table)

    def count_distinct(self, conditions: Sequence[str]) -> np.ndarray:
        """Counting people: :func:`count_distinct_ids` of this table."""
        return count_distinct_ids(self, conditions)

    def codes(self) -> np.ndarray:
        """All rows as an (n, m) code matrix (small data and tests)."""
        cols = ", ".join(f"c{i}" for i in range(len(self.domain)))
        res = self.con.sql(f"SELECT {cols} FROM coded").fetchnumpy()
        return np.column_stack(
            [np.asarray(res[f"c{i}"], dtype=np.int64) for i in range(len(self.domain))]
        )

    def columns(self, indices: Sequence[int]) -> dict[int, np.ndarray]:
        """The code columns of the attributes at ``indices``, fetched in one query (one row
        order): for in-memory aggregation of small tables."""
        used = sorted(set(indices))
        if not used:
            return {}
        res = self.con.sql(f"SELECT {', '.join(f'c{i}' for i in used)} FROM coded").fetchnumpy()
        return {i: np.asarray(res[f"c{i}"]) for i in used}


def count_distinct_ids(table: EncodedTable, conditions: Sequence[str],
                       batch: int = 200) -> np.ndarray:
    """``COUNT(DISTINCT id) FILTER (WHERE condition)`` over ``coded`` for every condition (SQL
    over the code columns ``c<i>``), ``batch`` conditions per scan: the number of people with
    at least one kept row satisfying it."""
    if not table.person_ids:
        raise DataError("internal error: the table was coded without its privacy ids",
                        hint="encode with a PrivacyUnit(..., count='people')")
    out = np.zeros(len(conditions), dtype=np.int64)
    for lo in range(0, len(conditions), batch):
        part = conditions[lo:lo + batch]
        cols = ", ".join(f"count(DISTINCT {PID}) FILTER (WHERE {c}) AS n{i}"
                         for i, c in enumerate(part))
        row = table.con.execute(f"SELECT {cols} FROM coded").fetchall()[0]
        out[lo:lo + len(part)] = [int(v) for v in row]
    return out


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def relation(
    con: duckdb.DuckDBPyConnection,
    source: Any,
    *,
    names: Sequence[str] | None = None,
    text_columns: Sequence[str] = (),
    column_types: Mapping[str, str] | None = None,
    csv: CsvOptions = CsvOptions(),
    table: str | None = None,
) -> duckdb.DuckDBPyRelation:
    """A DuckDB relation over ``source``.

    ``source``: a CSV/TSV or Parquet path, a DuckDB database file (with ``table``), a pandas or
    polars DataFrame, a pyarrow Table, or a DuckDB relation.
    """
    if isinstance(source, (str, Path)):
        return _file_relation(
            con,
            Path(source),
            names=names,
            text_columns=text_columns,
            column_types=column_types,
            csv=csv,
            table=table,
        )
    return _memory_relation(con, source)


def _file_relation(
    con: duckdb.DuckDBPyConnection,
    p: Path,
    *,
    names: Sequence[str] | None,
    text_columns: Sequence[str],
    column_types: Mapping[str, str] | None,
    csv: CsvOptions,
    table: str | None,
) -> duckdb.DuckDBPyRelation:
    """Step 1 of :func:`relation` for a path: pick the reader by suffix.

    A directory of ``.parquet`` files is a Parquet data set; ``.duckdb``/``.db``/``.ddb`` a
    database attached read-only (it needs ``table``); CSV-like suffixes, or none, go to
    :func:`_read_csv`. Anything else is refused rather than guessed.
    """
    if not p.exists():
        raise DataError(f"no such file: {p}", hint="check the path")
    suffix = p.suffix.lower()
    if p.is_dir():
        return _read_parquet(con, _parquet_directory(p), p)
    if suffix == ".parquet":
        return _read_parquet(con, str(p), p)
    if suffix in DUCKDB_SUFFIXES:
        if not table:
            raise DataError(f"{p} is a DuckDB database", hint="name the table (--table NAME)")
        con.execute(f"ATTACH {_sql_string(str(p))} AS src (READ_ONLY)")
        return con.table(f"src.{_quote(table)}")
    if suffix in CSV_SUFFIXES or suffix == "":
        if p.stat().st_size == 0 and names:
            # no header and no rows: the schema's columns and no rows (n = 0), not a file
            # whose columns are missing (the caller decides whether n = 0 may be answered)
            types = column_types or {}
            cols = ", ".join(f"CAST(NULL AS {types.get(n, 'VARCHAR')}) AS {_quote(n)}"
                             for n in names)
            return con.sql(f"SELECT {cols} WHERE false")
        return _read_csv(con, p, _csv_arguments(csv, names, text_columns, column_types), csv)
    raise DataError(f"unknown data format {suffix!r} for {p}", hint="use CSV or Parquet")


def _parquet_directory(p: Path) -> str:
    """The glob of a directory that is a Parquet data set, or a :class:`DataError` saying why
    it is not one (no data files, or CSV files among or instead of the Parquet files).

    Hidden and ``_``-prefixed files (``_SUCCESS``, ``.crc``) are bookkeeping and ignored."""
    files = [f for f in p.iterdir() if f.is_file() and not f.name.startswith((".", "_"))]
    parquet = [f for f in files if f.suffix.lower() == ".parquet"]
    text = [f for f in files if f.suffix.lower() in CSV_SUFFIXES]
    if parquet and text:
        raise DataError(
            f"{p} is a directory with both .parquet and CSV files "
            f"({len(parquet)} and {len(text)})",
            hint="a directory is read as one Parquet data set: keep only its .parquet files, "
            "or pass one file",
        )
    if text:
        raise DataError(
            f"{p} is a directory of CSV files ({len(text)})",
            hint="pass one CSV file; a directory is read as a Parquet data set",
        )
    if not parquet:
        raise DataError(
            f"{p} is a directory with no .parquet/.csv files",
            hint="pass a CSV or Parquet file, or a directory of .parquet files",
        )
    return str(p / "*.parquet")


def _read_parquet(
    con: duckdb.DuckDBPyConnection, pattern: str, p: Path
) -> duckdb.DuckDBPyRelation:
    try:
        return con.read_parquet(pattern)
    except duckdb.Error as e:
        raise DataError(
            f"cannot read {p} as Parquet: {str(e).splitlines()[0]}",
            hint="check that the file is Parquet (a directory: that all its .parquet files are)",
        ) from None


def _csv_arguments(
    csv: CsvOptions,
    names: Sequence[str] | None,
    text_columns: Sequence[str],
    column_types: Mapping[str, str] | None,
) -> dict[str, Any]:
    """Step 2 of :func:`relation` for a CSV: the keyword arguments of DuckDB's ``read_csv``.

    Only what the caller decided is passed (the sniffer decides the rest). Text columns are read
    as written; a headerless file with known column types is fully described, so DuckDB need
    not sniff it at all.
    """
    kwargs: dict[str, Any] = {}
    if csv.header is not None:
        kwargs["header"] = csv.header
    if csv.delimiter is not None:
        kwargs["sep"] = csv.delimiter
    if csv.na_values:
        kwargs["na_values"] = list(csv.na_values)
    if csv.skip_rows:
        kwargs["skiprows"] = csv.skip_rows
    if csv.header is False and names is not None:
        kwargs["names"] = list(names)
    if text_columns:
        # values of categorical/boolean attributes are matched as written: no sniffing
        # of 'True', '1.10' or '10:30' into booleans, numbers or times
        kwargs["dtype"] = {name: "VARCHAR" for name in text_columns}
    if csv.header is False and column_types is not None:
        # every column named and typed: DuckDB skips sniffing them
        kwargs.pop("names", None)
        kwargs.pop("dtype", None)
        kwargs["columns"] = dict(column_types)
        if csv.delimiter is not None:
            # Names, types, header and delimiter all given: the sniffer has nothing
            # left to decide but still samples the file (it cost half the parse of
            # UCI Adult). Quotes take DuckDB's default '"'; a stray line is then a
            # parse error or an invalid value, both reported, never dropped silently.
            kwargs["auto_detect"] = False
    return kwargs


def _read_csv(
    con: duckdb.DuckDBPyConnection, p: Path, kwargs: dict[str, Any], csv: CsvOptions
) -> duckdb.DuckDBPyRelation:
    """Step 3 of :func:`relation` for a CSV: read it, or say why it cannot be read.

    When some schema columns are absent from the file, forcing their type fails to bind: the
    file is then read as sniffed, and the caller names the missing columns. Any other DuckDB
    error becomes a :class:`DataError` pointing at the CSV options.
    """
    try:
        try:
            return con.read_csv(str(p), **kwargs)
        except duckdb.BinderException:
            if "dtype" not in kwargs:
                raise
            # some schema columns are absent: read as sniffed, the caller names them
            del kwargs["dtype"]
            return con.read_csv(str(p), **kwargs)
    except duckdb.Error as e:
        located = _csv_line_error(e, p, csv)
        if located is not None:
            raise located from None
        raise DataError(
            f"cannot read {p} as CSV: {str(e).splitlines()[0]}",
            hint="check --delimiter/--no-header/--skip-rows",
        ) from None


_CSV_HINT = "fix that line (quote fields that contain the delimiter), or check --delimiter"


def _csv_line_error(e: duckdb.Error, source: Any, csv: CsvOptions) -> DataError | None:
    """DuckDB's "CSV Error on Line: N" as a :class:`DataError` at ``file:N``, else ``None``."""
    text = str(e)
    line = re.search(r"CSV Error on Line: (\d+)", text)
    if line is None:
        return None
    where = f"{source}:{line.group(1)}"
    counts = re.search(r"Expected Number of Columns: (\d+) Found: (\d+)", text)
    if counts:
        found, expected = int(counts.group(2)), int(counts.group(1))
        return DataError(f"{where}: {_fields(found)}, expected {expected}",
                         hint=_one_field_hint(found, expected, source, csv))
    if "unterminated quote" in text:
        return DataError(f"{where}: a value with an unterminated quote", hint=_CSV_HINT)
    detail = next((ln.strip() for ln in text.splitlines()[2:] if ln.strip()), "malformed row")
    return DataError(f"{where}: cannot parse the row: {detail}", hint=_CSV_HINT)


def _one_field_hint(found: int, expected: int, source: Any, csv: CsvOptions) -> str:
    """The hint for a row of ``found`` fields where ``expected`` were due. A row that did not
    split at all, under a ``--delimiter`` the file's first line does not even contain, points at
    the delimiter (with the one that line suggests); any other short or long row (a sniffed
    delimiter, or one the file does use) at the line itself."""
    line = first_line(source, csv)
    if (found == 1 and expected > 1 and csv.delimiter and line is not None
            and csv.delimiter not in line and guess_delimiter(line, csv.delimiter)):
        return delimiter_hint("the row did not split into fields", source, csv)
    return _CSV_HINT


def _fields(n: int) -> str:
    return f"a row of {n} field" + ("" if n == 1 else "s")


def _ragged_csv(source: Any, domain: Domain, csv: CsvOptions) -> DataError | None:
    """The first row of a CSV whose number of fields differs from the header's (or, without a
    header, the schema's), or whose quote is never closed; ``None`` if every row is regular.

    Run only when reading already failed: DuckDB's sniffer reads a ragged file as one column,
    and a stray quote as part of a value, so the error it leads to names the wrong thing."""
    if not isinstance(source, (str, Path)):
        return None
    p = Path(source)
    if not p.is_file() or p.suffix.lower() not in CSV_SUFFIXES | {""}:
        return None
    delimiter = csv.delimiter
    opener: Any = gzip.open if p.suffix.lower() == ".gz" else open
    try:
        with opener(p, "rt", newline="", encoding="utf-8", errors="replace") as f:
            lines = (line for n, line in enumerate(f) if n >= csv.skip_rows)
            if delimiter is None:
                first = next(lines, "")
                delimiter = max(",;\t|", key=first.count)
                lines = itertools.chain([first], lines)
            if delimiter.strip() == "" or delimiter[1:].strip():
                return None  # a whitespace or multi-character delimiter: not for the csv module
            reader = _csv.reader(lines, delimiter=delimiter[0], skipinitialspace=len(delimiter) > 1,
                                 strict=True)
            expected = len(domain) if csv.header is False else None
            start = 1
            try:
                for row in reader:
                    if row:
                        if expected is None:
                            expected = len(row)
                        elif len(row) != expected:
                            return DataError(
                                f"{p}:{start + csv.skip_rows}: {_fields(len(row))}, "
                                f"expected {expected}",
                                hint=_one_field_hint(len(row), expected, p, csv),
                            )
                    start = reader.line_num + 1
            except _csv.Error:
                return DataError(
                    f"{p}:{start + csv.skip_rows}: a value with an unterminated quote",
                    hint=_CSV_HINT,
                )
    except OSError:
        return None
    return None


def _memory_relation(con: duckdb.DuckDBPyConnection, source: Any) -> duckdb.DuckDBPyRelation:
    """Step 1 of :func:`relation` for data in memory: a relation, an Arrow table, or a pandas or
    polars frame (recognised by module, so neither library is imported here)."""
    if isinstance(source, duckdb.DuckDBPyRelation):
        return con.from_arrow(source.arrow())
    if isinstance(source, pa.Table):
        return con.from_arrow(source)
    module = type(source).__module__.split(".")[0]
    if module == "polars":
        return con.from_arrow(source.to_arrow())
    if module == "pandas":
        if len(source.columns) == 0:
            raise DataError("the DataFrame has no columns",
                            hint="pass a table with one column per attribute of the schema")
        return con.from_df(source)
    raise DataError(
        f"cannot read data of type {type(source).__name__}",
        hint="pass a CSV/Parquet path, a pandas/polars DataFrame, a pyarrow Table "
        "or a DuckDB relation",
    )


def _rescanning_is_costly(source: Any) -> bool:
    """Text files and in-memory frames are cheaper to copy once than to scan 2m + 1 times."""
    if isinstance(source, (str, Path)):
        p = Path(source)
        return not (p.is_dir() or p.suffix.lower() in {".parquet", *DUCKDB_SUFFIXES})
    return True


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _stages(report: ScanProgress | None) -> Callable[[float, float], ScanProgress | None]:
    """A scan that is the part ``[start, start + width)`` of the whole: its own fraction f
    reported as ``start + width · f`` (or no reporting at all)."""
    def stage(start: float, width: float) -> ScanProgress | None:
        if report is None:
            return None
        return lambda f: report(start + width * f)

    return stage



def accepts(source: Any) -> bool:
    """DuckDB reads every source the engines before it in
    :data:`tessera.data.source.ENGINES` do not: files, DuckDB tables, in-memory frames."""
    return True


def encode_duckdb(
    source: Any,
    domain: Domain,
    *,
    on_invalid: OnInvalid = "error",
    csv: CsvOptions = CsvOptions(),
    table: str | None = None,
    con: duckdb.DuckDBPyConnection | None = None,
    scan_progress: ScanProgress | None = None,
    unit: PrivacyUnit = ONE_ROW,
    extra_columns: ExtraColumns = "error",
    measures: Sequence[str] = (),
) -> CodedTable:
    """Validate ``source`` (a file, a DuckDB table, an in-memory frame) against ``domain`` and
    materialise its codes in DuckDB: the engine :func:`tessera.data.source.encode` picks for
    every source that is not Spark's.

    Raises :class:`DataError` for missing columns, for columns the schema does not declare
    unless ``extra_columns='ignore'`` (then they are named in a warning and never read), and for
    values outside the domain unless ``on_invalid='drop'`` (then :attr:`EncodedTable.dropped`
    and ``.invalid`` report them).

    The steps: :func:`_open_source` (``src``: the data, columns checked), :func:`_encode_column`
    per attribute (distinct values and their codes), :func:`invalid_values_error` if the
    policy is ``error``, then :func:`code_rows` (or :func:`code_rows_by_join`) for ``coded``.
    ``scan_progress`` hears how far the longest scans are (:func:`watched`).

    With a person as the ``unit`` (:class:`~tessera.privacy.PrivacyUnit`), ``coded`` keeps at
    most ``unit.max_rows`` rows of each person (:func:`bound_rows`); how many were dropped is
    private and is kept nowhere (``dropped`` counts only values outside the domain).

    ``measures``: data columns outside the schema that are summed (docs/aggregates.md
    "Measures"), carried beside the codes as DOUBLE columns ``m<j>``; every value must be a
    finite number (:func:`check_measure_values`).
    """
    if on_invalid not in ("error", "drop"):
        raise DataError(f"unknown on_invalid policy {on_invalid!r}", hint="'error' or 'drop'")
    measures = tuple(measures)
    con = con or connect()
    # the scans, as parts of the whole (as measured on Parquet): parsing a CSV a quarter, the
    # GROUP BYs of the columns a quarter together, coding the rows half
    m = max(len(domain), 1)
    stage = _stages(scan_progress)
    try:
        with watched(con, stage(0.0, 0.25)):
            _open_source(con, source, domain, csv=csv, table=table, id_column=unit.id_column,
                         extra_columns=extra_columns, measures=measures)
        check_measure_values(con, measures, source)
        columns = []
        for j, attr in enumerate(domain):
            with watched(con, stage(0.25 + 0.25 * j / m, 0.25 / m)):
                columns.append(_encode_column(con, attr))
        invalid = [c.invalid for c in columns if c.invalid is not None]
        if invalid and on_invalid == "error":
            raise invalid_values_error(invalid, domain, source, csv)
    except DataError as e:
        # a ragged row or a stray quote shows up as a missing column or an odd value: say so
        raise _ragged_csv(source, domain, csv) or e from None
    value_sets = [c.values for c in columns]
    code_of_value = [c.code for c in columns]
    pid = unit.id_column
    try:
        with watched(con, stage(0.5, 0.5)):
            n_rows = code_rows(con, domain, value_sets, code_of_value, id_column=pid,
                               measures=measures)
    except UnmatchedValue:
        n_rows = code_rows_by_join(con, domain, value_sets, code_of_value, id_column=pid,
                                   measures=measures)
    n_total = columns[-1].rows if columns else 0
    dropped = n_total - n_rows  # values outside the domain only: bounding's count is private
    if pid is not None:
        n_rows = bound_rows(con, domain, unit.max_rows, keep_ids=unit.counts_people,
                            n_measures=len(measures))
    present = [c.present for c in columns]
    return EncodedTable(con, domain, n_rows, dropped, invalid, present,
                        person_ids=unit.counts_people, measures=measures)


def check_measure_values(con: duckdb.DuckDBPyConnection, measures: Sequence[str],
                         source: Any) -> None:
    """Every value of every measure column of ``src`` is a finite number: a NULL, NaN,
    infinity or text is refused, naming the column, the values and their rows
    (:func:`~tessera.data.validation.bad_measure_error`)."""
    for m in measures:
        col = _quote(m)
        num = f"TRY_CAST({col} AS DOUBLE)"
        nulls = int(con.sql(f"SELECT count(*) FROM src WHERE {col} IS NULL").fetchall()[0][0])
        bad = con.sql(f"SELECT CAST({col} AS VARCHAR) AS v, count(*) AS n FROM src WHERE "
                      f"{col} IS NOT NULL AND ({num} IS NULL OR NOT isfinite({num})) "
                      "GROUP BY ALL ORDER BY n DESC, v LIMIT 5").fetchall()
        if nulls or bad:
            raise bad_measure_error(m, nulls, [(v, int(n)) for v, n in bad], source)


def _open_source(
    con: duckdb.DuckDBPyConnection,
    source: Any,
    domain: Domain,
    *,
    csv: CsvOptions,
    table: str | None,
    id_column: str | None = None,
    extra_columns: ExtraColumns = "error",
    measures: tuple[str, ...] = (),
) -> None:
    """Step 1 of :func:`encode`: make ``src`` in ``con`` hold the data, its columns checked
    (:func:`check_columns`) and only the schema's columns kept (an ignored column is never
    parsed into the copy, nor can it fail to parse).

    Categorical and boolean columns are read as text, the others typed by attribute kind. A
    text file or an in-memory frame is parsed once into a temporary table (the validation scans
    and the row coding read it 2m + 1 times); should a value not parse as its attribute's type,
    the source is read again as written, so that :func:`_encode_column` names the offending
    values. Parquet and DuckDB sources stay views.

    A privacy ``id_column`` (outside the schema: read as text from a CSV, as Spark reads it)
    must be a column of integers or text with no empty value (:func:`_check_ids`).
    """
    text = [a.name for a in domain if a.kind in ("categorical", "boolean")]
    if id_column is not None and id_column not in domain.names:
        text.append(id_column)
    typed = {a.name: _SQL_TYPES.get(a.kind, "VARCHAR") for a in domain}
    rel = relation(
        con, source, names=domain.names, text_columns=text, column_types=typed, csv=csv, table=table
    )
    if id_column is not None:  # first: a misspelt id is not "an undeclared column"
        check_privacy_id(list(rel.columns), id_column, domain, source, csv)
    check_measure_columns(list(rel.columns), measures, source)
    # the id and the measures are read, never extras
    others = [c for c in rel.columns if c != id_column and c not in measures]
    check_columns(others, domain, source, csv, extra_columns)
    rel = _schema_columns(rel, domain, id_column, measures)
    if _rescanning_is_costly(source):
        # parse once: the validation scans and the encoding join all read the source again
        try:
            rel.create("src")
        except duckdb.Error as e:
            located = _csv_line_error(e, source, csv)
            if located is not None:
                raise located from None
            # a value does not parse as its attribute's type: read it as written instead, so
            # the validation below names the offending values
            rel = _schema_columns(relation(con, source, names=domain.names, text_columns=text,
                                           csv=csv, table=table), domain, id_column, measures)
            try:
                rel.create("src")
            except duckdb.Error as again:
                raise _unreadable(source, again) from None
    else:
        con.register("src", rel)
    if id_column is not None:
        _check_ids(con, id_column)


def _check_ids(con: duckdb.DuckDBPyConnection, id_column: str) -> None:
    """The privacy id is an integer or text column with a value on every row."""
    kind = str(con.sql(f"SELECT {_quote(id_column)} FROM src LIMIT 0").types[0])
    if kind not in _ID_TYPES:
        raise id_type_error(id_column, kind)
    empty = int(con.sql(f"SELECT count(*) FROM src WHERE {_quote(id_column)} IS NULL"
                        ).fetchall()[0][0])
    if empty:
        raise missing_ids_error(id_column, empty)


def bound_rows(con: duckdb.DuckDBPyConnection, domain: Domain, max_rows: int,
               keep_ids: bool = False, n_measures: int = 0) -> int:
    """Keep at most ``max_rows`` rows of each person in ``coded`` (by its :data:`PID` column,
    then dropped unless ``keep_ids``: counting people reads it) and return the rows kept. The
    rule
    (:data:`tessera.data.validation.BOUNDING_RULE`): a person's rows ordered by
    ``md5(id | c0 | … | c(m-1))``, ties by the codes (rows that tie are identical), the first K
    kept — a function of that person's rows alone, computed the same way by the Spark engine
    (:func:`tessera.data.spark_source.bound_frame`), so both keep the same rows. Measure
    columns ``m<j>`` (``n_measures``) are kept too, and order the rows whose codes tie, by
    value (numbers compare alike on every engine; their text would not)."""
    codes = [f"c{i}" for i in range(len(domain))]
    key = ", ".join([PID, *(f"CAST({c} AS VARCHAR)" for c in codes)])
    values = [f"m{j}" for j in range(n_measures)]
    order = ", ".join([f"md5(concat_ws('|', {key}))", *codes, *values])
    keep = ", ".join(codes + values) or "one"
    if keep_ids:
        keep = f"{keep}, {PID}"
    con.execute(
        f"CREATE TABLE bounded AS SELECT {keep} FROM (SELECT *, row_number() OVER "
        f"(PARTITION BY {PID} ORDER BY {order}) AS __rank FROM coded) WHERE __rank <= "
        f"{int(max_rows)}")
    con.execute("DROP TABLE coded")
    con.execute("ALTER TABLE bounded RENAME TO coded")
    return int(con.execute("SELECT count(*) FROM coded").fetchall()[0][0])


def _schema_columns(rel: duckdb.DuckDBPyRelation, domain: Domain,
                    id_column: str | None = None,
                    measures: tuple[str, ...] = ()) -> duckdb.DuckDBPyRelation:
    """``rel`` with only the schema's columns (those :func:`check_columns` let through), the
    privacy ``id_column`` and the ``measures``, in the order of the data; ``rel`` itself when
    it has no other columns."""
    declared = (set(domain.names) | ({id_column} if id_column is not None else set())
                | set(measures))
    if all(c in declared for c in rel.columns) or not domain.names:
        return rel
    return rel.project(", ".join(_quote(c) for c in rel.columns if c in declared))


def _unreadable(source: Any, error: duckdb.Error) -> DataError:
    """Data DuckDB cannot give one type per column, even read as text: for a pandas frame,
    name the object columns that mix value types (a bool beside a number, say)."""
    mixed: list[str] = []
    if type(source).__module__.split(".")[0] == "pandas":
        columns = [source.iloc[:, i] for i in range(source.shape[1])]  # (names may repeat)
        mixed = [str(c.name) for c in columns
                 if c.dtype == object and len({type(v) for v in c.dropna()}) > 1]
    where = f" (mixed value types in column(s) {mixed})" if mixed else ""
    return DataError(f"cannot read the data{where}: {str(error).splitlines()[0]}",
                     hint="give each column one type (e.g. df[col].astype(str))")


def _encode_column(con: duckdb.DuckDBPyConnection, attr: Attribute) -> ColumnCodes:
    """Step 3 of :func:`encode`, per attribute: one ``GROUP BY`` for its distinct values,
    encoded by :func:`column_codes`."""
    dist = con.sql(
        f"SELECT {_quote(attr.name)} AS v, count(*) AS n FROM src GROUP BY ALL"
    ).to_arrow_table()
    return column_codes(attr, dist.column("v"), dist.column("n").to_numpy())



class UnmatchedValue(Exception):
    """Arrow's matching of a value disagreed with DuckDB's grouping (see :func:`code_rows`)."""


def code_rows(
    con: duckdb.DuckDBPyConnection,
    domain: Domain,
    value_sets: list[pa.Array],
    code_of_value: list[np.ndarray],
    *,
    id_column: str | None = None,
    measures: tuple[str, ...] = (),
) -> int:
    """Materialise ``coded`` from ``src``: each value replaced by its code, rows holding a -1
    dropped. Returns the number of rows kept. ``id_column``: the privacy id, carried along as
    text in column :data:`PID` (for :func:`bound_rows`); ``measures``: carried as DOUBLE
    columns ``m<j>``.

    The rows stream through Arrow in batches and each column is mapped with ``index_in``
    against its distinct values (the ``GROUP BY`` above): about a third of the cost of
    15 ``LEFT JOIN``s in DuckDB. Each batch of codes is appended to ``coded`` at once (through
    a second cursor, the scan streaming on), in the narrowest integer type that holds the
    attribute's codes (:func:`code_type`), so memory is bounded by one batch plus what DuckDB
    keeps under its limit — never the whole table in numpy. Every row value must find its
    distinct value; if Arrow's equality ever disagrees with DuckDB's (say -0.0 vs 0.0 in a
    DOUBLE column), this raises :class:`UnmatchedValue` and the caller uses the join instead —
    never a silently dropped row.
    """
    names = [_quote(name) for name in domain.names]
    pid = id_column is not None
    if id_column is not None:
        names.append(f"CAST({_quote(id_column)} AS VARCHAR)")
    names.extend(f"CAST({_quote(m)} AS DOUBLE)" for m in measures)
    cols = ", ".join(names)
    types = [code_type(attr.size) for attr in domain]
    dtypes = [np.dtype(_NUMPY_CODE[t]) for t in types]
    con.execute("DROP TABLE IF EXISTS coded")
    columns = [f"c{i} {t}" for i, t in enumerate(types)] or ["one BOOLEAN"]
    if pid:
        columns.append(f"{PID} VARCHAR")
    columns.extend(f"m{j} DOUBLE" for j in range(len(measures)))
    con.execute(f"CREATE TABLE coded ({', '.join(columns)})")
    writer = con.cursor()  # appends while ``con`` streams the scan
    n_rows = 0
    reader = con.sql(f"SELECT {cols} FROM src").arrow()
    try:
        for batch in reader:
            codes, keep = [], np.ones(batch.num_rows, dtype=bool)
            for j, (values, code) in enumerate(zip(value_sets, code_of_value)):
                column = batch.column(j)
                if pa.types.is_dictionary(column.type):
                    column = column.cast(column.type.value_type)
                try:
                    position = pc.index_in(column, value_set=values)
                except (pa.ArrowNotImplementedError, pa.ArrowTypeError, pa.ArrowInvalid):
                    raise UnmatchedValue from None
                if position.null_count:
                    raise UnmatchedValue
                c = code[position.to_numpy()]
                keep &= c >= 0
                codes.append(c)
            n_rows += int(keep.sum())
            if not domain.names and not pid and not measures:
                continue
            arrays = {f"c{i}": pa.array(c[keep].astype(dt, copy=False))
                      for i, (c, dt) in enumerate(zip(codes, dtypes))}
            if not domain.names:
                arrays["one"] = pa.nulls(int(keep.sum()), pa.bool_())
            if pid:
                arrays[PID] = batch.column(len(value_sets)).filter(pa.array(keep))
            for j in range(len(measures)):
                arrays[f"m{j}"] = batch.column(len(value_sets) + int(pid) + j).filter(
                    pa.array(keep))
            chunk = pa.table(arrays)
            writer.register("coded_batch", chunk)
            writer.execute("INSERT INTO coded SELECT * FROM coded_batch")
            writer.unregister("coded_batch")
    finally:
        reader.close()
        writer.close()
    return n_rows


#: numpy dtypes of the DuckDB integer types :func:`code_type` picks.
_NUMPY_CODE = {"TINYINT": "int8", "SMALLINT": "int16", "INTEGER": "int32"}


def code_type(size: int) -> str:
    """The narrowest signed DuckDB integer type holding codes ``0..size-1`` (the missing code
    included in ``size``): one byte per value for most attributes, so the coded copy of a
    table is a fraction of its raw size."""
    if size <= 127:
        return "TINYINT"
    if size <= 32767:
        return "SMALLINT"
    return "INTEGER"


def code_rows_by_join(
    con: duckdb.DuckDBPyConnection,
    domain: Domain,
    value_sets: list[pa.Array],
    code_of_value: list[np.ndarray],
    *,
    id_column: str | None = None,
    measures: tuple[str, ...] = (),
) -> int:
    """:func:`code_rows` inside DuckDB: one ``LEFT JOIN`` per column against its mapping
    table, so values are matched with DuckDB's own equality. Returns the number of rows kept
    (``id_column``: with the privacy id as text in column :data:`PID`)."""
    selects, joins = [], []
    for i, (attr, values, code) in enumerate(zip(domain, value_sets, code_of_value)):
        col = _quote(attr.name)
        mapping = pa.table(
            {"v": values, "code": pa.array(np.where(code >= 0, code, None), type=pa.int32())}
        )
        con.register(f"map{i}", mapping)
        null_code = "NULL" if attr.missing_code is None else str(attr.missing_code)
        selects.append(f"CASE WHEN src.{col} IS NULL THEN {null_code} ELSE m{i}.code END AS c{i}")
        joins.append(f"LEFT JOIN map{i} AS m{i} ON src.{col} = m{i}.v")
    if id_column is not None:
        selects.append(f"CAST(src.{_quote(id_column)} AS VARCHAR) AS {PID}")
    selects.extend(f"CAST(src.{_quote(m)} AS DOUBLE) AS m{j}" for j, m in enumerate(measures))
    where = " AND ".join(f"c{i} IS NOT NULL" for i in range(len(domain))) or "TRUE"
    con.execute("DROP TABLE IF EXISTS coded")
    con.execute(
        f"CREATE TABLE coded AS SELECT * FROM "
        f"(SELECT {', '.join(selects)} FROM src {' '.join(joins)}) WHERE {where}"
    )
    return int(con.execute("SELECT count(*) FROM coded").fetchall()[0][0])
