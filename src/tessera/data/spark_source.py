"""The Spark engine of the data layer: :class:`~tessera.data.table.CodedTable`, aggregated by
Spark.

Custodians whose tables live in Spark count them there: :func:`tessera.data.source.encode` hands a
PySpark DataFrame, or a :class:`SparkSource` (a Parquet/CSV path, a table of the session's
catalog or metastore, or a DataFrame, with the master URL), to :func:`encode_spark`, and every
caller of the data layer — :func:`tessera.count`, :func:`tessera.answer`, synthesis and
evaluation — works unchanged on the :class:`SparkEncodedTable` it returns.

What runs where (docs/spark.md):

1. **Validation** (docs/theory.md §1): ONE Spark job — a ``GROUP BY GROUPING SETS`` with one set
   per attribute — returns every column's distinct values and their row counts. Each distinct
   value is encoded on the driver by :func:`tessera.data.validation.column_codes`, the very function
   the DuckDB engine uses, so the values outside the domain, the error naming them
   (:func:`tessera.data.validation.invalid_values_error`), the missing-column error
   (:func:`tessera.data.validation.check_columns`) and the ``drop`` policy are the same on both
   engines.
2. **Marginals**: every aggregation :mod:`tessera.data.counts` and :mod:`tessera.data.family_counts`
   ask for is one Spark ``GROUP BY`` (:meth:`SparkEncodedTable.group_by`). On the raw values its
   cells are mapped to codes on the driver (by :meth:`Attribute.encode` again); when the value
   classes of a workload are coarser (:meth:`SparkEncodedTable.coarsen`), each value is mapped to
   its class inside Spark by a broadcast join against a table of distinct values, and the ``GROUP
   BY`` runs on the classes.
3. **Queries** are evaluated on the collected aggregates by the same numpy code as on DuckDB.

Only aggregates leave the cluster — distinct values with counts, and marginals — never rows:
:meth:`SparkEncodedTable.codes` and :meth:`SparkEncodedTable.columns` refuse. The privacy
guarantee is a property of the released function of the exact answers, which are the same
integers however the rows are partitioned (sums are exact in 64-bit integers), so partitioning
and the number of executors cannot change it.

PySpark is optional (``pip install "tessera-dp[spark]"``, Java 17+): it is imported only here,
and only when a Spark source is used; a missing PySpark or Java is a :class:`DataError` that
says what to install.

Sessions are started, and a run's own ones stopped, by :mod:`tessera.data.spark_session`.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from tessera.data.spark_session import spark_session
from tessera.data.table import (
    CSV_SUFFIXES,
    DUCKDB_SUFFIXES,
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
    id_type_error,
    invalid_values_error,
    measure_units_sql,
    missing_ids_error,
)
from tessera.errors import DataError
from tessera.privacy import ONE_ROW, PrivacyUnit
from tessera.schema.domain import Domain

#: The master URL the CLI uses unless told otherwise: every core of the local machine.
DEFAULT_MASTER = "local[*]"
#: A value a headerless CSV column of an ``integer`` attribute must match to be read as BIGINT
#: (else as DOUBLE if it matches :data:`_FLOAT`, else as text, like DuckDB's sniffer).
_INT = r"^[+-]?[0-9]+$"
_FLOAT = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")  # 2+ letters: C:\ is a drive
#: At most this many GROUP BYs share one Spark job (:meth:`SparkEncodedTable.group_by_many`)…
MAX_SETS_PER_JOB = 64
#: … and at most about this many cells come back from one job.
MAX_CELLS_PER_JOB = 1 << 22
#: Spark types a privacy id may have (:data:`tessera.data.validation.ID_TYPES`).
_ID_TYPES = {"LongType", "IntegerType", "ShortType", "ByteType", "StringType"}


@dataclass(frozen=True)
class SparkSource:
    """Data for the Spark engine, accepted wherever Tessera accepts data.

    ``data``: a path Spark can read (a Parquet file or directory, a CSV; any URI Spark knows,
    ``hdfs://``, ``s3a://``, …) or a PySpark DataFrame; or ``None`` with ``table``, a table of
    the session's catalog (a Hive metastore under ``spark-submit``). ``master``: the master URL
    of the session to start (``local[2]``, ``spark://host:7077``, ``yarn``); ``None`` uses the
    active session, else what ``spark-submit`` or the Spark defaults say (``local[*]``).
    ``config``: extra Spark settings for a session started here.
    """

    data: Any = None
    table: str | None = None
    master: str | None = None
    config: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        what = f"table {self.table}" if self.data is None else (
            "a Spark DataFrame" if not isinstance(self.data, (str, Path)) else str(self.data))
        return f"{what} on Spark ({self.master or 'active session'})"


def accepts(source: Any) -> bool:
    """Whether ``source`` is for the Spark engine: a :class:`SparkSource` or a PySpark
    DataFrame (recognised by its module, so PySpark is not imported to ask)."""
    kind = type(source)
    return isinstance(source, SparkSource) or (
        kind.__name__ == "DataFrame" and kind.__module__.startswith("pyspark.sql"))


@contextmanager
def spark_errors(what: str) -> Iterator[None]:
    """Spark's exceptions (analysis errors, failed jobs: a malformed CSV under FAILFAST, an
    unreadable Parquet file) as a one-line :class:`DataError`."""
    try:
        yield
    except DataError:
        raise
    except Exception as e:
        module = type(e).__module__
        if not module.startswith(("pyspark", "py4j")):
            raise
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        first = next((ln for ln in lines if not ln.startswith(("JVM stacktrace", "at "))),
                     type(e).__name__)
        raise DataError(f"Spark cannot read {what}: {first[:300]}",
                        hint="check the path, format and CSV options (--delimiter, --no-header)"
                        ) from None


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def on_driver_disk(path: str, master: str) -> bool:
    """Whether ``path`` names a file on the driver's own disk, to be checked there: a path
    without a scheme under a local master (``local``, ``local[n]``, ``local-cluster[…]``, whose
    executors share that disk). A URI (``hdfs://``, ``s3a://``, ``file:``), and a bare path under
    a cluster master (``yarn``, ``spark://``, ``k8s://``), is Spark's to resolve — a bare one
    against ``fs.defaultFS``, HDFS on a YARN edge node — and a missing one is Spark's error."""
    return _SCHEME.match(path) is None and master.startswith("local")


def _master(spark: Any) -> str:
    """The session's master URL; ``""`` when it has none to tell (Spark Connect)."""
    try:
        return str(spark.sparkContext.master)
    except Exception:  # Spark Connect sessions have no SparkContext
        return ""


def _frame(source: Any, domain: Domain, csv: CsvOptions, table: str | None,
           id_column: str | None = None,
           extra_columns: ExtraColumns = "error",
           measures: tuple[str, ...] = ()) -> tuple[Any, Any]:
    """The Spark DataFrame of ``source`` with the schema's columns checked (any other column
    refused or ignored, ``extra_columns``; the privacy ``id_column`` kept as a CSV holds it:
    text), and the source for error messages (a path, or the DataFrame)."""
    if isinstance(source, SparkSource):
        data, table = source.data, source.table or table
        session = (spark_session(source.master, source.config)
                   if data is None or isinstance(data, (str, Path)) else None)
    else:
        data, session = source, None
    if data is None:
        if not table:
            raise DataError("a SparkSource needs data (a path or a DataFrame) or a table",
                            hint="SparkSource('data.parquet') or SparkSource(table='db.t')")
        with spark_errors(f"table {table!r}"):
            df = session.table(table)
        _check_columns(list(df.columns), domain, df, CsvOptions(), id_column, extra_columns,
                       measures)
        return df, df
    if isinstance(data, (str, Path)):
        df = _read_path(session, str(data), domain, csv, id_column, extra_columns, measures)
        return df, data
    if type(data).__name__ != "DataFrame" or not type(data).__module__.startswith("pyspark"):
        raise DataError(f"cannot read data of type {type(data).__name__} with Spark",
                        hint="pass a path, a table name or a PySpark DataFrame")
    _check_columns(list(data.columns), domain, data, CsvOptions(), id_column, extra_columns,
                   measures)
    return data, data


def _check_columns(columns: list[str], domain: Domain, source: Any, csv: CsvOptions,
                   id_column: str | None, extra_columns: ExtraColumns = "error",
                   measures: tuple[str, ...] = ()) -> None:
    """The schema's columns (and the privacy id and the measures, which are read but never
    extra columns)."""
    if id_column is not None:  # first: a misspelt id is not "an undeclared column"
        check_privacy_id(columns, id_column, domain, source, csv)
    check_measure_columns(columns, measures, source)
    check_columns([c for c in columns if c != id_column and c not in measures], domain, source,
                  csv, extra_columns)


def _read_path(spark: Any, path: str, domain: Domain, csv: CsvOptions,
               id_column: str | None = None, extra_columns: ExtraColumns = "error",
               measures: tuple[str, ...] = ()) -> Any:
    """A Parquet file or directory, or a CSV, read by Spark with the schema's columns checked.

    A CSV is read as text and typed like DuckDB types it (:func:`_typed_csv`), so both engines
    see the same values and name the same invalid ones."""
    p = Path(path)
    local = on_driver_disk(path, _master(spark))
    if local and not p.exists():
        raise DataError(f"no such file: {p}", hint="check the path")
    suffix = p.suffix.lower()
    if suffix in DUCKDB_SUFFIXES:
        raise DataError(f"{p} is a DuckDB database, which Spark cannot read",
                        hint="use --engine duckdb, or export the table to Parquet")
    if (local and p.is_dir()) or suffix == ".parquet" or (not local and suffix == ""):
        with spark_errors(path):
            df = spark.read.parquet(path)
        _check_columns(list(df.columns), domain, path, csv, id_column, extra_columns, measures)
        return df
    if suffix not in CSV_SUFFIXES and suffix != "":
        raise DataError(f"unknown data format {suffix!r} for {p}", hint="use CSV or Parquet")
    if csv.skip_rows:
        raise DataError("--skip-rows is not supported by the Spark engine",
                        hint="remove the lines from the file, or use --engine duckdb")
    header = csv.header is not False
    with spark_errors(path):
        df = spark.read.csv(path, header=header, sep=csv.delimiter or ",", inferSchema=False,
                            mode="FAILFAST", enforceSchema=False)
    columns = list(df.columns)
    if not header and len(columns) == len(domain):
        df = df.toDF(*domain.names)
        columns = list(domain.names)
    _check_columns(columns, domain, path, csv, id_column, extra_columns, measures)
    return _typed_csv(df, domain, csv, header, id_column, measures)


def _typed_csv(df: Any, domain: Domain, csv: CsvOptions, header: bool,
               id_column: str | None = None, measures: tuple[str, ...] = ()) -> Any:
    """The text columns of a CSV typed as DuckDB types them: the ``na`` markers become NULL;
    categorical and boolean attributes stay text; an ``integer`` attribute's column whose
    values all look like integers becomes BIGINT, else DOUBLE if they all look like numbers,
    else stays text (so the invalid values are named as written); a ``binned`` one DOUBLE
    without a header (DuckDB is told so), sniffed like an integer column with one. A privacy
    ``id_column`` outside the schema is kept as text (as DuckDB reads it)."""
    from pyspark.sql import functions as F

    cols = {name: F.col(_quote(name)) for name in domain.names}
    if id_column is not None and id_column not in cols:
        cols[id_column] = F.col(_quote(id_column))
    for m in measures:  # text: checked and cast by check_measures
        cols[m] = F.col(_quote(m))
    if csv.na_values:
        cols = {name: F.when(c.isin(list(csv.na_values)), F.lit(None)).otherwise(c)
                for name, c in cols.items()}
    numeric = [a for a in domain if a.kind in ("integer", "binned")]
    if numeric:
        checks = []
        for a in numeric:
            c = cols[a.name]
            for tag, pattern in (("i", _INT), ("f", _FLOAT)):
                checks.append(F.max(F.when(c.isNotNull() & ~c.rlike(pattern), 1).otherwise(0))
                              .alias(f"{tag}{domain.index(a.name)}"))
        with spark_errors("the CSV"):
            row = df.select(*checks).collect()[0]
        for a in numeric:
            i = domain.index(a.name)
            ints, floats = not row[f"i{i}"], not row[f"f{i}"]
            if ints and not (a.kind == "binned" and not header):
                target = "BIGINT"
            elif floats:
                target = "DOUBLE"
            else:
                continue
            cols[a.name] = cols[a.name].cast(target)  # every value matched: exact
    return df.select(*[c.alias(name) for name, c in cols.items()])


_ARROW_TYPES = {"LongType": pa.int64(), "IntegerType": pa.int32(), "ShortType": pa.int16(),
                "ByteType": pa.int8(), "DoubleType": pa.float64(), "FloatType": pa.float32(),
                "StringType": pa.string(), "BooleanType": pa.bool_()}


def _arrow(values: list[Any], spark_type: Any) -> pa.Array:
    """Collected values as an Arrow array of the column's own type (as DuckDB would give it)."""
    return pa.array(values, type=_ARROW_TYPES.get(type(spark_type).__name__))


def _collect(df: Any) -> pa.Table:
    """A small (aggregated) DataFrame on the driver, as Arrow."""
    if hasattr(df, "toArrow"):
        return df.toArrow()
    return pa.Table.from_pandas(df.toPandas(), preserve_index=False)  # PySpark < 4


@dataclass
class SparkEncodedTable:
    """Data validated against a domain, left in Spark: the :class:`~tessera.data.table.CodedTable`
    interface, each aggregation a Spark ``GROUP BY`` whose result alone is collected.

    ``frame`` holds the schema's columns of the rows kept (the raw values: each aggregation
    maps the values of its cells to codes, or to classes); ``values`` the distinct values of
    every attribute with their codes (what validation collected)."""

    local_rows: ClassVar[bool] = False

    frame: Any
    domain: Domain
    n_rows: int
    dropped: int
    invalid: list[InvalidValues] = field(default_factory=list)
    present: list[np.ndarray] = field(default_factory=list)
    values: list[ColumnCodes] = field(default_factory=list)
    classes: dict[str, np.ndarray] = field(default_factory=dict)
    _mappings: dict[str, Any] = field(default_factory=dict, repr=False)
    #: counting people: the kept rows' codes ``c<i>`` and ids ``__pid`` (else None)
    people: Any = None
    #: summing measures: the kept rows' codes ``c<i>`` and measures as DOUBLE ``m<j>``
    measured: Any = None
    measures: tuple[str, ...] = ()

    def measure_sums(self, requests: Sequence[tuple[str, str, int, int, int]],
                     batch: int = 200) -> list[int]:
        """Σ u(x) over the kept rows satisfying each condition, for every request (condition
        over the code columns, measure, lo, hi, e; u: :data:`~tessera.data.validation.
        MEASURE_RULE`, the SQL DuckDB runs), summed as DECIMAL(38, 0) (exact), ``batch``
        requests per Spark job: only the sums are collected."""
        from pyspark.sql import functions as F

        out: list[int] = []
        for lo in range(0, len(requests), batch):
            part = requests[lo:lo + batch]
            aggs = [F.sum(F.when(F.expr(cond), F.expr(
                f"CAST({measure_units_sql(f'm{self.measures.index(m)}', a, b, e)} "
                "AS DECIMAL(38, 0))"))).alias(f"s{i}")
                for i, (cond, m, a, b, e) in enumerate(part)]
            with spark_errors("the data"):
                row = self.measured.agg(*aggs).collect()[0]
            out.extend(0 if row[f"s{i}"] is None else int(row[f"s{i}"])
                       for i in range(len(part)))
        return out

    def person_sums(self, requests: Sequence[tuple[str, str, int, int]],
                    batch: int = 200) -> list[int]:
        """Counting people: Σ over persons of clamp(T, lo, hi), T the person's total of the
        value over their kept rows satisfying the condition (persons without such a row add
        nothing), for every request (condition and value, SQL over ``c<i>``/``m<j>``; lo, hi),
        as DuckDB computes it (:meth:`tessera.data.duckdb_source.EncodedTable.person_sums`):
        totals per ``__pid`` in DECIMAL(38, 0), then clamped and added in Spark; only the sums
        are collected."""
        from pyspark.sql import functions as F

        if self.people is None:
            raise DataError("internal error: the table was encoded without its privacy ids",
                            hint="encode with a PrivacyUnit(..., count='people')")
        out: list[int] = []
        for start in range(0, len(requests), batch):
            part = requests[start:start + batch]
            totals = [F.sum(F.when(F.expr(cond), F.expr(f"CAST({value} AS DECIMAL(38, 0))")))
                      .alias(f"t{i}") for i, (cond, value, _, _) in enumerate(part)]
            clamped = [F.sum(F.when(F.col(f"t{i}").isNotNull(), F.least(F.greatest(
                F.col(f"t{i}"), F.lit(int(lo))), F.lit(int(hi))))).alias(f"s{i}")
                for i, (_, _, lo, hi) in enumerate(part)]
            with spark_errors("the data"):
                row = self.people.groupBy("__pid").agg(*totals).agg(*clamped).collect()[0]
            out.extend(0 if row[f"s{i}"] is None else int(row[f"s{i}"])
                       for i in range(len(part)))
        return out

    @property
    def person_ids(self) -> bool:
        """Whether each query counts people (the kept rows' ids are kept: :attr:`people`)."""
        return self.people is not None

    def count_distinct(self, conditions: Sequence[str], batch: int = 200) -> np.ndarray:
        """``COUNT(DISTINCT id)`` of the kept rows satisfying each SQL condition over the code
        columns ``c<i>``, ``batch`` conditions per Spark job: only the counts are collected."""
        from pyspark.sql import functions as F

        if self.people is None:
            raise DataError("internal error: the table was encoded without its privacy ids",
                            hint="encode with a PrivacyUnit(..., count='people')")
        out = np.zeros(len(conditions), dtype=np.int64)
        for lo in range(0, len(conditions), batch):
            part = conditions[lo:lo + batch]
            aggs = [F.countDistinct(F.when(F.expr(c), F.col("__pid"))).alias(f"n{i}")
                    for i, c in enumerate(part)]
            with spark_errors("the data"):
                row = self.people.agg(*aggs).collect()[0]
            out[lo:lo + len(part)] = [int(row[f"n{i}"]) for i in range(len(part))]
        return out

    def coarsen(self, class_of_code: dict[str, np.ndarray]) -> str:
        """Remember each attribute's class of every occurring code (indexed by position in
        :attr:`present`, as :meth:`tessera.data.duckdb_source.EncodedTable.coarsen`): the
        ``classed`` aggregations map values to classes inside Spark. Returns ``"classed"``."""
        self.classes = dict(class_of_code)
        self._mappings = {}
        return "classed"

    def group_by(
        self, names: Sequence[str], table: str = "coded"
    ) -> tuple[list[np.ndarray], np.ndarray]:
        """One Spark ``GROUP BY`` over ``names``: the occurring cells (codes on ``coded``,
        class indices on ``classed``) and their counts. A cell of raw values is mapped to
        codes on the driver (cells that coincide are left for the caller to sum, as it does);
        classes are joined in Spark (broadcast) so the aggregate stays small."""
        from pyspark.sql import functions as F

        if not names:
            return [], np.array([self.n_rows], dtype=np.int64)
        if table == "classed":
            df, cols = self._classed(names)
        else:
            df, cols = self.frame, [_quote(n) for n in names]
        with spark_errors("the data"):
            res = _collect(df.groupBy(*[F.col(c) for c in cols]).count())
        return self._cells(names, table, [res.column(j) for j in range(len(names))],
                           res.column("count").to_numpy())

    def group_by_many(
        self, requests: Sequence[tuple[Sequence[str], str]]
    ) -> Iterator[tuple[list[np.ndarray], np.ndarray]]:
        """:meth:`group_by` of each ``(names, table)``, in order, lazily; consecutive requests
        on the same table share ONE Spark job — ``GROUP BY … GROUPING SETS``, one set per
        request — up to :data:`MAX_SETS_PER_JOB` sets and about :data:`MAX_CELLS_PER_JOB`
        cells, so the data are scanned once per job instead of once per marginal."""
        chunk: list[tuple[Sequence[str], str]] = []
        cells = 0.0
        for names, table in requests:
            size = self._size(names, table)
            if chunk and (len(chunk) >= MAX_SETS_PER_JOB or chunk[0][1] != table
                          or cells + size > MAX_CELLS_PER_JOB):
                yield from self._grouping_sets(chunk)
                chunk, cells = [], 0.0
            chunk.append((names, table))
            cells += size
        if chunk:
            yield from self._grouping_sets(chunk)

    def _size(self, names: Sequence[str], table: str) -> float:
        """At most how many cells a ``GROUP BY`` over ``names`` returns."""
        sizes = [float(len(self.values[self.domain.index(n)].code)) if table == "coded"
                 else float(np.max(self.classes[n], initial=0) + 1) for n in names]
        return min(float(self.n_rows), float(np.prod(sizes)))

    def _grouping_sets(
        self, chunk: Sequence[tuple[Sequence[str], str]]
    ) -> Iterator[tuple[list[np.ndarray], np.ndarray]]:
        """The requests of one job (same table), as ONE ``GROUPING SETS`` aggregation; each
        request's cells are the rows whose ``grouping_id()`` marks exactly its columns."""
        table = chunk[0][1]
        if len(chunk) == 1 or any(not names for names, _ in chunk):
            for names, kind in chunk:
                yield self.group_by(names, kind)
            return
        union = list(dict.fromkeys(n for names, _ in chunk for n in names))
        if table == "classed":
            df, cols = self._classed(union)
        else:
            df, cols = self.frame, [_quote(n) for n in union]
        column_of = dict(zip(union, cols))
        sets = list(dict.fromkeys(tuple(names) for names, _ in chunk))
        view = f"tessera_sets_{uuid.uuid4().hex}"
        df.createOrReplaceTempView(view)
        grouping = ", ".join(f"({', '.join(column_of[n] for n in s)})" for s in sets)
        query = (f"SELECT grouping_id() AS __g, {', '.join(cols)}, count(*) AS __n FROM {view} "
                 f"GROUP BY {', '.join(cols)} GROUPING SETS ({grouping})")
        spark = self.frame.sparkSession
        try:
            with spark_errors("the data"):
                res = _collect(spark.sql(query))
        finally:
            spark.catalog.dropTempView(view)
        g = res.column("__g").to_numpy()
        top = len(union) - 1
        for names, _ in chunk:
            # grouping_id(): bit (top - j) is set when column j is NOT grouped in the row's set
            mask = sum(1 << (top - j) for j, n in enumerate(union) if n not in names)
            rows = pa.array(np.flatnonzero(g == mask))
            yield self._cells(names, table,
                              [res.column(1 + union.index(n)).take(rows) for n in names],
                              res.column("__n").take(rows).to_numpy())

    def _cells(self, names: Sequence[str], table: str, columns: Sequence[Any],
               counts: Any) -> tuple[list[np.ndarray], np.ndarray]:
        """A collected ``GROUP BY`` as (cells per name, counts): raw values mapped to codes on
        the driver by :meth:`Attribute.encode`, or class indices as they are."""
        counts = np.asarray(counts, dtype=np.int64)
        if int(counts.sum()) != self.n_rows:  # a value matched no distinct value: never silent
            raise RuntimeError(f"Spark GROUP BY over {list(names)} counted {int(counts.sum())} "
                               f"rows of {self.n_rows}: a value matched no distinct value")
        cells = []
        for name, column in zip(names, columns):
            if table == "classed":
                cells.append(np.asarray(column.to_numpy(), dtype=np.int64))
                continue
            attr = self.domain[name]
            codes = attr.encode(column.to_numpy(zero_copy_only=False))
            null = ~np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
            if attr.missing_code is not None:
                codes[null] = attr.missing_code
            if (codes < 0).any():
                raise RuntimeError(f"Spark GROUP BY over {name!r} returned a value outside "
                                   "the domain among the rows kept")
            cells.append(codes)
        return cells, counts

    def _classed(self, names: Sequence[str]) -> tuple[Any, list[str]]:
        """The kept rows with a class column ``k<i>`` per name: a broadcast join of each
        attribute's values against (distinct value, class), NULL-safe (NULL is the missing
        code's value)."""
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        spark = self.frame.sparkSession
        df, cols = self.frame, []
        for name in names:
            i = self.domain.index(name)
            if name not in self._mappings:  # built once per coarsening, shared by the batches
                vc = self.values[i]
                keep = vc.code >= 0
                position = np.searchsorted(self.present[i], vc.code[keep])
                cls = np.asarray(self.classes[name], dtype=np.int64)[position]
                spark_type = self.frame.schema[name].dataType
                schema = T.StructType([T.StructField(f"__v{i}", spark_type, True),
                                       T.StructField(f"k{i}", T.LongType(), False)])
                values = vc.values.filter(pa.array(keep)).to_pylist()
                self._mappings[name] = spark.createDataFrame(
                    list(zip(values, cls.tolist())), schema)
            df = df.join(F.broadcast(self._mappings[name]),
                         F.col(_quote(name)).eqNullSafe(F.col(f"__v{i}")), "inner")
            cols.append(f"k{i}")
        return df, cols

    def codes(self) -> np.ndarray:
        """Refused: rows never leave the cluster (count a
        :class:`~tessera.workload.workload.Workload`, which is aggregated by ``GROUP BY``)."""
        raise DataError("the Spark engine never collects rows, only aggregates",
                        hint="pass the queries as a Workload (counted by GROUP BY), or use "
                        "--engine duckdb for row-level work on small data")

    def columns(self, indices: Sequence[int]) -> dict[int, np.ndarray]:
        """Refused, as :meth:`codes`."""
        return {i: self.codes() for i in indices}


def encode_spark(
    source: Any,
    domain: Domain,
    *,
    on_invalid: OnInvalid = "error",
    csv: CsvOptions = CsvOptions(),
    table: str | None = None,
    scan_progress: ScanProgress | None = None,
    unit: PrivacyUnit = ONE_ROW,
    extra_columns: ExtraColumns = "error",
    measures: Sequence[str] = (),
) -> SparkEncodedTable:
    """Validate ``source`` (a PySpark DataFrame or a :class:`SparkSource`) against ``domain``
    in Spark, with the same checks, errors and policies as DuckDB (:mod:`tessera.data.validation`;
    module docs, step 1): ``on_invalid`` for values outside the domain, ``extra_columns`` for
    columns the schema does not declare. ``scan_progress`` is not called: Spark shows its own
    job progress.
    With a person as the ``unit``, at most ``unit.max_rows`` rows of each person are kept
    (:func:`bound_frame`: the rows DuckDB keeps); ``dropped`` counts only values outside the
    domain (how many rows bounding drops is private). ``measures``: data columns outside the
    schema that are summed, checked (every value a finite number, as on DuckDB) and kept
    beside the codes of the same rows (:attr:`SparkEncodedTable.measured`).
    """
    if on_invalid not in ("error", "drop"):
        raise DataError(f"unknown on_invalid policy {on_invalid!r}", hint="'error' or 'drop'")
    pid = unit.id_column
    measures = tuple(measures)
    df, where = _frame(source, domain, csv, table, pid, extra_columns, measures)
    what = str(where) if isinstance(where, (str, Path)) else "the data"
    if pid is not None:
        _check_ids(df, pid, what)
    if measures:
        df = _check_measures(df, measures, where)
    full = df.select(*[_quote(n) for n in dict.fromkeys(
        [*domain.names, *([pid] if pid is not None else []), *measures])])
    df = full.select(*[_quote(n) for n in domain.names])
    columns = _distinct_values(df, domain, where)
    invalid = [c.invalid for c in columns if c.invalid is not None]
    if invalid and on_invalid == "error":
        raise invalid_values_error(invalid, domain, where, csv)
    n_total = columns[-1].rows if columns else _count_rows(df, where)
    kept, n_rows = (df if pid is None and not measures else full), n_total
    if invalid:
        kept = kept.where(_valid_rows(columns, domain))
        with spark_errors(what):
            n_rows = kept.count()
    dropped = n_total - n_rows  # values outside the domain only: bounding's count is private
    people = measured = None
    if measures:  # the same kept rows, as codes and measures
        measured = bound_frame(kept, domain, columns, pid, unit.max_rows, measures=measures)
    if pid is not None:
        if unit.counts_people:  # the same kept rows, as codes and ids
            people = bound_frame(kept, domain, columns, pid, unit.max_rows,
                                 codes_and_ids=True, measures=measures)
        kept = bound_frame(kept, domain, columns, pid, unit.max_rows)
        with spark_errors(what):
            n_rows = kept.count()
    elif measures:
        kept = kept.select(*[_quote(n) for n in domain.names])
    return SparkEncodedTable(kept, domain, n_rows, dropped, invalid,
                             [c.present for c in columns], columns, people=people,
                             measured=measured, measures=measures)


def _check_measures(df: Any, measures: tuple[str, ...], where: Any) -> Any:
    """Every value of every measure column is a finite number (as
    :func:`tessera.data.duckdb_source.check_measure_values`), and the columns as DOUBLE."""
    from pyspark.sql import functions as F

    what = str(where) if isinstance(where, (str, Path)) else "the data"
    for m in measures:
        col = F.col(_quote(m))
        num = F.expr(f"try_cast({_quote(m)} AS DOUBLE)")
        bad_value = col.isNotNull() & (num.isNull() | F.isnan(num)
                                       | (F.abs(num) == float("inf")))
        with spark_errors(what):
            nulls = df.where(col.isNull()).count()
            bad = (df.where(bad_value).groupBy(col.cast("string").alias("v")).count()
                   .orderBy(F.desc("count"), "v").limit(5).collect())
        if nulls or bad:
            raise bad_measure_error(m, int(nulls), [(r["v"], int(r["count"])) for r in bad],
                                    where)
        df = df.withColumn(m, num)
    return df


def _check_ids(df: Any, id_column: str, what: str) -> None:
    """The privacy id is an integer or text column with a value on every row (as DuckDB)."""
    from pyspark.sql import functions as F

    kind = type(df.schema[id_column].dataType).__name__
    if kind not in _ID_TYPES:
        raise id_type_error(id_column, df.schema[id_column].dataType.simpleString())
    with spark_errors(what):
        empty = df.where(F.col(_quote(id_column)).isNull()).count()
    if empty:
        raise missing_ids_error(id_column, int(empty))


def bound_frame(frame: Any, domain: Domain, values: Sequence[ColumnCodes],
                id_column: str | None, max_rows: int, codes_and_ids: bool = False,
                measures: tuple[str, ...] = ()) -> Any:
    """The schema's columns of at most ``max_rows`` rows of each person of ``frame`` (which
    holds them and ``id_column``): the rows :func:`tessera.data.duckdb_source.bound_rows`
    keeps — each row's domain codes (a broadcast join of every column's distinct values with
    their codes, as validation made them; NULL-safe), then a window per person ordered by
    ``md5(concat_ws('|', id, c0, …))`` and the codes, the first K kept
    (:data:`tessera.data.validation.BOUNDING_RULE`). ``codes_and_ids``: the kept rows' codes
    (columns ``c<i>``), the id as text (``__pid``) and the ``measures`` (``m<j>``) instead,
    for counting people.
    ``measures``: the kept rows' codes ``c<i>`` and measures ``m<j>`` instead (rows whose
    codes tie ordered by the measures' values, as DuckDB orders them); without an
    ``id_column`` every row is kept."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    spark = frame.sparkSession
    df = (frame if id_column is None
          else frame.withColumn("__pid", F.col(_quote(id_column)).cast("string")))
    codes = []
    for i, (attr, vc) in enumerate(zip(domain, values)):
        keep = vc.code >= 0
        spark_type = frame.schema[attr.name].dataType
        schema = T.StructType([T.StructField(f"__v{i}", spark_type, True),
                               T.StructField(f"__c{i}", T.LongType(), False)])
        mapping = spark.createDataFrame(
            list(zip(vc.values.filter(pa.array(keep)).to_pylist(),
                     vc.code[keep].astype(np.int64).tolist())), schema)
        df = df.join(F.broadcast(mapping), F.col(_quote(attr.name)).eqNullSafe(
            F.col(f"__v{i}")), "inner").drop(f"__v{i}")
        codes.append(F.col(f"__c{i}"))
    values_ = [F.col(_quote(m)) for m in measures]
    if id_column is None:
        kept = df
    else:
        key = F.concat_ws("|", F.col("__pid"), *[c.cast("string") for c in codes])
        order = Window.partitionBy("__pid").orderBy(F.md5(key), *codes, *values_)
        ranked = df.withColumn("__rank", F.row_number().over(order))
        kept = ranked.where(F.col("__rank") <= int(max_rows))
    if codes_and_ids:  # counting people: the codes as c<i>, the id (never collected) and
        # the measures as m<j> (a person's total of a measure is summed per person)
        return kept.select(*[F.col(f"__c{i}").alias(f"c{i}") for i in range(len(domain))],
                           F.col("__pid"), *[v.alias(f"m{j}") for j, v in enumerate(values_)])
    if measures:  # summing measures: the codes as c<i> and the measures as m<j>
        return kept.select(*[F.col(f"__c{i}").alias(f"c{i}") for i in range(len(domain))],
                           *[v.alias(f"m{j}") for j, v in enumerate(values_)])
    return kept.select(*[_quote(n) for n in domain.names])


def _count_rows(df: Any, where: Any) -> int:
    with spark_errors(str(where) if isinstance(where, (str, Path)) else "the data"):
        return int(df.count())


def _distinct_values(df: Any, domain: Domain, where: Any) -> list[ColumnCodes]:
    """Every attribute's distinct values and row counts in ONE Spark job (``GROUPING SETS``,
    one set per attribute), each encoded by :func:`tessera.data.validation.column_codes`."""
    if not len(domain):
        return []
    view = f"tessera_src_{uuid.uuid4().hex}"
    df.createOrReplaceTempView(view)
    names = [_quote(n) for n in domain.names]
    sets = ", ".join(f"({n})" for n in names)
    query = (f"SELECT grouping_id() AS g, {', '.join(names)}, count(*) AS n FROM {view} "
             f"GROUP BY GROUPING SETS ({sets})")
    spark = df.sparkSession
    try:
        with spark_errors(str(where) if isinstance(where, (str, Path)) else "the data"):
            rows = spark.sql(query).collect()
    finally:
        spark.catalog.dropTempView(view)
    m = len(domain)
    per_column: list[tuple[list[Any], list[int]]] = [([], []) for _ in range(m)]
    for row in rows:
        g = int(row[0])
        j = m - (((1 << m) - 1) ^ g).bit_length()  # the grouped column's bit (from the left) is 0
        values, counts = per_column[j]
        values.append(row[1 + j])
        counts.append(int(row[-1]))
    out = []
    for attr, (values, counts) in zip(domain, per_column):
        column = _arrow(values, df.schema[attr.name].dataType)
        out.append(column_codes(attr, column, np.asarray(counts, dtype=np.int64)))
    return out


def _valid_rows(columns: list[ColumnCodes], domain: Domain) -> Any:
    """The Spark condition of a row with no value outside its attribute (``drop`` policy):
    per attribute with invalid values, not one of them; NULL only if it has a missing code."""
    from pyspark.sql import functions as F

    condition = F.lit(True)
    for attr, c in zip(domain, columns):
        if c.invalid is None:
            continue
        col = F.col(_quote(attr.name))
        bad = [v for v, _ in c.invalid.values if v is not None]
        ok = ~col.isin(bad) if bad else F.lit(True)
        if any(v is None for v, _ in c.invalid.values):
            condition = condition & col.isNotNull() & ok
        else:
            condition = condition & (col.isNull() | ok)
    return condition
