"""Exact counts of *people*: each query counts the persons with at least one kept row in it, once
each (``COUNT(DISTINCT id)``; docs/theory.md §3.14, docs/people.md "Counting people, not rows").

The rows are bounded first (at most K per person, :data:`~tessera.data.validation.BOUNDING_RULE`),
exactly as for row counts, and the privacy id is kept beside the codes; every query (every cell of
a family, in :meth:`~tessera.workload.workload.Workload.expanded` order) becomes one SQL condition
over the code columns and DuckDB counts the distinct ids that satisfy it. A distinct count is not a
sum over a histogram (a person in two cells is one person in their union), so nothing here is
derived from another count.
"""

from __future__ import annotations

import numpy as np

from tessera.data.duckdb_source import EncodedTable, count_distinct_ids
from tessera.data.table import CodedTable
from tessera.errors import DataError, QueryError
from tessera.schema.domain import Domain
from tessera.workload.query import Query
from tessera.workload.workload import Workload

#: A workload (cells included) counted per person has at most this many queries: one SQL
#: aggregate each.
PEOPLE_MAX_QUERIES = 200_000


def code_condition(domain: Domain, query: Query) -> str:
    """The SQL condition of ``query`` over the code columns ``c<i>`` (half-open code spans)."""
    parts = []
    for p in query.predicates:
        col = f"c{domain.index(p.attribute)}"
        spans = [f"{col} = {lo}" if hi == lo + 1 else f"({col} >= {lo} AND {col} < {hi})"
                 for lo, hi in p.coverage.spans]
        if not spans:
            return "FALSE"
        parts.append(spans[0] if len(spans) == 1 else "(" + " OR ".join(spans) + ")")
    return " AND ".join(parts) if parts else "TRUE"


def count_people(table: CodedTable, workload: Workload) -> np.ndarray:
    """The number of people each query of ``workload`` counts (expanded order), on a table
    encoded with a people unit (its privacy ids kept)."""
    if not isinstance(table, EncodedTable):
        raise DataError("counting people runs on DuckDB; the Spark engine counts rows only",
                        hint="use --engine duckdb, or --count rows")
    expanded = workload.expanded(max_queries=PEOPLE_MAX_QUERIES)
    conditions: list[str] = []
    for i, q in enumerate(expanded.queries):
        if type(q) is not Query:
            raise QueryError(f"query {expanded.names[i]!r}: counting people takes predicate "
                             "queries (conjunctions of conditions on single columns); this one "
                             "is a Boolean formula",
                             hint="write it as several conjunctions, or use --count rows")
        conditions.append(code_condition(table.domain, q))
    return count_distinct_ids(table, conditions)


__all__ = ["PEOPLE_MAX_QUERIES", "code_condition", "count_people"]
