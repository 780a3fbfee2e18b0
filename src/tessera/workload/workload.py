"""Workloads: named, weighted predicate queries, Boolean clauses and structured families over one
domain (docs/theory.md §2).

A query is a predicate conjunction (:class:`~tessera.workload.query.Query`) or, for a WHERE clause
that combines attributes with OR / NOT, a :class:`~tessera.workload.clause.BooleanClause`; both are
written back as SQL by ``save`` and read again by ``load``.

Files: :meth:`Workload.load` and :meth:`Workload.save` read and write the text, YAML and JSON
formats of :mod:`tessera.workload.files`; statistics (``tessera workload check``) are
:class:`tessera.workload.stats.WorkloadStats`.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from tessera.errors import MAX_ERRORS_SHOWN, QueryError, QueryWarning
from tessera.schema.domain import Domain
from tessera.workload.clause import BooleanClause
from tessera.workload.families import (
    Partition,
    group_label,
)
from tessera.workload.files import (
    TEXT_MAX_QUERIES,
    WorkloadError,
    read_workload,
    require_at_most,
    write_workload,
)
from tessera.workload.parse import parse_query
from tessera.workload.query import Query
from tessera.workload.ranges import FamilyWeights, RangeFamily, RangeNames, RangeQueries

#: Most queries :meth:`Workload.expanded` materialises by default: an expanded cell is a Python
#: query object of about 2 KB (measured: NLTCS all 7-way marginals, 1,464,320 cells, 2.7 GiB
#: peak; docs/benchmarks.md "Resource guards"), so 10⁶ cells take ~2 GiB.
EXPAND_MAX_QUERIES = 1_000_000


def unique_names(names: Sequence[str], sources: Sequence[str] | None = None, *,
                 announce: bool = True) -> tuple[str, ...]:
    """``names`` with every repeat renamed ``name (k)`` (k = 2, 3, … the first free one), each
    renaming announced by a :class:`~tessera.errors.QueryWarning` naming where the name was
    first used (``sources[i]``: ``file:line``, else ``query i``) — the first
    :data:`~tessera.errors.MAX_ERRORS_SHOWN` of them, then one warning counting the rest.
    ``announce`` False renames silently: for names a builder generated itself (the user gave
    none, so there is nothing for them to correct).

    Linear in the number of names: each repeated name keeps the next k to try (a file of 10⁵
    identical lines is renamed in one pass, not 10¹⁰ probes)."""
    if len(set(names)) == len(names):
        return tuple(names)
    first: dict[str, int] = {}
    next_k: dict[str, int] = {}
    used = set(names)
    out = []
    renamed = 0
    for i, n in enumerate(names):
        if n not in first:
            first[n] = i
            out.append(n)
            continue
        k = next_k.get(n, 2)
        while f"{n} ({k})" in used:
            k += 1
        next_k[n] = k + 1
        new = f"{n} ({k})"
        used.add(new)
        out.append(new)
        renamed += 1
        if announce and renamed <= MAX_ERRORS_SHOWN:
            here, there = ((sources[i], sources[first[n]]) if sources is not None
                           else (f"query {i + 1}", f"query {first[n] + 1}"))
            warnings.warn(QueryWarning(f"{here}: query name {n!r} is already used ({there}); "
                                       f"this query is named {new!r}"), stacklevel=3)
    if announce and renamed > MAX_ERRORS_SHOWN:
        warnings.warn(QueryWarning(f"… and {renamed - MAX_ERRORS_SHOWN:,} more queries renamed "
                                   "the same way"), stacklevel=3)
    return tuple(out)



@dataclass(frozen=True)
class Workload:
    """Queries q_1..q_t over ``domain`` (predicate conjunctions or Boolean clauses) with names and
    importance weights w_q ≥ 0, and structured families
    (:class:`~tessera.workload.families.Partition`) whose cells are queries too.
    """

    domain: Domain
    queries: tuple[Query | BooleanClause, ...]
    names: tuple[str, ...]
    weights: tuple[float, ...]
    #: Where each query was written (``file:line``), when it was read from a file.
    sources: tuple[str, ...] | None = None
    #: Marginals, cube cells, hierarchy levels: disjoint cell queries, never expanded to text.
    partitions: tuple[Partition, ...] = ()
    #: Valid but suspicious conditions read from the file, one line each (``w.sql:3: 7 is
    #: outside Pclass's range 1..3; ...``): ``tessera workload check`` prints them.
    warnings: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        if not (len(self.queries) == len(self.names) == len(self.weights)):
            raise ValueError("queries, names and weights must have the same length")
        if self.sources is not None and len(self.sources) != len(self.queries):
            raise ValueError("sources must name one place per query")
        if not isinstance(self.weights, FamilyWeights):  # (a family checks its own weight)
            for name, w in zip(self.names, self.weights):
                if not (math.isfinite(w) and w >= 0):
                    raise QueryError(f"query {name!r}: weight {w!r} must be a finite number ≥ 0")
        for p in self.partitions:
            for a in p.attributes:
                self.domain.index(a)

    # -- construction -------------------------------------------------------------------------
    @staticmethod
    def of(
        domain: Domain,
        queries: Sequence[Query | BooleanClause],
        names: Sequence[str] | None = None,
        weights: Sequence[float] | None = None,
        sources: Sequence[str] | None = None,
        partitions: Sequence[Partition] = (),
        warnings: Sequence[str] = (),
    ) -> Workload:
        """A workload from queries; default names are the queries' SQL, default weights 1.
        A name used twice is made unique (``a``, ``a (2)``) with a
        :class:`~tessera.errors.QueryWarning` naming both places: two rows named alike in the
        answers could not be told apart."""
        if isinstance(queries, RangeQueries):  # lazy range families: names unique by design
            return Workload.of_ranges(domain, queries.families, warnings)
        qs = tuple(queries)
        given = tuple(names) if names is not None else tuple(q.to_sql(domain) for q in qs)
        return Workload(
            domain,
            qs,
            unique_names(given, sources),
            tuple(float(w) for w in weights) if weights is not None else (1.0,) * len(qs),
            tuple(sources) if sources is not None else None,
            tuple(partitions),
            tuple(warnings),
        )

    @staticmethod
    def of_ranges(domain: Domain, families: Sequence[RangeFamily],
                  warnings: Sequence[str] = ()) -> Workload:
        """A workload of lazy range families (:mod:`tessera.workload.ranges`): every range or
        prefix over one or two ordered attributes, never built as query objects."""
        fams = tuple(families)
        return Workload(domain, RangeQueries(domain, fams),  # type: ignore[arg-type]
                        RangeNames(domain, fams), FamilyWeights(fams),  # type: ignore[arg-type]
                        None, (), tuple(warnings))

    @property
    def range_families(self) -> tuple[RangeFamily, ...] | None:
        """The lazy range families when W is made of them alone, with their own weights (else
        None: e.g. the same queries re-weighted by a plan are read generically)."""
        q = self.queries
        ok = isinstance(q, RangeQueries) and isinstance(self.weights, FamilyWeights)
        return q.families if ok else None  # type: ignore[union-attr]

    @staticmethod
    def of_families(domain: Domain, partitions: Sequence[Partition]) -> Workload:
        """A workload of structured families only (e.g. all 3-way marginals)."""
        return Workload(domain, (), (), (), None, tuple(partitions))

    # -- structure ------------------------------------------------------------------------------
    @property
    def n_cells(self) -> int:
        """Number of cell queries in the structured families."""
        return sum(p.n_cells_in(self.domain) for p in self.partitions)

    @property
    def n_queries(self) -> int:
        """Every query: the predicate queries and every cell of every family."""
        return len(self.queries) + self.n_cells

    @property
    def is_structured(self) -> bool:
        return bool(self.partitions)

    @property
    def unit_weights(self) -> bool:
        """Every query (cells included) has weight 1, found from the families alone."""
        if isinstance(self.weights, FamilyWeights):
            return bool(np.all(self.weights.array == 1.0))
        return all(w == 1.0 for w in self.weights) and all(p.weight == 1.0
                                                           for p in self.partitions)

    def weight_array(self) -> npt.NDArray[np.float64]:
        """:meth:`all_weights` as one float64 array (8 bytes a query, no Python floats)."""
        if isinstance(self.weights, FamilyWeights):  # (lazy range families: read-only)
            return self.weights.array
        parts = [np.asarray(self.weights, dtype=np.float64)]
        parts += [np.full(p.n_cells_in(self.domain), p.weight) for p in self.partitions]
        return np.concatenate(parts)

    def all_weights(self) -> tuple[float, ...]:
        """One weight per query in :meth:`expanded` order (predicate queries, then cells);
        a tuple of Python objects (16 bytes a query): large workloads take
        :meth:`weight_array`."""
        out = list(self.weights)
        for p in self.partitions:
            out.extend([p.weight] * p.n_cells_in(self.domain))
        return tuple(out)

    @functools.cached_property
    def family_starts(self) -> npt.NDArray[np.int64]:
        """Index (expanded order) of each family's first cell, then the end: len + 1 entries."""
        sizes = [p.n_cells_in(self.domain) for p in self.partitions]
        return np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]) + len(self.queries)

    def family_at(self, i: int) -> tuple[int, int]:
        """(family number, cell number within it) of query ``i`` (a cell, expanded order)."""
        starts = self.family_starts
        if not len(self.queries) <= i < int(starts[-1]):
            raise IndexError(f"query {i} is not a cell of the workload's families")
        f = int(np.searchsorted(starts, i, side="right")) - 1
        return f, i - int(starts[f])

    def name_of(self, i: int) -> str:
        """The name of query ``i`` in expanded order (a cell: ``family[attr=value, …]``),
        without expanding anything."""
        if i < len(self.queries):
            return self.names[i]
        f, cell = self.family_at(i)
        p = self.partitions[f]
        index = np.unravel_index(cell, p.shape_in(self.domain))
        parts = []
        for k, (a, j) in enumerate(zip(p.attributes, index)):
            if p.groups[k] is None:  # a marginal axis: one code per group
                parts.append(f"{a}={self.domain[a].label(int(j))}")
            else:
                parts.append(f"{a}={group_label(self.domain, a, p.groups[k][int(j)])}")
        return f"{p.name}[{', '.join(parts)}]"

    def weight_of(self, i: int) -> float:
        """The weight of query ``i`` in expanded order."""
        if i < len(self.queries):
            return self.weights[i]
        return self.partitions[self.family_at(i)[0]].weight

    def all_names(self) -> Iterator[str]:
        """Every query's name in expanded order (lazily)."""
        yield from self.names
        for p in self.partitions:
            for label in p.cell_labels(self.domain):
                yield f"{p.name}[{label}]"

    def family_slices(self) -> list[tuple[Partition, slice]]:
        """Each family and the slice of its cells in expanded order."""
        out, start = [], len(self.queries)
        for p in self.partitions:
            n = p.n_cells_in(self.domain)
            out.append((p, slice(start, start + n)))
            start += n
        return out

    def expanded(self, max_queries: int = EXPAND_MAX_QUERIES) -> Workload:
        """The same queries with every cell materialised as a predicate query (names
        ``family[attr=value, …]``), in order: predicate queries, then each family's cells in
        row-major order. Refuses beyond ``max_queries`` (a :class:`ResourceError`, before
        anything is built): an expanded cell costs about 2 KB (:data:`EXPAND_MAX_QUERIES`)."""
        if not self.partitions:
            return self
        require_at_most(self.n_queries, max_queries, "expanding the workload gives",
                        "use the structured form (commands and APIs take it as it is), or "
                        "pass max_queries= to Workload.expanded")
        queries, names, weights = list(self.queries), list(self.names), list(self.weights)
        for p in self.partitions:
            for q, label in zip(p.cell_queries(self.domain), p.cell_labels(self.domain)):
                queries.append(q)
                names.append(f"{p.name}[{label}]")
                weights.append(p.weight)
        return Workload(self.domain, tuple(queries), tuple(names), tuple(weights))

    def describe(self, i: int) -> str:
        """Query i as a user can find it: its name, and ``file:line`` when known."""
        return f"{self.names[i]} ({self.sources[i]})" if self.sources else self.names[i]

    @staticmethod
    def from_sql(
        clauses: Sequence[str],
        domain: Domain,
        names: Sequence[str] | None = None,
        weights: Sequence[float] | None = None,
    ) -> Workload:
        """Parse WHERE clauses; errors name the clause index."""
        queries, errors = [], []
        for i, text in enumerate(clauses):
            try:
                queries.append(parse_query(text, domain))
            except QueryError as e:
                errors.append(e.located(f"query {i + 1} ({text.strip()!r})"))
        if errors:
            raise WorkloadError(errors)
        return Workload.of(
            domain, queries, names if names is not None else [c.strip() for c in clauses], weights
        )

    @staticmethod
    def load(path: str | Path, domain: Domain, *,
             max_queries: int = TEXT_MAX_QUERIES) -> Workload:
        """Read a text, YAML or JSON workload file (:func:`tessera.workload.files.read_workload`).
        A text file of more than ``max_queries`` lines is refused before it is parsed (a
        :class:`ResourceError`); structured families are never expanded, at any size."""
        parts = read_workload(path, domain, max_queries=max_queries)
        return Workload.of(parts.domain, parts.queries, parts.names, parts.weights, parts.sources,
                           parts.partitions, parts.warnings)

    def save(self, path: str | Path) -> None:
        """Write as text (``name: WHERE``) or, for .yaml/.json, structured with weights
        (:func:`tessera.workload.files.write_workload`)."""
        write_workload(path, self.domain, self.queries, self.names, self.weights, self.partitions)

    # -- container ----------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.queries)

    def __iter__(self) -> Iterator[Query | BooleanClause]:
        return iter(self.queries)

    def __getitem__(self, i: int) -> Query | BooleanClause:
        return self.queries[i]

    @property
    def n_clauses(self) -> int:
        """How many queries are Boolean clauses (not predicate conjunctions)."""
        return sum(isinstance(q, BooleanClause) for q in self.queries)

    def scopes(self) -> dict[tuple[str, ...], list[int]]:
        """Query indices grouped by scope (constrained attributes, in domain order)."""
        groups: dict[tuple[str, ...], list[int]] = {}
        for i, q in enumerate(self.queries):
            groups.setdefault(q.scope, []).append(i)
        return groups
