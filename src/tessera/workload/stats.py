"""Statistics of a workload: what ``tessera workload check`` and the report show (attributes
used, scope sizes, contradictions, tautologies, duplicates, structured families summarised without
expanding them). Boolean clauses and BDD queries are counted in every statistic.

Duplicates are found in linear time (rows of predicate codes sorted once, not pairs compared).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import attrgetter

import numpy as np

from tessera.workload.bdd import BooleanQuery
from tessera.workload.clause import BooleanClause
from tessera.workload.query import Predicate, Query
from tessera.workload.workload import Workload


@dataclass(frozen=True)
class WorkloadStats:
    """What ``tessera workload check`` reports."""

    n_queries: int
    attributes_used: dict[str, int]
    scope_sizes: dict[int, int]
    contradictions: tuple[int, ...]
    tautologies: tuple[int, ...]
    duplicates: tuple[tuple[int, ...], ...]
    n_range_queries: int
    total_weight: float
    #: The structured families, summarised without expanding them (None: there are none).
    families: FamilyStats | None = None
    #: How many of the queries are Boolean clauses (counted in every statistic above; never
    #: range queries; contradictions and tautologies found exactly from their automata).
    n_clauses: int = 0
    #: How many are BDD queries (:class:`~tessera.workload.bdd.BooleanQuery`; counted like the
    #: clauses: constant exactly when the BDD is a leaf, equal when one manager's nodes are).
    n_bdd: int = 0

    @staticmethod
    def of(w: Workload) -> WorkloadStats:
        """Linear in the number of predicates, and light: each distinct predicate object is
        looked at once (numbered by value), then every statistic is an array operation on those
        numbers; duplicates are equal rows of numbers found by one sort, not a dict of hashed
        queries. Boolean clauses and BDD queries are summarised one by one
        (:func:`_with_functions`)."""
        if any(isinstance(q, (BooleanClause, BooleanQuery)) for q in w.queries):
            return _with_functions(w)
        domain, queries = w.domain, w.queries
        n = len(queries)
        preds = attrgetter("predicates")
        lengths = np.fromiter(map(len, map(preds, queries)), np.int64, count=n)
        # w keeps every predicate alive while this runs, so id() names the objects; loaded
        # workloads share their predicates, so there are few distinct objects
        objects = dict(zip(map(id, _all(queries)), _all(queries)))
        number: dict[Predicate, int] = {}
        number_of = {i: number.setdefault(p, len(number)) for i, p in objects.items()}
        del objects
        total = int(lengths.sum())
        codes = np.fromiter(map(number_of.__getitem__, map(id, _all(queries))), np.int64, total)
        reps = list(number)  # one predicate per number
        attr_of = np.array([domain.index(p.attribute) for p in reps], dtype=np.int64)
        empty = np.array([p.is_contradiction() for p in reps], dtype=bool)
        ranged = np.array(
            [domain[p.attribute].ordered and p.coverage.is_interval() for p in reps], dtype=bool
        )
        starts = np.cumsum(lengths) - lengths
        contra = _any_per_query(empty, codes, starts, lengths)
        not_range = _any_per_query(~ranged, codes, starts, lengths)
        used = np.bincount(attr_of[codes], minlength=len(domain))
        sizes = np.bincount(lengths)
        groups: list[list[int]] = []
        for size in np.flatnonzero(sizes).tolist():
            rows_of = np.flatnonzero((lengths == size) & ~contra)
            if len(rows_of) == n:
                rows = codes.reshape(n, size)  # every query has this size: a view
            elif len(rows_of) > 1:
                rows = codes[starts[rows_of][:, None] + np.arange(size)]
            else:
                continue
            groups.extend(_equal_rows(rows, rows_of, len(reps)))
        groups.sort(key=lambda g: g[0])
        return WorkloadStats(
            n_queries=len(w),
            attributes_used={a.name: int(used[i]) for i, a in enumerate(domain) if used[i]},
            scope_sizes={k: int(c) for k, c in enumerate(sizes.tolist()) if c},
            contradictions=tuple(np.flatnonzero(contra).tolist()),
            tautologies=tuple(np.flatnonzero(lengths == 0).tolist()),
            duplicates=tuple(tuple(g) for g in groups),
            n_range_queries=int(n - not_range.sum()),
            total_weight=float(sum(w.weights)),
            families=FamilyStats.of(w) if w.partitions else None,
        )


@dataclass(frozen=True)
class FamilyStats:
    """A workload's structured families at a glance (``tessera workload check``): found from
    the families alone, one pass over them, never a cell expanded."""

    n_families: int
    n_cells: int
    #: kind (marginal, cube, hierarchy, …) -> (families, cells)
    kinds: dict[str, tuple[int, int]]
    #: attribute -> number of families over it, in domain order
    attributes_used: dict[str, int]
    #: number of attributes -> number of families over that many
    scope_sizes: dict[int, int]
    #: distinct attribute sets (families over the same set are counted by one aggregation)
    n_scopes: int
    #: the family with the most cells, and its cells
    largest: tuple[str, int]
    #: families whose groups leave some codes out (rows there lie in no cell)
    n_partial: int
    #: Σ weight × cells
    total_weight: float

    @staticmethod
    def of(w: Workload) -> FamilyStats:
        domain = w.domain
        kinds: dict[str, list[int]] = {}
        used = np.zeros(len(domain), dtype=np.int64)
        sizes: dict[int, int] = {}
        scopes: set[tuple[str, ...]] = set()
        largest, partial, weight = ("", -1), 0, 0.0
        for p in w.partitions:
            cells = p.n_cells_in(domain)
            k = kinds.setdefault(p.kind, [0, 0])
            k[0] += 1
            k[1] += cells
            for a in p.attributes:
                used[domain.index(a)] += 1
            sizes[len(p.attributes)] = sizes.get(len(p.attributes), 0) + 1
            scopes.add(p.attributes)
            if cells > largest[1]:
                largest = (p.name, cells)
            partial += not p.covers(domain)
            weight += p.weight * cells
        return FamilyStats(
            n_families=len(w.partitions),
            n_cells=sum(c for _, c in kinds.values()),
            kinds={kind: (f, c) for kind, (f, c) in kinds.items()},
            attributes_used={a.name: int(used[i]) for i, a in enumerate(domain) if used[i]},
            scope_sizes=dict(sorted(sizes.items())),
            n_scopes=len(scopes),
            largest=largest,
            n_partial=partial,
            total_weight=weight,
        )


def _with_functions(w: Workload) -> WorkloadStats:
    """:meth:`WorkloadStats.of` of a workload holding Boolean clauses or BDD queries: the
    predicate queries' statistics, renumbered, with each of the others added (its scope, exact
    constancy, equal ones). Two BDD queries are equal when they are the same node of one
    manager (reduced ordered BDDs are canonical for a fixed order); equal functions under two
    variable orders are not matched."""
    clauses = [i for i, q in enumerate(w.queries) if isinstance(q, (BooleanClause, BooleanQuery))]
    is_clause = set(clauses)
    keep = [i for i in range(len(w)) if i not in is_clause]
    base = WorkloadStats.of(Workload(
        w.domain, tuple(w.queries[i] for i in keep), tuple(w.names[i] for i in keep),
        tuple(w.weights[i] for i in keep), None, w.partitions))
    back = np.asarray(keep, dtype=np.int64)
    used = dict(base.attributes_used)
    sizes = dict(base.scope_sizes)
    contra = set(back[list(base.contradictions)].tolist())
    tauto = set(back[list(base.tautologies)].tolist())
    equal: dict[object, list[int]] = {}
    for i in clauses:
        c = w.queries[i]
        for a in c.scope:
            used[a] = used.get(a, 0) + 1
        sizes[len(c.scope)] = sizes.get(len(c.scope), 0) + 1
        if isinstance(c, BooleanQuery):
            constant = (c.node == c.manager.false, c.node == c.manager.true)
            key: object = (id(c.manager), c.manager.to_expr(c.node))
        else:
            assert isinstance(c, BooleanClause)
            constant, key = (c.is_contradiction(), c.is_tautology()), c
        if constant[0]:
            contra.add(i)
        elif constant[1]:
            tauto.add(i)
        else:
            equal.setdefault(key, []).append(i)
    groups = [sorted(back[list(g)].tolist()) for g in base.duplicates]
    groups += [g for g in equal.values() if len(g) > 1]
    groups.sort(key=lambda g: g[0])
    return WorkloadStats(
        n_queries=len(w),
        attributes_used={a.name: used[a.name] for a in w.domain if a.name in used},
        scope_sizes=dict(sorted(sizes.items())),
        contradictions=tuple(sorted(contra)),
        tautologies=tuple(sorted(tauto)),
        duplicates=tuple(tuple(g) for g in groups),
        n_range_queries=base.n_range_queries,
        total_weight=float(sum(w.weights)),
        families=base.families,
        n_clauses=sum(isinstance(w.queries[i], BooleanClause) for i in clauses),
        n_bdd=sum(isinstance(w.queries[i], BooleanQuery) for i in clauses),
    )


def _all(queries: Sequence[Query]) -> Iterator[Predicate]:
    """Every predicate of every query, in order."""
    return chain.from_iterable(map(attrgetter("predicates"), queries))


def _any_per_query(
    flag: np.ndarray, codes: np.ndarray, starts: np.ndarray, lengths: np.ndarray
) -> np.ndarray:
    """Per query: does one of its predicates (numbers ``codes``) have ``flag``?"""
    if not flag.any():
        return np.zeros(len(lengths), dtype=bool)
    hits = np.concatenate(([0], np.cumsum(flag[codes])))
    return hits[starts + lengths] > hits[starts]


def _equal_rows(rows: np.ndarray, index: np.ndarray, base: int) -> list[list[int]]:
    """Groups (≥ 2, ascending) of ``index`` whose rows are equal; rows hold numbers < base."""
    width = rows.shape[1]
    if width == 0:
        return [index.tolist()] if len(index) > 1 else []
    if base**width < 2**62:  # one integer per row
        key = rows @ (base ** np.arange(width, dtype=np.int64))
        order = np.argsort(key, kind="stable")
        key = key[order]
        same = key[1:] == key[:-1]
    else:
        order = np.lexsort(rows.T[::-1])
        ordered = rows[order]
        same = np.all(ordered[1:] == ordered[:-1], axis=1)
    if not same.any():
        return []
    starts = np.flatnonzero(np.concatenate(([True], ~same)))
    ends = np.append(starts[1:], len(order))
    members = index[order]
    return [members[a:b].tolist() for a, b in zip(starts, ends) if b - a > 1]

