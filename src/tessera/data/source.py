"""Choosing the engine that reads a data source (docs/architecture.md).

Every engine is a module with two functions, the whole data-source protocol:

* ``accepts(source) -> bool``: whether the source is this engine's (cheap, no heavy import);
* an encoder ``(source, domain, *, on_invalid, csv, table, scan_progress, unit,
  extra_columns) -> CodedTable``: open the source, validate every value against the public
  domain with the shared rules of :mod:`tessera.data.validation`, keep at most K rows of each
  person when ``unit`` is a person (the shared :data:`~tessera.data.validation.BOUNDING_RULE`),
  and return a :class:`~tessera.data.table.CodedTable` (group-by counts per scope; the rows
  only where the engine allows).

:data:`ENGINES` lists them, most specific first; DuckDB takes everything the others do not
(files, DuckDB tables, pandas/polars frames, Arrow tables). A third engine (Polars, a SQL
warehouse) is one new module and one line here. Engines are imported only when asked, so
PySpark loads only for Spark sources.
"""

from __future__ import annotations

import importlib
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tessera.data.table import CodedTable, CsvOptions, ExtraColumns, OnInvalid, ScanProgress
from tessera.errors import DataError
from tessera.privacy import ONE_ROW, PrivacyUnit
from tessera.schema.domain import Domain

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Engine:
    """A data engine: its module, and the name of its encoder there."""

    name: str
    module: str
    encoder: str

    def accepts(self, source: Any) -> bool:
        accepts: Callable[[Any], bool] = self._module().accepts
        return accepts(source)

    def encode(self, source: Any, domain: Domain, **options: Any) -> CodedTable:
        return getattr(self._module(), self.encoder)(source, domain, **options)

    def _module(self) -> Any:
        return importlib.import_module(self.module)


#: The engines, most specific first; the last one (DuckDB) accepts every source.
ENGINES: tuple[Engine, ...] = (
    Engine("spark", "tessera.data.spark_source", "encode_spark"),
    Engine("duckdb", "tessera.data.duckdb_source", "encode_duckdb"),
)


def engine_for(source: Any) -> Engine:
    """The first engine of :data:`ENGINES` that accepts ``source``."""
    return next(e for e in ENGINES if e.accepts(source))


def encode(
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
) -> CodedTable:
    """Validate ``source`` against ``domain`` on the engine that reads it (:func:`engine_for`)
    and return its :class:`~tessera.data.table.CodedTable`.

    With a person as the ``unit`` (docs/theory.md §3.13) the table keeps at most
    ``unit.max_rows`` rows of each person, by a rule that reads that person's rows alone
    (:data:`~tessera.data.validation.BOUNDING_RULE`), the same on every engine; how many rows
    that drops is private and reported nowhere.

    Raises :class:`DataError` for missing columns, for columns the schema does not declare
    unless ``extra_columns='ignore'`` (then a :class:`~tessera.errors.DataWarning` names them
    and they are not read), and for values outside the domain unless ``on_invalid='drop'``
    (then :attr:`CodedTable.dropped` and ``.invalid`` report them): the same errors and
    policies on every engine (:mod:`tessera.data.validation`). ``scan_progress``
    hears how far the longest scans are, where the engine can tell. ``measures``: data columns
    outside the schema that aggregate statements sum, carried beside the codes (each value a
    finite number; docs/aggregates.md "Measures").
    """
    if on_invalid not in ("error", "drop"):
        raise DataError(f"unknown on_invalid policy {on_invalid!r}", hint="'error' or 'drop'")
    if extra_columns not in ("error", "ignore"):
        raise DataError(f"unknown extra_columns policy {extra_columns!r}",
                        hint="'error' or 'ignore'")
    engine = engine_for(source)
    # what is logged is public: the source's name, the engine, the schema's size (never a
    # count of rows, which add/remove neighbours keep private)
    what = (str(source) if isinstance(source, (str, os.PathLike))
            else type(source).__name__)
    logger.info("reading %s with %s (%d attributes%s)", what, engine.name, len(domain),
                f", table {table}" if table else "")
    start = time.monotonic()
    options: dict[str, Any] = {"measures": tuple(measures)} if measures else {}
    coded = engine.encode(source, domain, on_invalid=on_invalid, csv=csv, table=table,
                          scan_progress=scan_progress, unit=unit,
                          extra_columns=extra_columns, **options)
    logger.debug("%s read and coded by %s in %.2f s", what, engine.name,
                 time.monotonic() - start)
    return coded
