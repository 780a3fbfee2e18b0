"""Exact (NOT private) answers of BDD queries on data: q(D) = Σ_{x∈D} f(x) for Boolean queries
f: {0,1}^scope → {0,1} (:class:`~tessera.workload.bdd.BooleanQuery`; docs/theory.md §2).

A BDD query reads only the codes (0/1) of its scope, so its answer is a function of the
scope's marginal: with the ``GROUP BY`` cells c (occurring code tuples) and their counts n_c,

    q(D) = Σ_c n_c · f(c),

exact because every row of cell c has the same codes on the scope. The BDD queries of a
workload are grouped by scope (in domain order); when the union of their scopes has few cells
(min(n_rows, 2^|union|) ≤ ``max_cells``) ONE ``GROUP BY`` over the union serves them all,
otherwise each scope gets its own (at most min(n_rows, 2^|scope|) cells). f is evaluated on
the cells, vectorised, by the query's own automaton (:meth:`BooleanQuery.evaluate`, the
cofactor layers the engine and the synthesizer read) — never row by row, never a second
evaluator.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tessera.data.table import CodedTable
from tessera.errors import QueryError
from tessera.workload.bdd import BooleanQuery
from tessera.workload.workload import Workload

__all__ = ["bdd_scope", "count_bdd_queries"]


def bdd_scope(workload: Workload, i: int) -> tuple[str, ...]:
    """The scope of BDD query i in domain order, checked: every variable an attribute of two
    values (a :class:`~tessera.errors.QueryError` naming the query otherwise)."""
    q = workload.queries[i]
    assert isinstance(q, BooleanQuery)
    domain = workload.domain
    for a in q.scope:
        if a not in domain.names:
            raise QueryError(f"query {workload.names[i]!r}: BDD variable {a!r} is not an "
                             "attribute of the schema",
                             hint="a BDD query's variables are attributes of two values")
        if domain[a].size != 2:
            raise QueryError(f"query {workload.names[i]!r}: BDD variable {a!r} has "
                             f"{domain[a].size} values, not 2",
                             hint="encode it in bits (tessera.engine.bdd.BinaryEncoding)")
    return tuple(sorted(q.scope, key=domain.index))


def count_bdd_queries(
    table: CodedTable,
    workload: Workload,
    indices: Sequence[int],
    answers: np.ndarray,
    *,
    max_cells: int = 1 << 19,
) -> None:
    """Write the exact answer of every BDD query ``workload.queries[i]``, i in ``indices``,
    into ``answers[i]`` (module docstring: one ``GROUP BY`` per union or per scope, f evaluated
    on the cells)."""
    if not indices:
        return
    domain = workload.domain
    groups: dict[tuple[str, ...], list[int]] = {}
    for i in indices:
        groups.setdefault(bdd_scope(workload, i), []).append(i)
    union = tuple(sorted({a for s in groups for a in s}, key=domain.index))
    if min(float(table.n_rows), 2.0 ** len(union)) <= max_cells:
        batches = [(union, [i for idx in groups.values() for i in idx])]
    else:
        batches = list(groups.items())
    for names, idx in batches:
        cells, counts = table.group_by(names, "coded")
        points = np.zeros((len(counts), len(domain)), dtype=np.int64)
        for name, col in zip(names, cells):
            points[:, domain.index(name)] = np.asarray(col, dtype=np.int64)
        weights = np.asarray(counts, dtype=np.int64)
        for i in idx:
            q = workload.queries[i]
            assert isinstance(q, BooleanQuery)
            answers[i] = int(weights[q.evaluate(domain, points)].sum())
