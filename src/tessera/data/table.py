"""The data layer's interface (docs/architecture.md): what every engine returns.

An engine (:mod:`tessera.data.duckdb_source`, :mod:`tessera.data.spark_source`, listed in
:mod:`tessera.data.source`) opens a source, validates every value against the public domain
(:mod:`tessera.data.validation`, shared by all engines) and returns a :class:`CodedTable`: the
rows kept and dropped, the values outside the domain, and marginals by one ``GROUP BY`` each —
aggregates; the code columns themselves only where :attr:`CodedTable.local_rows` allows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol

import numpy as np

from tessera.schema.domain import Domain

OnInvalid = Literal["error", "drop"]
#: What to do with data columns the schema does not declare: refuse them (the default: a column
#: the user believes is read must not be silently skipped), or read only the schema's columns
#: and name the others in a :class:`~tessera.errors.DataWarning`.
ExtraColumns = Literal["error", "ignore"]
CSV_SUFFIXES = {".csv", ".tsv", ".txt", ".data", ".test", ".gz"}
DUCKDB_SUFFIXES = {".duckdb", ".db", ".ddb"}
#: ``scan_progress(fraction)``: how far a long scan of the data is, 0..1.
ScanProgress = Callable[[float], None]


@dataclass(frozen=True)
class CsvOptions:
    """How to read a delimited text file (DuckDB's sniffer decides what is left as ``None``)."""

    header: bool | None = None
    delimiter: str | None = None
    na_values: tuple[str, ...] = ()
    skip_rows: int = 0


@dataclass(frozen=True)
class InvalidValues:
    """Values of one column that are outside its declared attribute."""

    column: str
    values: tuple[tuple[Any, int], ...]  # (value, number of rows), most frequent first
    rows: int

    def describe(self, limit: int = 5) -> str:
        shown = ", ".join(f"{v!r} ({n} rows)" for v, n in self.values[:limit])
        more = f" and {len(self.values) - limit} more values" if len(self.values) > limit else ""
        return f"column {self.column!r}: {self.rows} rows outside the domain: {shown}{more}"


class CodedTable(Protocol):
    """What the exact counts read from encoded data, on any engine: the rows kept and dropped,
    the invalid values, the codes that may occur, and marginals by one ``GROUP BY`` each —
    aggregates, never rows (:class:`EncodedTable` on DuckDB,
    :class:`~tessera.data.spark_source.SparkEncodedTable` on Spark). ``local_rows`` says whether the
    code columns themselves may be fetched (:meth:`EncodedTable.columns`); on Spark they may
    not: only aggregates leave the cluster."""

    domain: Domain
    n_rows: int
    dropped: int
    invalid: list[InvalidValues]
    present: list[np.ndarray]
    local_rows: ClassVar[bool]

    def coarsen(self, class_of_code: dict[str, np.ndarray]) -> str: ...

    def group_by(
        self, names: Sequence[str], table: str = "coded"
    ) -> tuple[list[np.ndarray], np.ndarray]: ...

    def group_by_many(
        self, requests: Sequence[tuple[Sequence[str], str]]
    ) -> Iterator[tuple[list[np.ndarray], np.ndarray]]: ...

    def codes(self) -> np.ndarray: ...

    def columns(self, indices: Sequence[int]) -> dict[int, np.ndarray]: ...

