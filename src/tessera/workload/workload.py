"""Workloads: named, weighted predicate queries, Boolean clauses and structured families over one
domain (docs/theory.md §2).

A query is a predicate conjunction (:class:`~tessera.workload.query.Query`) or, for a WHERE clause
that combines attributes with OR / NOT, a :class:`~tessera.workload.clause.BooleanClause`; both are
written back as SQL by ``save`` and read again by ``load``.

File formats
------------
* **Text** (``.sql``, ``.txt``, anything not YAML/JSON): one WHERE clause per line; ``#`` starts a
  comment (outside quoted literals); an optional ``name:`` prefix names the query (any other
  name in double quotes: ``"young adults": age < 30``).
* **YAML / JSON**: ``{"queries": [{"name": ..., "where": ..., "weight": ...}, ...]}`` (or the list
  alone). Weights are importance weights ≥ 0 (default 1). Structured families
  (:mod:`tessera.workload.families`) sit beside the queries and are never expanded to text::

      marginals:                    # a listed set of attribute sets, or all k-way ones
        - {attributes: [age, sex], weight: 2}
        - {all: 3}                  # every 3-way marginal (of ``over:`` attributes, default all)
      cubes:
        - {attributes: [age, sex, race]}        # every subset's marginal, the total included
      hierarchies:
        - {attributes: [age, hours], branching: 2, depth: 4}
      partitions: [...]             # explicit families, as ``Workload.save`` writes them
      prefixes:                     # prefix (dominance) ranges: predicate queries, read compactly
        - {attributes: [age]}

  Cells are queries too: ``len(workload)`` counts the predicate queries,
  :attr:`Workload.n_queries` every query, and :meth:`Workload.expanded` materialises the
  cells as predicate queries (lazily, on request, with a size guard).

Every error names ``file:line`` (or ``file:queries[i]``) and comes with a hint; all errors of a file
are reported together.


Why this module is long: it is the workload value and its two file formats, and both formats
share the name and weight rules, the error collection (every error of a file, ``file:line``
each) and the structured blocks; about a third is the text reader's fast loop for 10⁶-line files
and the linear duplicate detection of :class:`WorkloadStats`. Splitting the readers from the
value would need a lazy import in :meth:`Workload.load` (they build workloads); that split is the
next step if the formats grow.
"""

from __future__ import annotations

import functools
import gc
import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import yaml

from tessera.errors import (
    QueryError,
    ResourceError,
    TesseraError,
    capped_lines,
    read_text,
    syntax_error,
)
from tessera.schema.domain import Domain
from tessera.workload.clause import BooleanClause
from tessera.workload.families import (
    Partition,
    cube,
    group_label,
    hierarchy,
    k_way_marginals,
    prefix_queries,
)
from tessera.workload.fastparse import FastParser
from tessera.workload.parse import parse_query
from tessera.workload.query import Predicate, Query

#: Most queries :meth:`Workload.expanded` materialises by default: an expanded cell is a Python
#: query object of about 2 KB (measured: NLTCS all 7-way marginals, 1,464,320 cells, 2.7 GiB
#: peak; docs/benchmarks.md "Resource guards"), so 10⁶ cells take ~2 GiB.
EXPAND_MAX_QUERIES = 1_000_000
#: Most lines :meth:`Workload.load` reads from a text workload by default: a parsed query costs
#: about 0.6 KB (10⁶ random conjunctions: 0.7 GiB peak with the statistics), so 5·10⁶ is
#: ~3 GiB. Counted before parsing, in a streaming pass that keeps no line.
TEXT_MAX_QUERIES = 5_000_000
#: Largest YAML workload file :meth:`Workload.load` parses: PyYAML keeps ~35 bytes per byte of
#: input (10⁵ queries, 7.3 MB: 0.25 GiB above the interpreter), so 64 MiB is ~2 GiB. JSON is
#: parsed in C, at a fraction of that, and has no such limit.
YAML_MAX_BYTES = 64 * 2**20

#: A bare query name: a letter (any script) or underscore, then word characters, ``.``, ``-``.
_NAME = re.compile(r"^\s*([^\W\d][\w.\-]*)\s*:(?!:)\s*(.*)$")
_QUOTED_NAME = re.compile(r'^\s*"((?:[^"]|"")*)"\s*:(?!:)\s*(.*)$')
_QUOTED = re.compile(r"('(?:[^']|'')*'|\"(?:[^\"]|\"\")*\")")


def require_at_most(n: int, limit: int, what: str, hint: str) -> None:
    """Refuse ``n`` queries above ``limit`` with the resource guards' one message,
    ``{what} {n:,} queries, above the limit of {limit:,}``, and a hint naming how to raise it."""
    if n > limit:
        raise ResourceError(f"{what} {n:,} queries, above the limit of {limit:,}", hint=hint)


#: Suffixes of data files: a text workload with one of them that is mostly errors is probably
#: the data, given in the workload's place.
DATA_SUFFIXES = (".csv", ".tsv", ".parquet", ".data", ".duckdb")


class WorkloadError(TesseraError):
    """All the errors found in one workload, one per line: the first
    :data:`~tessera.errors.MAX_ERRORS_SHOWN`, then how many more (``errors`` keeps them all)."""

    def __init__(self, errors: Sequence[TesseraError]) -> None:
        self.errors = list(errors)
        super().__init__(capped_lines(self.errors))

    def __str__(self) -> str:
        return self.message


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
        """A workload from queries; default names are the queries' SQL, default weights 1."""
        qs = tuple(queries)
        return Workload(
            domain,
            qs,
            tuple(names) if names is not None else tuple(q.to_sql(domain) for q in qs),
            tuple(float(w) for w in weights) if weights is not None else (1.0,) * len(qs),
            tuple(sources) if sources is not None else None,
            tuple(partitions),
            tuple(warnings),
        )

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
        return all(w == 1.0 for w in self.weights) and all(p.weight == 1.0
                                                           for p in self.partitions)

    def weight_array(self) -> npt.NDArray[np.float64]:
        """:meth:`all_weights` as one float64 array (8 bytes a query, no Python floats)."""
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
        """Read a text, YAML or JSON workload file (see the module docstring). A text file of
        more than ``max_queries`` lines is refused before it is parsed (a
        :class:`ResourceError`); structured families are never expanded, at any size."""
        p = Path(path)
        structured = p.suffix in (".yaml", ".yml", ".json")
        try:
            if p.suffix in (".yaml", ".yml") and p.stat().st_size > YAML_MAX_BYTES:
                raise ResourceError(
                    f"{p}: a YAML workload of {p.stat().st_size:,} bytes, above the limit of "
                    f"{YAML_MAX_BYTES:,} (the YAML parser keeps ~35 bytes a byte)",
                    hint="write the queries as JSON (same keys) or as text lines, and families "
                    "compactly (marginals: [{all: k}])")
            if not structured:
                require_at_most(count_lines(p), max_queries, f"{p}: the text workload has",
                                "write marginals, cubes and hierarchies compactly as YAML "
                                "(tessera workload build ... -o W.yaml), split the file, or "
                                "raise the limit: Workload.load(..., max_queries=N)")
        except OSError as e:
            raise QueryError(f"cannot read workload: {e.strerror}", where=str(p)) from None
        text = read_text(p, "workload", QueryError)
        if structured:
            return _load_structured(p, text, domain)
        return _load_text(p, text, domain)

    def save(self, path: str | Path) -> None:
        """Write as text (``name: WHERE``) or, for .yaml/.json, structured with weights."""
        p = Path(path)
        if self.partitions and p.suffix not in (".yaml", ".yml", ".json"):
            raise QueryError("structured families are written compactly in YAML or JSON only",
                             where=str(p), hint="save as .yaml or .json")
        if p.suffix in (".yaml", ".yml", ".json"):
            entries = [
                {"name": n, "where": q.to_sql(self.domain), "weight": w}
                for q, n, w in zip(self.queries, self.names, self.weights)
            ]
            doc: dict[str, Any] = {"queries": entries} if entries else {}
            if self.partitions:
                doc["partitions"] = [f.to_dict() for f in self.partitions]
            p.write_text(
                json.dumps(doc, indent=1)
                if p.suffix == ".json"
                else yaml.safe_dump(doc, sort_keys=False, width=200)
            )
            return
        lines = []
        for q, n in zip(self.queries, self.names):
            sql = q.to_sql(self.domain)
            if n == sql:
                lines.append(sql)
            elif re.fullmatch(r"[^\W\d][\w.\-]*", n):
                lines.append(f"{n}: {sql}")
            elif "\n" in n or "\r" in n:
                raise QueryError(
                    f"query name {n!r} spans several lines: the text format cannot hold it",
                    hint="save as .yaml or .json",
                )
            else:
                lines.append('"' + n.replace('"', '""') + f'": {sql}')
        p.write_text("\n".join(lines) + "\n")

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

    def stats(self) -> WorkloadStats:
        return WorkloadStats.of(self)


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

    @staticmethod
    def of(w: Workload) -> WorkloadStats:
        """Linear in the number of predicates, and light: each distinct predicate object is
        looked at once (numbered by value), then every statistic is an array operation on those
        numbers; duplicates are equal rows of numbers found by one sort, not a dict of hashed
        queries. Boolean clauses are summarised one by one (:func:`_with_clauses`)."""
        if any(isinstance(q, BooleanClause) for q in w.queries):
            return _with_clauses(w)
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


def _with_clauses(w: Workload) -> WorkloadStats:
    """:meth:`WorkloadStats.of` of a workload holding Boolean clauses: the predicate queries'
    statistics, renumbered, with each clause added (its scope, exact constancy, equal ones)."""
    clauses = [i for i, q in enumerate(w.queries) if isinstance(q, BooleanClause)]
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
    equal: dict[BooleanClause, list[int]] = {}
    for i in clauses:
        c = w.queries[i]
        assert isinstance(c, BooleanClause)
        for a in c.scope:
            used[a] = used.get(a, 0) + 1
        sizes[len(c.scope)] = sizes.get(len(c.scope), 0) + 1
        if c.is_contradiction():
            contra.add(i)
        elif c.is_tautology():
            tauto.add(i)
        else:
            equal.setdefault(c, []).append(i)
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
        n_clauses=len(clauses),
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


def count_lines(p: str | Path) -> int:
    """Lines of a text file (an upper bound on the queries it holds), counted in 16 MiB blocks
    without keeping any: what the size guards check before parsing."""
    lines, last = 0, b"\n"
    with Path(p).open("rb") as f:
        while block := f.read(2**24):
            lines += block.count(b"\n")
            last = block[-1:]
    return lines + (last != b"\n")


def _strip_comment(line: str) -> str:
    pieces = _QUOTED.split(line)
    for i in range(0, len(pieces), 2):
        if "#" in pieces[i]:
            return "".join(pieces[:i]) + pieces[i].split("#", 1)[0]
    return line


def _load_text(p: Path, text: str, domain: Domain) -> Workload:
    """One query per line; simple conjunctions take :mod:`tessera.workload.fastparse` (same queries,
    identical predicates shared), everything else -- and every error -- ``parse_query``."""
    queries: list[Query | BooleanClause] = []
    names: list[str] = []
    sources: list[str] = []
    errors: list[TesseraError] = []
    warnings: list[str] = []
    notes: list[str] = []
    fast = FastParser(domain)
    where = f"{p}:"
    # Millions of acyclic objects: the cycle collector would only rescan them, so it is off
    # while loading, except right after the main parser, whose sqlglot trees (and errors'
    # tracebacks) are cyclic garbage: a young-generation pass frees them.
    collecting = gc.isenabled()
    gc.disable()
    try:
        for lineno, raw in enumerate(text.splitlines(), start=1):
            line = (_strip_comment(raw) if "#" in raw else raw).strip()
            if not line:
                continue
            quoted = m = None
            if ":" in line:  # both name prefixes end with a colon
                quoted = _QUOTED_NAME.match(line)
                m = None if quoted else _NAME.match(line)
            if quoted:
                name, clause = quoted.group(1).replace('""', '"'), quoted.group(2)
            elif m:
                name, clause = m.group(1), m.group(2)
            else:
                name, clause = line, line
            query = fast.try_parse(clause, notes)
            if notes:
                warnings.extend(f"{where}{lineno}: {note}" for note in notes)
                notes.clear()
            if query is None:
                try:
                    query = fast.parse(clause, notes)
                except QueryError as e:
                    errors.append(e.located(f"{where}{lineno}"))
                warnings.extend(f"{where}{lineno}: {note}" for note in notes)
                notes.clear()
                if collecting:
                    gc.collect(0)
                if query is None:
                    continue
            queries.append(query)
            names.append(name)
            sources.append(f"{where}{lineno}")
    finally:
        if collecting:
            gc.enable()
    if errors and p.suffix.lower() in DATA_SUFFIXES and len(errors) > len(queries):
        errors.insert(0, QueryError(
            f"{len(errors):,} of {len(errors) + len(queries):,} lines are not queries: is this "
            "the data?", where=str(p),
            hint="commands take DATA first, then WORKLOAD (tessera answer DATA WORKLOAD ...)"))
    if errors:
        raise WorkloadError(errors)
    if not queries:
        raise QueryError(
            "the workload has no queries",
            where=str(p),
            hint="one WHERE clause per line, e.g. age >= 30",
        )
    return Workload.of(domain, queries, names, sources=sources, warnings=warnings)


def _load_structured(p: Path, text: str, domain: Domain) -> Workload:
    try:
        doc: Any = json.loads(text) if p.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as e:
        raise syntax_error(p, p.suffix[1:].upper().replace("YML", "YAML"), e,
                           QueryError) from None
    errors: list[TesseraError] = []
    families: list[Partition] = []
    if isinstance(doc, dict):
        unknown = set(doc) - {"queries", "prefixes", *FAMILY_KEYS}
        if unknown:
            raise QueryError(f"unknown key {sorted(unknown)[0]!r}", where=str(p),
                             hint="top-level keys are queries, prefixes, "
                             + ", ".join(FAMILY_KEYS))
        families = _load_families(p, doc, domain, errors)
    entries = doc.get("queries", []) if isinstance(doc, dict) else doc
    if not isinstance(entries, list) or not (entries or families or errors
                                             or (isinstance(doc, dict) and doc.get("prefixes"))):
        raise QueryError(
            "expected a non-empty list of queries (or structured families)",
            where=str(p),
            hint='{"queries": [{"name": "q1", "where": "age >= 30", "weight": 1}]} or '
            '{"marginals": [{"all": 2}]}',
        )
    queries: list[Query | BooleanClause] = []
    names: list[str] = []
    weights: list[float] = []
    sources: list[str] = []
    warnings: list[str] = []
    fast = FastParser(domain)
    for i, entry in enumerate(entries):
        where = f"{p}:queries[{i}]"
        if isinstance(entry, str):
            entry = {"where": entry}
        if not isinstance(entry, dict) or "where" not in entry:
            errors.append(
                QueryError(
                    "each query needs a 'where' clause",
                    where=where,
                    hint="{name: q1, where: 'age >= 30', weight: 1}",
                )
            )
            continue
        unknown = set(entry) - {"name", "where", "weight"}
        if unknown:
            errors.append(
                QueryError(
                    f"unknown key {sorted(unknown)[0]!r}",
                    where=where,
                    hint="keys are name, where, weight",
                )
            )
            continue
        try:
            weight = float(entry.get("weight", 1.0))
            if not (math.isfinite(weight) and weight >= 0):
                raise ValueError
        except (TypeError, ValueError):
            errors.append(
                QueryError(f"weight {entry.get('weight')!r} is not a number ≥ 0", where=where)
            )
            continue
        notes: list[str] = []
        try:  # (the fast path for simple conjunctions, identical predicates shared)
            queries.append(fast.parse(str(entry["where"]), notes))
        except QueryError as e:
            errors.append(e.located(where))
            continue
        warnings.extend(f"{where}: {note}" for note in notes)
        names.append(str(entry.get("name", entry["where"])))
        weights.append(weight)
        sources.append(where)
    prefix_block = doc.get("prefixes") or [] if isinstance(doc, dict) else []
    if not isinstance(prefix_block, list):
        errors.append(QueryError("'prefixes' must be a list", where=f"{p}:prefixes",
                                 hint="prefixes: [{attributes: [age]}]"))
        prefix_block = []
    for i, entry in enumerate(prefix_block):
        where = f"{p}:prefixes[{i}]"
        try:
            if not (isinstance(entry, dict) and isinstance(entry.get("attributes"), list)
                    and set(entry) <= {"attributes", "weight"}):
                raise QueryError("a prefix family is {attributes: [age], weight: 1}")
            weight = float(entry.get("weight", 1.0))
            if not (math.isfinite(weight) and weight >= 0):
                raise QueryError(f"weight {entry.get('weight')!r} is not a number ≥ 0")
            for name, q in prefix_queries(domain, entry["attributes"]):
                queries.append(q)
                names.append(name)
                weights.append(weight)
                sources.append(where)
        except TesseraError as e:
            errors.append(e.located(where))
        except (TypeError, ValueError) as e:
            errors.append(QueryError(f"malformed entry: {e}", where=where))
    if errors:
        raise WorkloadError(errors)
    return Workload.of(domain, queries, names, weights, sources, families, warnings)


#: The structured blocks of a YAML/JSON workload (module docstring).
FAMILY_KEYS = ("marginals", "cubes", "hierarchies", "partitions")
_FAMILY_FIELDS = {
    "marginals": {"attributes", "all", "over", "weight", "name"},
    "cubes": {"attributes", "min_order", "weight"},
    "hierarchies": {"attributes", "branching", "depth", "weight", "name"},
    "partitions": {"name", "kind", "attributes", "groups", "weight"},
}


def _load_families(p: Path, doc: dict[str, Any], domain: Domain,
                   errors: list[TesseraError]) -> list[Partition]:
    """The structured blocks, each entry checked; errors collected with their place."""
    out: list[Partition] = []
    for key in FAMILY_KEYS:
        block = doc.get(key)
        if block is None:
            continue
        if not isinstance(block, list):
            errors.append(QueryError(f"'{key}' must be a list", where=f"{p}:{key}"))
            continue
        for i, entry in enumerate(block):
            where = f"{p}:{key}[{i}]"
            try:
                out.extend(_family(key, entry, domain))
            except TesseraError as e:
                errors.append(e.located(where))
            except (TypeError, ValueError) as e:
                errors.append(QueryError(f"malformed entry: {e}", where=where,
                                         hint=f"keys: {', '.join(sorted(_FAMILY_FIELDS[key]))}"))
    return out


def _family(key: str, entry: Any, domain: Domain) -> tuple[Partition, ...]:
    if not isinstance(entry, dict):
        raise QueryError(f"each entry of '{key}' is a mapping",
                         hint=f"keys: {', '.join(sorted(_FAMILY_FIELDS[key]))}")
    unknown = set(entry) - _FAMILY_FIELDS[key]
    if unknown:
        raise QueryError(f"unknown key {sorted(unknown)[0]!r}",
                         hint=f"keys: {', '.join(sorted(_FAMILY_FIELDS[key]))}")
    weight = float(entry.get("weight", 1.0))
    if not (math.isfinite(weight) and weight >= 0):
        raise QueryError(f"weight {entry.get('weight')!r} is not a number ≥ 0")
    attrs = entry.get("attributes")
    if attrs is not None and not (isinstance(attrs, list) and all(isinstance(a, str)
                                                                  for a in attrs)):
        raise QueryError("'attributes' must be a list of attribute names")
    if key == "marginals":
        if ("all" in entry) == (attrs is not None):
            raise QueryError("a marginal gives either 'attributes' or 'all: k'",
                             hint="{attributes: [age, sex]} or {all: 2}")
        if attrs is not None:
            return (Partition.marginal(domain, attrs, weight, entry.get("name")),)
        return k_way_marginals(domain, int(entry["all"]), entry.get("over"), weight)
    if attrs is None:
        raise QueryError(f"an entry of '{key}' needs 'attributes'")
    if key == "cubes":
        return cube(domain, attrs, weight, int(entry.get("min_order", 0)))
    if key == "hierarchies":
        depth = entry.get("depth")
        return hierarchy(domain, attrs, int(entry.get("branching", 2)),
                         None if depth is None else int(depth), weight, entry.get("name"))
    return (Partition.from_dict(domain, entry | {"weight": weight}),)
