"""Data sources, validation against the public schema, and exact counts (docs/theory.md §1).

* :mod:`~tessera.data.table`: the interface every engine returns
  (:class:`~tessera.data.table.CodedTable`: group-by counts per scope; rows where allowed);
* :mod:`~tessera.data.validation`: the one set of rules that checks and encodes every value,
  shared by every engine;
* :mod:`~tessera.data.source`: the engines, and :func:`~tessera.data.source.encode`, which
  picks one by the source: :mod:`~tessera.data.duckdb_source` (files, DuckDB tables, frames)
  and :mod:`~tessera.data.spark_source` (Spark DataFrames and tables) — neither imports the
  other;
* :mod:`~tessera.data.counts`, :mod:`~tessera.data.family_counts`: exact answers
  (**not private**);
* :mod:`~tessera.data.infer`: schema drafts from data (**not private**).
"""
