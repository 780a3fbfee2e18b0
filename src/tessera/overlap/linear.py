"""The weighted overlap of linear queries — counts and clamped sums — as the weighted overlap
of count pieces (docs/theory.md §3.15).

A linear query f_q(D) = Σ_{x∈D} a_q(x), a_q(x) = q(x)·g_q(x) (g_q(x) = clamp of the value of
x_a, an integer; a count has g_q = 1), is the sum of its **levels**: the count pieces
L⁺_t = q ∧ (g_q ≥ t) and L⁻_t = q ∧ (g_q ≤ −t), t = 1, 2, …, so that a_q(x)⁺ and a_q(x)⁻ are the
numbers of levels holding x (a layer cake). Give level t the weight c_q·w_t with w_t = 1 (p = 1,
pure ε) or w_t = 2t − 1 (p = 2, ρ-zCDP: Σ_{t≤n} (2t − 1) = n²). Then

* **add/remove** (exact): Σ_{levels ∋ x} weight = Σ_q c_q |a_q(x)|^p;
* **substitution, p = 1** (exact): the levels holding x or y but not both number
  |a⁺(x) − a⁺(y)| + |a⁻(x) − a⁻(y)| = |a(x) − a(y)|, so the pair score of the levels is
  Σ_q c_q |a_q(x) − a_q(y)|;
* **substitution, p = 2** (upper bound): the levels give |a⁺(x)² − a⁺(y)²| + |a⁻(x)² − a⁻(y)²|,
  which is ≥ (a(x) − a(y))² when a(x), a(y) do not have opposite signs and ≥ half of it
  otherwise: the weights of a sum whose clamped values take both signs are doubled. The
  exact value, max_{x,y} Σ_q c_q (a_q(x) − a_q(y))², is computed by the pair program of
  :mod:`tessera.overlap.linear_pairs` (over the cells' ends); the levels are its fallback
  beyond that program's state limit.

So the max-plus program of §3.8, its solvers and witness, the ledger's exact rationals and
``tessera verify`` apply unchanged to the levels (:func:`pieces`).

**Cells (add/remove, far fewer pieces).** Cut each summed attribute's codes into *cells*:
maximal runs on which every linear query's condition on that attribute is constant, no clamp
bound lies strictly inside, and the value keeps one sign. On a cell each |g_q| is constant or
|value|, so all of them are largest at the same end of the cell (the one of largest |value|),
which is a record. The pieces q ∧ (x_a ∈ cell) weighing c_q·max_cell |g_q|^p therefore have
the same maximum weighted overlap as the levels — exact, attained by that record — with one
piece per cell instead of one per unit of the clamp. Under substitution two records of one
cell would look alike to the cells, so there merged levels are used.

**Merged levels (substitution).** Keep only the levels whose thresholds are values of |g_q| at
cell ends, a level of threshold t after s weighing t − s (p = 1) or t² − s² (p = 2). A row x
then scores as the row x' at the end of its cell nearest to 0 (same conditions, |g_q(x')| =
|g_q(x)| rounded down to a threshold, for every q at once), so a pair scores what a pair of
real rows scores under the full levels; and the pair maximum of the full levels is attained
at cell ends (on a cell each term is a convex function of the value: |affine| or its square),
where merged and full levels agree. So the merged levels have the full levels' maximum:
exact for p = 1, the same upper bound for p = 2 (the pair program's fallback), with a few
pieces per cell.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tessera.errors import QueryError
from tessera.privacy import Definition, Neighbours
from tessera.schema.domain import Domain
from tessera.schema.intervals import IntervalSet
from tessera.schema.measures import is_summable, numeric_value, value_code
from tessera.workload.aggregates import LinearQuery, restrict
from tessera.workload.clause import BooleanClause
from tessera.workload.query import Query


@dataclass(frozen=True)
class Pieces:
    """The levels of linear queries: ``queries[j]`` belongs to linear query ``owner[j]`` and
    weighs ``factor[j]`` = 1 (p = 1) or 2t − 1 (p = 2; ×2 for a two-signed sum under zCDP
    substitution) per unit of its owner's cost."""

    queries: tuple[Query | BooleanClause, ...]
    owner: npt.NDArray[np.int64]
    factor: npt.NDArray[np.int64]

    def costs(self, linear_costs: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Piece costs c_{owner}·factor, rounded up: never below the exact product (the
        factors are integers; one product rounds by at most half an ulp)."""
        c = np.asarray(linear_costs, dtype=np.float64)[self.owner] * self.factor
        up = np.nextafter(c, np.inf)
        return np.where(c > 0, up, 0.0)


def power(definition: Definition | str) -> int:
    """p: 1 under pure ε (costs add |Δ|), 2 under ρ-zCDP (costs add Δ²)."""
    d = Definition.parse(definition)
    if d is Definition.PURE:
        return 1
    if d is Definition.ZCDP:
        return 2
    raise QueryError(f"linear queries are costed in pure ε or ρ-zCDP, not {d.label}")


def pieces(domain: Domain, linear: Sequence[LinearQuery], definition: Definition | str,
           neighbours: Neighbours | str = Neighbours.ADD_REMOVE) -> Pieces:
    """Every linear query's levels with their factors (module docstring)."""
    p = power(definition)
    n = Neighbours.parse(neighbours)
    queries: list[Query | BooleanClause] = []
    owner: list[int] = []
    factor: list[int] = []
    if n is Neighbours.ADD_REMOVE:
        cuts = cell_bounds(domain, linear)
        for i, lq in enumerate(linear):
            for q, f in cell_pieces(domain, lq, cuts, p):
                queries.append(q)
                owner.append(i)
                factor.append(f)
        return Pieces(tuple(queries), np.array(owner, dtype=np.int64),
                      np.array(factor, dtype=np.int64))
    cuts = cell_bounds(domain, linear)
    for i, lq in enumerate(linear):
        doubled = p == 2 and n is Neighbours.SUBSTITUTE and two_signed(domain, lq)
        steps = None if lq.role == "count" else cell_thresholds(domain, lq, cuts)
        for q, before, t in lq.levels(domain, steps):
            if q.is_contradiction():
                continue
            queries.append(q)
            owner.append(i)
            factor.append((t - before if p == 1 else t * t - before * before)
                          * (2 if doubled else 1))
    return Pieces(tuple(queries), np.array(owner, dtype=np.int64),
                  np.array(factor, dtype=np.int64))


def two_signed(domain: Domain, lq: LinearQuery) -> bool:
    """Whether a sum's clamped values take both signs (min g < 0 < max g over the domain): the
    sums whose levels are doubled under ρ-zCDP substitution (module docstring); a count never.
    """
    if lq.role != "sum":
        return False
    values = [g for _, g in lq.values(domain)]
    return min(values, default=0) < 0 < max(values, default=0)


def condition_atoms(q: Query | BooleanClause, name: str) -> list[IntervalSet]:
    """The coverages of a condition's atoms on attribute ``name``: a conjunction's one
    predicate (none when it does not restrict ``name``), every atom of a clause."""
    if isinstance(q, Query):
        cov = q.predicate(name)
        return [] if cov is None else [cov]
    return [a.coverage for a in q.atoms_on(name)]


def cell_bounds(domain: Domain, linear: Sequence[LinearQuery]) -> dict[str, list[int]]:
    """For each summed attribute, the sorted codes where a cell starts (module docstring): the
    ends of every condition's intervals on it, the codes of every clamp bound (a cell ends at
    lo and starts at hi), and the codes of the values −1, 0 and 1 (0 alone). A measure's
    codes are its grid's breakpoints (``domain``: the cost domain), each a cell of its own."""
    out: dict[str, list[int]] = {}
    for a in {lq.attribute for lq in linear if lq.role == "sum"}:
        assert a is not None
        attr = domain[a]
        assert is_summable(attr)
        cuts = {0, attr.n_values}
        for lq in linear:
            for cov in condition_atoms(lq.query, a):
                for lo, hi in cov.spans:
                    cuts.update((lo, hi))
            if lq.role == "sum" and lq.attribute == a:
                assert lq.lo is not None and lq.hi is not None
                lo_c, hi_c = value_code(attr, lq.lo), value_code(attr, lq.hi)
                cuts.update((lo_c, lo_c + 1, hi_c, hi_c + 1))
        zero = value_code(attr, 0)  # the value 0 alone
        cuts.update((zero, value_code(attr, 1)))
        out[a] = sorted(c for c in cuts if 0 <= c <= attr.n_values)
    return out


def attaining(domain: Domain, linear: Sequence[LinearQuery], x: Sequence[int]) -> tuple[int, ...]:
    """The record a witness of the cells (add/remove) stands for: on each summed attribute, the
    end of x's cell where |value| is largest. Every |g_q| is largest there (module docstring,
    "Cells"), and the conditions are the same on the whole cell, so that record's Σ_q c_q
    |a_q|^p is the cell pieces' score of x: the solver may return any point of the cell, this
    one attains the bound.

    >>> from tessera.schema.domain import Domain
    >>> from tessera.workload.aggregates import AggregateWorkload
    >>> from tessera.workload.select import parse_statement
    >>> dom = Domain.from_dict({"attributes": {"v": {"type": "integer", "min": -3, "max": 4}}})
    >>> w = AggregateWorkload(dom, (parse_statement("SELECT SUM(v) FROM t WHERE v < 3", dom)[0],))
    >>> attaining(dom, w.linear, (4,))  # v = 1 lies in the cell {1, 2}: v = 2 attains it
    (5,)
    """
    out = list(x)
    for name, bounds in cell_bounds(domain, linear).items():
        i = domain.index(name)
        attr = domain[name]
        code = out[i]
        if not 0 <= code < attr.n_values:  # the missing value: a cell of its own
            continue
        k = bisect.bisect_right(bounds, code)
        start, stop = bounds[k - 1], bounds[k]
        ends = (start, stop - 1)
        out[i] = max(ends, key=lambda c: abs(numeric_value(attr, c)))
    return tuple(out)


def cell_thresholds(domain: Domain, lq: LinearQuery,
                    cuts: dict[str, list[int]]) -> tuple[list[int], list[int]]:
    """The thresholds of a sum's merged levels: |g| at the ends of every cell, positive and
    negative apart (module docstring, "Merged levels")."""
    assert lq.attribute is not None and lq.lo is not None and lq.hi is not None
    attr = domain[lq.attribute]
    bounds = cuts[lq.attribute]
    ends = {c for start, stop in zip(bounds, bounds[1:]) for c in (start, stop - 1)}
    gs = {min(max(numeric_value(attr, c), lq.lo), lq.hi) for c in ends}
    return sorted(g for g in gs if g > 0), sorted(-g for g in gs if g < 0)


def cell_pieces(domain: Domain, lq: LinearQuery, cuts: dict[str, list[int]],
                p: int) -> list[tuple[Query | BooleanClause, int]]:
    """(q ∧ x_a ∈ cell, max over the cell of |g|^p) for every cell where g ≠ 0; a count is
    its own piece of factor 1."""
    if lq.role == "count":
        return [] if lq.query.is_contradiction() else [(lq.query, 1)]
    assert lq.attribute is not None and lq.lo is not None and lq.hi is not None
    attr = domain[lq.attribute]
    bounds = cuts[lq.attribute]
    out = []
    for start, stop in zip(bounds, bounds[1:]):
        top = max(abs(min(max(numeric_value(attr, c), lq.lo), lq.hi)) for c in (start, stop - 1))
        if top == 0:
            continue
        q = restrict(domain, lq.query, {lq.attribute: IntervalSet.range(start, stop)})
        if not q.is_contradiction():
            out.append((q, top**p))
    return out


def sensitivities(domain: Domain, linear: Sequence[LinearQuery]) -> npt.NDArray[np.int64]:
    """max_x |g_q(x)| of every linear query: 1 for a count, the largest |clamp| for a sum."""
    return np.array([lq.bound(domain) for lq in linear], dtype=np.int64)
