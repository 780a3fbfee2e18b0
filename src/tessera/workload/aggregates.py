"""Aggregate statements — COUNT, SUM, AVG with GROUP BY — as linear queries
(docs/theory.md §3.15, docs/aggregates.md).

A statement ``SELECT agg_1, …, agg_m FROM t WHERE φ GROUP BY a, b`` is, for every key
(u, v) of the *schema's* codes of a and b (never the data's), m aggregates over the rows
x with φ(x) ∧ x_a = u ∧ x_b = v. Each aggregate is one or two **linear queries**
f(D) = Σ_{x∈D} v(x), v(x) = q(x)·g(x):

* ``COUNT(*)``: g = 1; ``COUNT(x)``: g = [x is not NULL];
* ``SUM(x)``: g(x) = clamp(x, lo, hi), the value clamped to the schema's range (or to a
  stated ``CLAMP(x, lo, hi)``); a NULL adds 0 (SQL);
* ``AVG(x)`` = SUM(x) / COUNT(x): both measured, the ratio is post-processing.

Sums are over integer attributes or **measures** (data columns outside the schema, summed in
units of a public resolution 10^e: :mod:`tessera.schema.measures`), so every g(x) is an integer
and a sum is an integer: the discrete mechanisms add integer noise to it. The costs of a
measure's sums are computed on the *cost domain* (:attr:`AggregateWorkload.cost_domain`), the
schema with one virtual attribute per measure whose values are its clamps' breakpoints. A
linear query splits into disjoint **pieces** q ∧ (x_a = c), one per code c of the summed
attribute, on which g is the constant clamp(value(c)): :meth:`LinearQuery.pieces`, what the
data are counted on. For the cost, a sum is its nested **levels** q ∧ (g ≥ t), q ∧ (g ≤ −t)
(:meth:`LinearQuery.levels`), count queries with weights (:mod:`tessera.overlap.linear`).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import cached_property
from typing import Literal

from tessera.errors import QueryError
from tessera.schema.attributes import IntegerRange
from tessera.schema.domain import Domain
from tessera.schema.intervals import IntervalSet
from tessera.schema.measures import (
    MAX_UNITS,
    MeasureGrid,
    grid_points,
    numeric_value,
    resolution_exponent,
    to_units,
    unit_size,
)
from tessera.workload.clause import And, BooleanClause, clause_or_query
from tessera.workload.query import Predicate, Query

#: Most linear queries one aggregate workload expands to (groups × aggregates).
MAX_LINEAR_QUERIES = 100_000
#: Most (group, value) cells the sums of one workload are counted on (the exact sums are
#: Σ_v clamp(v)·count(q ∧ x = v)).
MAX_PIECES = 2_000_000

#: At least this many units in the largest |bound| of a measure summed at a resolution fixed
#: from outside (:func:`fixed_resolution`): three significant digits.
MIN_FIXED_UNITS = 1000

Kind = Literal["count", "sum", "avg"]
Role = Literal["count", "sum"]


@dataclass(frozen=True)
class Aggregate:
    """One aggregate of a statement: ``kind`` of ``attribute`` (None: ``COUNT(*)``), values
    clamped to [lo, hi] (sums and averages), printed as ``label``.

    A **measure** (``written`` set: the CLAMP bounds as written, decimal text) is a data column
    outside the schema; its ``lo``/``hi`` are in units of 10^``exponent``, fixed for the whole
    workload by :func:`resolve_measures` (None until then)."""

    kind: Kind
    attribute: str | None
    lo: int | None = None
    hi: int | None = None
    label: str = ""
    written: tuple[str, str] | None = None
    exponent: int | None = None

    @property
    def is_measure(self) -> bool:
        return self.written is not None

    @property
    def unit(self) -> Decimal:
        """What one unit of the sum is worth: 10^exponent for a measure, 1 otherwise."""
        return unit_size(self.exponent) if self.exponent is not None else Decimal(1)

    def roles(self) -> tuple[Role, ...]:
        """The linear queries this aggregate measures: a count, a sum, or both (AVG)."""
        if self.kind == "avg":
            return ("sum", "count")
        return (self.kind,)


@dataclass(frozen=True)
class Statement:
    """``SELECT aggregates FROM t WHERE where GROUP BY group_by`` (a bare WHERE line is one
    ``COUNT(*)`` without groups), with its ``name``, importance ``weight`` and ``source``
    (``file:line``)."""

    name: str
    where: Query | BooleanClause
    aggregates: tuple[Aggregate, ...]
    group_by: tuple[str, ...] = ()
    weight: float = 1.0
    source: str | None = None

    def keys(self, domain: Domain) -> list[tuple[int, ...]]:
        """Every group key: the product of the GROUP BY attributes' codes (the missing code
        included: SQL groups NULLs), from the schema alone."""
        return list(itertools.product(*(range(domain[a].size) for a in self.group_by)))

    def n_groups(self, domain: Domain) -> int:
        return math.prod(domain[a].size for a in self.group_by)

    def key_label(self, domain: Domain, key: tuple[int, ...]) -> str:
        """``a=u, b=v`` (empty without GROUP BY); NULL for the missing code."""
        parts = []
        for a, code in zip(self.group_by, key):
            attr = domain[a]
            parts.append(f"{a}=NULL" if code == attr.missing_code else f"{a}={attr.label(code)}")
        return ", ".join(parts)


@dataclass(frozen=True)
class LinearQuery:
    """f(D) = Σ_x q(x)·g(x): ``role`` count (g = 1 on ``query``) or sum (g = clamp of
    ``attribute`` to [lo, hi]); ``statement``, ``aggregate``, ``key`` say where it came from."""

    statement: int
    aggregate: int
    key: tuple[int, ...]
    role: Role
    query: Query | BooleanClause
    attribute: str | None = None
    lo: int | None = None
    hi: int | None = None
    weight: float = 1.0
    exponent: int | None = None

    @property
    def is_measure(self) -> bool:
        """Whether this sums a measure (in units of 10^exponent), not a schema attribute."""
        return self.exponent is not None

    def values(self, domain: Domain) -> list[tuple[int, int]]:
        """(code, g) for every code of the summed attribute with g ≠ 0: g = clamp(value).
        A measure's codes are its grid's breakpoints: ``domain`` is then the cost domain."""
        if self.role == "count":
            raise ValueError("a count has no values")
        attr = domain[self.attribute]  # type: ignore[index]
        assert isinstance(attr, (IntegerRange, MeasureGrid))
        assert self.lo is not None and self.hi is not None
        out = []
        for code in range(attr.n_values):  # (the missing code adds 0)
            g = min(max(numeric_value(attr, code), self.lo), self.hi)
            if g != 0:
                out.append((code, g))
        return out

    def bound(self, domain: Domain) -> int:
        """max_x |g(x)| over rows x that q can count: 1 for a count, max |clamp| for a sum."""
        if self.role == "count":
            return 1
        return max((abs(g) for _, g in self.values(domain)), default=0)

    def person_bound(self, substitute: bool = False) -> int:
        """D_q: the most one person moves this query when each person counts once per query
        (docs/theory.md §3.14, "Aggregates counting people"): 1 for a count; for a sum, whose
        term is clamp(T, lo, hi) of the person's total T (0 without a row in q),
        max(|lo|, |hi|) under add/remove and max(hi, 0) − min(lo, 0) under substitution (the
        term moves between values of {0} ∪ [lo, hi])."""
        if self.role == "count":
            return 1
        assert self.lo is not None and self.hi is not None
        if substitute:
            return max(self.hi, 0) - min(self.lo, 0)
        return max(abs(self.lo), abs(self.hi))

    def pieces(self, domain: Domain) -> list[tuple[Query | BooleanClause, int]]:
        """The disjoint pieces (q ∧ x_a = c, g_c) whose sum is f: f = Σ_c g_c·count(piece c).
        A count is its own single piece of value 1."""
        if self.role == "count":
            return [(self.query, 1)]
        assert self.attribute is not None
        return [(restrict(domain, self.query, {self.attribute: IntervalSet.points([c])}), g)
                for c, g in self.values(domain)]


    def levels(self, domain: Domain, thresholds: tuple[Sequence[int], Sequence[int]] | None
               = None) -> list[tuple[Query | BooleanClause, int, int]]:
        """The layer-cake pieces (q ∧ g ≥ t, s, t) for the positive thresholds t and
        (q ∧ g ≤ −t, s, t) for the negative ones, s the threshold before t (0 for the first):
        a row of contribution a lies in the pieces of the thresholds ≤ a⁺ and ≤ a⁻, so with
        every threshold 1, 2, … (the default) |a| = Σ over its pieces of t − s
        (docs/theory.md §3.15). ``thresholds`` = (positive, negative), increasing, each ≥ 1.
        A count is its own single level (q, 0, 1)."""
        if self.role == "count":
            return [(self.query, 0, 1)]
        assert self.attribute is not None
        values = self.values(domain)  # g is non-decreasing in the code: each level is a range
        out: list[tuple[Query | BooleanClause, int, int]] = []
        positive = [(c, g) for c, g in values if g > 0]
        negative = [(c, -g) for c, g in values if g < 0]
        for side, (part, tail) in enumerate(((positive, True), (negative, False))):
            if not part:
                continue
            top = max(g for _, g in part)
            steps = (range(1, top + 1) if thresholds is None
                     else [t for t in thresholds[side] if 1 <= t <= top])
            first, last = part[0][0], part[-1][0]
            k = 0 if tail else len(part) - 1
            before = 0
            for t in steps:
                if tail:  # codes c ≥ the first with g ≥ t
                    while part[k][1] < t:
                        k += 1
                    cover = IntervalSet.range(part[k][0], last + 1)
                else:  # codes c ≤ the last with −g ≥ t
                    while part[k][1] < t:
                        k -= 1
                    cover = IntervalSet.range(first, part[k][0] + 1)
                out.append((restrict(domain, self.query, {self.attribute: cover}), before, t))
                before = t
        return out


def restrict(domain: Domain, q: Query | BooleanClause,
             coverages: dict[str, IntervalSet]) -> Query | BooleanClause:
    """q ∧ ⋀_a (x_a ∈ coverages[a])."""
    if isinstance(q, Query):
        cov = {p.attribute: p.coverage for p in q.predicates}
        for a, c in coverages.items():
            cov[a] = cov[a] & c if a in cov else c
        return Query.conjunction(domain, cov)
    atoms = tuple(Predicate(a, c) for a, c in coverages.items())
    return clause_or_query(domain, And((q.root, *atoms)))


@dataclass(frozen=True)
class AggregateWorkload:
    """Aggregate statements over one domain, and the linear queries they expand to (in
    statement, key, aggregate, role order). The measures' bounds are put in units on
    construction (:func:`resolve_measures`)."""

    domain: Domain
    statements: tuple[Statement, ...]
    table: str | None = None
    #: (measure, e) pairs: resolutions fixed from outside (a ledger's, :meth:`at_resolutions`)
    #: instead of each measure's own (:func:`resolve_measures`)
    resolutions: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "statements",
                           resolve_measures(self.statements, dict(self.resolutions)))

    def at_resolutions(self, fixed: Mapping[str, int]) -> AggregateWorkload:
        """This workload with the measures of ``fixed`` summed in units of 10^fixed[m] instead
        of their own resolution (the public bounds are the same; only the rounding of a row's
        value to units changes). Refused with a :class:`QueryError` (:func:`fixed_resolution`)
        when the bounds are not whole units, or are more than 10^7 or fewer than 10^3 of
        them."""
        pairs = dict(self.resolutions) | {m: int(e) for m, e in fixed.items()
                                          if m in self.measures}
        return dataclasses.replace(self, resolutions=tuple(sorted(pairs.items())))

    @cached_property
    def measures(self) -> dict[str, int]:
        """Every measure summed, with its resolution exponent e (units of 10^e)."""
        return {a.attribute: a.exponent for st in self.statements for a in st.aggregates
                if a.is_measure and a.attribute is not None and a.exponent is not None}

    @cached_property
    def cost_domain(self) -> Domain:
        """The schema and one :class:`~tessera.schema.measures.MeasureGrid` per measure: its
        clamps' breakpoints in units (docs/theory.md §3.15, "Measures"); the domain the costs
        of the linear queries are computed on (:func:`measure_cost_domain`). The schema itself
        without measures."""
        if not self.measures:
            return self.domain
        return measure_cost_domain(self.domain, self.linear)

    @cached_property
    def linear(self) -> tuple[LinearQuery, ...]:
        """The linear queries (:func:`expand`), built once."""
        return expand(self.domain, self.statements)

    def labels(self) -> list[tuple[str, str, str, str]]:
        """(statement, group, aggregate, role) of every linear query."""
        out = []
        for lq in self.linear:
            st = self.statements[lq.statement]
            out.append((st.name, st.key_label(self.domain, lq.key),
                        st.aggregates[lq.aggregate].label, lq.role))
        return out


def expand(domain: Domain, statements: Sequence[Statement],
           max_queries: int = MAX_LINEAR_QUERIES) -> tuple[LinearQuery, ...]:
    """Every statement's linear queries: one per group key, aggregate and role (AVG: a sum and
    a count). Refused above ``max_queries``, before anything is built."""
    total = sum(st.n_groups(domain) * sum(len(a.roles()) for a in st.aggregates)
                for st in statements)
    if total > max_queries:
        worst = max(statements, key=lambda s: s.n_groups(domain))
        raise QueryError(
            f"the aggregates expand to {total:,} linear queries, above the limit of "
            f"{max_queries:,} ({worst.source or worst.name}: {worst.n_groups(domain):,} groups)",
            hint="group by fewer or coarser attributes (a binned attribute with fewer bins), "
                 "or restrict the WHERE clause")
    cells = sum(st.n_groups(domain) * len(a.roles()) * domain[a.attribute].size
                for st in statements for a in st.aggregates if a.kind != "count"
                and a.attribute is not None and not a.is_measure)
    if cells > MAX_PIECES:
        raise QueryError(
            f"the sums are counted value by value: {cells:,} (group, value) cells, above the "
            f"limit of {MAX_PIECES:,}",
            hint="narrow the summed attributes' ranges in the schema (min, max), or group by "
                 "fewer attributes")
    out: list[LinearQuery] = []
    for i, st in enumerate(statements):
        for key in st.keys(domain):
            q = (restrict(domain, st.where, {a: IntervalSet.points([c])
                                            for a, c in zip(st.group_by, key)})
                 if st.group_by else st.where)
            for j, agg in enumerate(st.aggregates):
                for role in agg.roles():
                    query = q
                    if agg.is_measure:  # a measure has no NULLs (refused when read)
                        out.append(LinearQuery(i, j, key, role, query,
                                               agg.attribute if role == "sum" else None,
                                               agg.lo if role == "sum" else None,
                                               agg.hi if role == "sum" else None, st.weight,
                                               agg.exponent if role == "sum" else None))
                        continue
                    if agg.attribute is not None and domain[agg.attribute].missing:
                        # COUNT(x), AVG(x): the rows where x is not NULL
                        query = restrict(domain, q, {agg.attribute:
                                                     domain[agg.attribute].present()})
                    if role == "count":
                        out.append(LinearQuery(i, j, key, "count", query, weight=st.weight))
                    else:
                        out.append(LinearQuery(i, j, key, "sum", query, agg.attribute,
                                               agg.lo, agg.hi, st.weight))
    return tuple(out)


def resolve_measures(statements: Sequence[Statement],
                     fixed: Mapping[str, int] | None = None) -> tuple[Statement, ...]:
    """The statements with every measure's CLAMP bounds in units of its resolution 10^e, one
    e per measure for the whole workload (:func:`tessera.schema.measures.resolution_exponent`
    of all its bounds), so that one grid of breakpoints serves every statement.

    ``fixed``: e for some measures, given (a ledger's resolution, docs/theory.md §3.15
    "Measures across releases"): accepted when every bound is a multiple of 10^e and the
    largest is 10^3 to 10^7 units of it (:func:`fixed_resolution`); else a
    :class:`QueryError`."""
    written: dict[str, list[Decimal]] = {}
    for st in statements:
        for a in st.aggregates:
            if a.is_measure and a.attribute is not None and a.written is not None:
                written.setdefault(a.attribute, []).extend(Decimal(b) for b in a.written)
    if not written:
        return tuple(statements)
    exps = {}
    for name, bounds in written.items():
        first = next(st for st in statements for a in st.aggregates if a.attribute == name)
        try:
            own = resolution_exponent(bounds)
        except QueryError as e:
            raise e.located(first.source or first.name) from None
        exps[name] = own
        if fixed and name in fixed and fixed[name] != own:
            exps[name] = fixed_resolution(name, bounds, own, fixed[name])
    out = []
    for st in statements:
        aggs = []
        for a in st.aggregates:
            if a.is_measure and a.attribute is not None and a.written is not None:
                e = exps[a.attribute]
                a = dataclasses.replace(a, lo=to_units(Decimal(a.written[0]), e),
                                        hi=to_units(Decimal(a.written[1]), e), exponent=e)
            aggs.append(a)
        out.append(dataclasses.replace(st, aggregates=tuple(aggs)))
    return tuple(out)


def fixed_resolution(name: str, bounds: Sequence[Decimal], own: int, e: int) -> int:
    """e, checked as a resolution of measure ``name`` (own resolution 10^``own``:
    :func:`resolve_measures`): every bound a multiple of 10^e, and the largest |bound| between
    :data:`MIN_FIXED_UNITS` and :data:`~tessera.schema.measures.MAX_UNITS` units of it (at
    least three significant digits: a coarser unit would round the values away)."""
    top = max(abs(b) for b in bounds)
    written = ", ".join(str(b) for b in bounds)
    base = f"measure {name!r} cannot be summed in units of 10^{e} (its own unit is 10^{own})"
    if any(b.scaleb(-e) != b.scaleb(-e).to_integral_value() for b in bounds):
        raise QueryError(f"{base}: its CLAMP bounds ({written}) are not multiples of 10^{e}")
    if top.scaleb(-e) > MAX_UNITS:
        raise QueryError(f"{base}: its CLAMP bounds ({written}) would need more than "
                         f"{MAX_UNITS:,} units of it")
    if 0 < top.scaleb(-e) < MIN_FIXED_UNITS:
        raise QueryError(f"{base}: its CLAMP bounds ({written}) would be fewer than "
                         f"{MIN_FIXED_UNITS:,} units of it, too coarse a rounding")
    return e


def measure_cost_domain(domain: Domain, linear: Sequence[LinearQuery]) -> Domain:
    """The schema ``domain`` and one :class:`~tessera.schema.measures.MeasureGrid` per measure
    that ``linear`` sums: its points are every clamp bound of those sums (in units) and 0 when
    it lies between them (:func:`~tessera.schema.measures.grid_points`). The linear queries of
    several releases together give the *merged* grid, the union of their breakpoints, on which
    the Lemma of docs/theory.md §3.15 ("Measures across releases") keeps their joint cost
    exact. Every sum of one measure must be in one unit (else a :class:`QueryError`: their
    values would be rounded differently and the grid would not stand for one real value)."""
    bounds: dict[str, list[tuple[int, int]]] = {}
    exps: dict[str, int] = {}
    for lq in linear:
        if not lq.is_measure:
            continue
        assert lq.attribute is not None and lq.lo is not None and lq.hi is not None
        assert lq.exponent is not None
        if exps.setdefault(lq.attribute, lq.exponent) != lq.exponent:
            raise QueryError(f"measure {lq.attribute!r} is summed in units of "
                             f"10^{exps[lq.attribute]} and of 10^{lq.exponent}: one unit per "
                             "measure")
        bounds.setdefault(lq.attribute, []).append((lq.lo, lq.hi))
    if not bounds:
        return domain
    grids = [MeasureGrid(name=name, points=grid_points(b), exponent=exps[name])
             for name, b in bounds.items()]
    return Domain((*domain.attributes, *grids))
