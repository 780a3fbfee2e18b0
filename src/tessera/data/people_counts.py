"""Exact counts of *people*: each query counts the persons with at least one kept row in it, once
each (``COUNT(DISTINCT id)``; docs/theory.md §3.14, docs/people.md "Counting people, not rows").

The rows are bounded first (at most K per person, :data:`~tessera.data.validation.BOUNDING_RULE`),
exactly as for row counts (on DuckDB or Spark, the same rows), and the privacy id is kept beside
the codes; every query (every cell of a family, in
:meth:`~tessera.workload.workload.Workload.expanded` order; an AND/OR clause as its formula)
becomes one SQL condition over the code columns and the engine counts the distinct ids that
satisfy it (``count_distinct``; Spark returns the counts alone). A distinct count is not a sum
over a histogram (a person in two cells is one person in their union), so nothing here is
derived from another count.

Aggregate statements counting people (:func:`person_linear`): a count is a distinct count of
its group's condition, and a sum adds, over the persons with a kept row in the group, the
clamp of each person's total there — the totals computed per person inside the engine, after
the same bounding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tessera.data.table import CodedTable
from tessera.data.validation import person_units_sql
from tessera.errors import DataError, QueryError
from tessera.schema.attributes import IntegerRange
from tessera.schema.domain import Domain
from tessera.workload.aggregates import LinearQuery
from tessera.workload.clause import And, BooleanClause, Node
from tessera.workload.query import Predicate, Query
from tessera.workload.workload import Workload

#: A workload (cells included) counted per person has at most this many queries: one SQL
#: aggregate each.
PEOPLE_MAX_QUERIES = 200_000


def predicate_condition(domain: Domain, p: Predicate) -> str:
    """``x_a ∈ coverage`` over the code column ``c<i>`` (half-open code spans)."""
    col = f"c{domain.index(p.attribute)}"
    spans = [f"{col} = {lo}" if hi == lo + 1 else f"({col} >= {lo} AND {col} < {hi})"
             for lo, hi in p.coverage.spans]
    if not spans:
        return "FALSE"
    return spans[0] if len(spans) == 1 else "(" + " OR ".join(spans) + ")"


def code_condition(domain: Domain, query: Query | BooleanClause) -> str:
    """The SQL condition of a predicate query (a conjunction) or a Boolean clause (an AND/OR
    formula over predicates, two-valued on codes: docs/theory.md §2) over the code columns."""
    if isinstance(query, BooleanClause):
        return _node_condition(domain, query.root)
    parts = [predicate_condition(domain, p) for p in query.predicates]
    return " AND ".join(parts) if parts else "TRUE"


def _node_condition(domain: Domain, node: Node) -> str:
    if isinstance(node, Predicate):
        return predicate_condition(domain, node)
    kids = [_node_condition(domain, c) for c in node.children]
    if isinstance(node, And):
        return "(" + " AND ".join(kids) + ")" if kids else "TRUE"
    return "(" + " OR ".join(kids) + ")" if kids else "FALSE"


def count_people(table: CodedTable, workload: Workload) -> np.ndarray:
    """The number of people each query of ``workload`` counts (expanded order), on a table
    encoded with a people unit (its privacy ids kept)."""
    counter = getattr(table, "count_distinct", None)
    if counter is None or not getattr(table, "person_ids", False):
        raise DataError("internal error: the table was encoded without its privacy ids",
                        hint="encode with a PrivacyUnit(..., count='people')")
    expanded = workload.expanded(max_queries=PEOPLE_MAX_QUERIES)
    conditions: list[str] = []
    for i, q in enumerate(expanded.queries):
        if type(q) is not Query and not isinstance(q, BooleanClause):
            raise QueryError(f"query {expanded.names[i]!r}: counting people takes predicate "
                             "queries and AND/OR clauses; this one is a compiled Boolean "
                             "query (a BDD)",
                             hint="write it as a WHERE clause, or use --count rows")
        conditions.append(code_condition(table.domain, q))
    return np.asarray(counter(conditions), dtype=np.int64)


def value_sql(table: Any, lq: LinearQuery) -> str:
    """The SQL value a row adds to a person's total for a sum ``lq``: the integer of its code
    (``c<i>`` + min) for a schema attribute, the measure in units of 10^e, unclamped
    (:data:`~tessera.data.validation.PERSON_MEASURE_RULE`) for a measure."""
    assert lq.attribute is not None
    if lq.is_measure:
        assert lq.exponent is not None
        return person_units_sql(f"m{table.measures.index(lq.attribute)}", lq.exponent)
    attr = table.domain[lq.attribute]
    if not isinstance(attr, IntegerRange):
        raise QueryError(f"SUM of {lq.attribute!r}: not an integer attribute")
    return f"(CAST(c{table.domain.index(lq.attribute)} AS BIGINT) + {int(attr.lo)})"


def person_linear(table: Any, linear: Sequence[LinearQuery]) -> list[int]:
    """Each linear query counted per person (docs/theory.md §3.14, "Aggregates counting
    people") on a table encoded with a people unit: a count is the number of persons with a
    kept row in its condition (``count_distinct``), a sum Σ over those persons of clamp(T, lo,
    hi), T the person's total of the value over those rows (``person_sums``, inside the engine:
    only the sums leave it). Python integers."""
    if not getattr(table, "person_ids", False):
        raise DataError("internal error: the table was encoded without its privacy ids",
                        hint="encode with a PrivacyUnit(..., count='people')")
    domain = table.domain
    out = [0] * len(linear)
    counts = [i for i, lq in enumerate(linear) if lq.role == "count"]
    sums = [i for i, lq in enumerate(linear) if lq.role == "sum"]
    if counts:
        found = table.count_distinct([code_condition(domain, linear[i].query) for i in counts])
        for i, v in zip(counts, found):
            out[i] = int(v)
    if sums:
        requests = []
        for i in sums:
            lq = linear[i]
            assert lq.lo is not None and lq.hi is not None
            requests.append((code_condition(domain, lq.query), value_sql(table, lq), lq.lo,
                             lq.hi))
        for i, v in zip(sums, table.person_sums(requests)):
            out[i] = int(v)
    return out


__all__ = ["PEOPLE_MAX_QUERIES", "code_condition", "count_people", "person_linear",
           "predicate_condition", "value_sql"]
