"""The exact ρ-zCDP cost of linear queries under substitution: a program over pairs of records
(docs/theory.md §3.15).

Under substitution one record x becomes y, so the linear queries f_q(D) = Σ_{x∈D} a_q(x)
(:class:`~tessera.workload.aggregates.LinearQuery`, a_q(x) = q(x)·g_q(x)) change by
a_q(y) − a_q(x), and their ρ-zCDP cost per unit of the weights c_q is

    S_sub = max_{x, y} Σ_q c_q (a_q(x) − a_q(y))².

The count pieces of :mod:`tessera.overlap.linear` bound it from above only (their pair score
is |a⁺(x)² − a⁺(y)²| + |a⁻(x)² − a⁻(y)²| per unit, with doubled weights for two-signed sums).
This module computes it exactly, from the distinct **contribution vectors**
v(x) = (a_q(x))_q:

1. **Few codes per attribute** (:func:`representative_codes`). Codes between two consecutive
   breakpoints of the conditions on an attribute are alike: every condition, so every a_q, is
   the same on them. On a *cell* of a summed attribute (:func:`~tessera.overlap.linear.
   cell_bounds`: every condition constant, no clamp bound inside, one sign) each a_q is a
   constant or an affine function of the value, so with everything else of x and y fixed the
   pair score Σ_q c_q (a_q(x) − a_q(y))² is a convex function of x's value (a sum of squares of
   affine functions), and its maximum over the cell's integer values is at one of the cell's
   two ends. Replacing, one attribute at a time, x's and then y's code by the better
   representative never lowers the score, so a maximising pair exists among records whose
   codes are all representatives: one code per run between breakpoints, both ends of each cell
   of a summed attribute, and the missing code (a_q = 0 for the sums of the attribute; the
   conditions say whether it counts).
2. **Distinct vectors** (:func:`contribution_vectors`). When every condition is a conjunction,
   a_q(x) is a product over attributes of [x_a ∈ φ_{q,a}] times g_q on the summed attribute,
   so the vectors are built attribute by attribute, keeping the distinct partial products
   (int64: each query sums one attribute, so every entry stays within its clamp) and one
   record per vector; beyond ``max_states`` the program is not tractable
   (:class:`~tessera.errors.ResourceError`). Conditions with a disjunction or a negation
   (:class:`~tessera.workload.clause.BooleanClause`) are evaluated on the grid of
   representative codes, when it has at most ``max_grid`` records.
3. **The pair maximum** (:func:`pair_maximum`) over integer weights W_q of any size:
   max_{i,j} own_i + own_j − 2 Σ_q W_q v_iq v_jq, own_i = Σ_q W_q v_iq², in blocks of bounded
   memory, in exact integer arithmetic: the weights are cut into limbs of b bits small enough
   that each limb's scores are exact in int64 (every partial sum below 2^62), and the limbs'
   scores are added up digit by digit, the maximum found digit by digit from the most
   significant one. No floating point, no rounding.

>>> from tessera.schema.domain import Domain
>>> from tessera.workload.aggregates import AggregateWorkload
>>> from tessera.workload.select import parse_statement
>>> dom = Domain.from_dict({"attributes": {"v": {"type": "integer", "min": -3, "max": 4}}})
>>> w = AggregateWorkload(dom, (parse_statement("SELECT SUM(v) FROM t", dom)[0],))
>>> best = exact_pair_cost(dom, w.linear, [1])
>>> best.value, best.x, best.y  # v = −3 (code 0) and v = 4 (code 7): (4 + 3)² = 49
(49, (0,), (7,))
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from tessera.errors import ResourceError
from tessera.overlap.linear import cell_bounds, condition_atoms
from tessera.schema.domain import Domain
from tessera.schema.measures import numeric_value
from tessera.workload.aggregates import LinearQuery
from tessera.workload.query import Query

#: Distinct (partial) contribution vectors kept at most: the pair maximum is quadratic in them.
MAX_VECTORS = 10_000
#: Records of the grid of representative codes evaluated at most when a condition is a clause.
MAX_GRID = 200_000
#: Every partial sum of one limb of the pair maximum stays below this: float64 is exact.
FLOAT_LIMIT = 2**51
#: The same for contributions too large for float64 limbs: int64 is exact.
PAIR_LIMIT = 2**62
#: Entries of one block of the pair maximum (rows × vectors).
BLOCK = 2**19


@dataclass(frozen=True)
class ContributionVectors:
    """Every distinct v(x) = (a_q(x))_q over the representative records, as rows of
    ``vectors`` (n, m); ``points[i]`` (a record, one code per attribute) realises row i."""

    vectors: npt.NDArray[np.int64]
    points: npt.NDArray[np.int64]


@dataclass(frozen=True)
class PairMaximum:
    """max_{x, y} Σ_q W_q (a_q(x) − a_q(y))² (``value``, an exact integer) and a pair of records
    attaining it; ``n_vectors`` distinct contribution vectors were compared."""

    value: int
    x: tuple[int, ...]
    y: tuple[int, ...]
    n_vectors: int


def clamped_values(domain: Domain, lq: LinearQuery) -> npt.NDArray[np.int64]:
    """g_q of every code of a sum's attribute (the missing code, if any, last: 0)."""
    assert lq.attribute is not None and lq.lo is not None and lq.hi is not None
    attr = domain[lq.attribute]
    g = [min(max(numeric_value(attr, c), lq.lo), lq.hi) for c in range(attr.n_values)]
    return np.array(g + [0] * (attr.size - attr.n_values), dtype=np.int64)


def contributions(domain: Domain, linear: Sequence[LinearQuery],
                  points: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """a_q(x) for every record x (rows of codes, shape (n, len(domain))) and linear query q
    (columns), evaluated directly: the condition, times the clamped value for a sum."""
    pts = np.asarray(points, dtype=np.int64).reshape(-1, len(domain))
    out = np.zeros((len(pts), len(linear)), dtype=np.int64)
    for j, lq in enumerate(linear):
        hit = lq.query.evaluate(domain, pts).astype(np.int64)
        if lq.role == "count":
            out[:, j] = hit
        else:
            assert lq.attribute is not None
            out[:, j] = hit * clamped_values(domain, lq)[pts[:, domain.index(lq.attribute)]]
    return out


def change_cost(domain: Domain, linear: Sequence[LinearQuery], weights: Sequence[Fraction],
                x: Sequence[int], y: Sequence[int] | None = None,
                ) -> tuple[Fraction, tuple[int, ...]]:
    """(Σ_q W_q (a_q(x) − a_q(y))², the linear queries that change) of the record x becoming
    y — ``y`` None: x added or removed (a_q(y) = 0) — evaluated directly, in the weights' own
    exact arithmetic (integers or rationals)."""
    rows = [list(x)] if y is None else [list(x), list(y)]
    a, *rest = contributions(domain, linear, rows).tolist()
    b = rest[0] if rest else [0] * len(a)
    changed = tuple(j for j, (u, v) in enumerate(zip(a, b)) if u != v)
    return sum((Fraction(weights[j]) * (a[j] - b[j]) ** 2 for j in changed), Fraction(0)), changed


def mentioned(linear: Sequence[LinearQuery]) -> set[str]:
    """The attributes some condition restricts or some sum sums."""
    names: set[str] = set()
    for lq in linear:
        q = lq.query
        if isinstance(q, Query):
            names.update(p.attribute for p in q.predicates)
        else:
            names.update(q.scope)
        if lq.role == "sum":
            assert lq.attribute is not None
            names.add(lq.attribute)
    return names


def representative_codes(domain: Domain, linear: Sequence[LinearQuery]) -> dict[str, list[int]]:
    """For every attribute some linear query reads, the codes a maximising pair needs (module
    docstring, 1.): the first code of every run between the conditions' breakpoints; on a
    summed attribute both ends of every cell; the missing code on its own."""
    cells = cell_bounds(domain, linear)
    out: dict[str, list[int]] = {}
    for name in sorted(mentioned(linear), key=domain.index):
        attr = domain[name]
        cuts = {0, attr.n_values, attr.size}
        for lq in linear:
            for cov in condition_atoms(lq.query, name):
                for lo, hi in cov.spans:
                    cuts.update((lo, hi))
        cuts.update(cells.get(name, ()))
        bounds = sorted(c for c in cuts if 0 <= c <= attr.size)
        codes: set[int] = set()
        for start, stop in zip(bounds, bounds[1:]):
            codes.add(start)
            if name in cells and stop <= attr.n_values:  # a cell: its other end too
                codes.add(stop - 1)
        out[name] = sorted(codes)
    return out


def contribution_vectors(domain: Domain, linear: Sequence[LinearQuery], *,
                         max_states: int = MAX_VECTORS,
                         max_grid: int = MAX_GRID) -> ContributionVectors:
    """The distinct contribution vectors of the representative records (module docstring, 2.);
    :class:`~tessera.errors.ResourceError` beyond ``max_states`` vectors (or, with a clause
    condition, ``max_grid`` records). Candidates are made and deduplicated in chunks of at most
    :data:`BLOCK` entries, so memory stays within (``max_states`` + a chunk) vectors."""
    m = len(linear)
    reps = representative_codes(domain, linear)
    base = np.zeros(len(domain), dtype=np.int64)
    kept = Distinct(m, len(domain), max_states)
    if any(not isinstance(lq.query, Query) for lq in linear):
        size = math.prod(len(c) for c in reps.values())
        if size > max_grid:
            raise ResourceError(f"more than {max_grid} representative records to evaluate")
        grid = itertools.product(*reps.values())
        at = [domain.index(name) for name in reps]
        chunk = max(1, BLOCK // max(m, 1))
        while rows := list(itertools.islice(grid, chunk)):
            pts = np.tile(base, (len(rows), 1))
            if at:
                pts[:, at] = np.array(rows, dtype=np.int64).reshape(len(rows), len(at))
            kept.add(contributions(domain, linear, pts), pts)
        return ContributionVectors(kept.vectors, kept.points)
    kept.add(np.array([[0 if lq.query.is_contradiction() else 1 for lq in linear]],
                      dtype=np.int64).reshape(1, m), base[None, :].copy())
    for name, codes in reps.items():
        at = domain.index(name)
        c = np.array(codes, dtype=np.int64)
        factor = np.ones((len(codes), m), dtype=np.int64)  # [code ∈ φ_q] · (g_q(code) | 1)
        for j, lq in enumerate(linear):
            assert isinstance(lq.query, Query)
            cov = lq.query.predicate(name)
            if cov is not None:
                factor[:, j] = cov.contains_array(c)
            if lq.role == "sum" and lq.attribute == name:
                factor[:, j] *= clamped_values(domain, lq)[c]
        states, points = kept.vectors, kept.points
        kept = Distinct(m, len(domain), max_states)
        chunk = max(1, BLOCK // max(len(codes) * m, 1))
        for s in range(0, len(states), chunk):
            part = states[s:s + chunk]
            new = (part[:, None, :] * factor[None, :, :]).reshape(-1, m)
            new_points = np.repeat(points[s:s + chunk], len(codes), axis=0)
            new_points[:, at] = np.tile(c, len(part))
            kept.add(new, new_points)
    return ContributionVectors(kept.vectors, kept.points)


class Distinct:
    """Distinct vectors (rows) with one point each, at most ``max_states`` of them
    (:class:`~tessera.errors.ResourceError` beyond)."""

    def __init__(self, m: int, d: int, max_states: int) -> None:
        self.vectors = np.zeros((0, m), dtype=np.int64)
        self.points = np.zeros((0, d), dtype=np.int64)
        self.max_states = max_states

    def add(self, vectors: npt.NDArray[np.int64], points: npt.NDArray[np.int64]) -> None:
        both = np.concatenate([self.vectors, vectors])
        _, first = np.unique(both, axis=0, return_index=True)
        if len(first) > self.max_states:
            raise ResourceError(f"more than {self.max_states} distinct contribution vectors")
        first.sort()  # (the earlier point of a vector kept: deterministic)
        self.vectors = both[first]
        self.points = np.concatenate([self.points, points])[first]


def pair_maximum(vectors: npt.NDArray[np.int64],
                 weights: Sequence[int]) -> tuple[int, int, int]:
    """(max_{i,j} Σ_q W_q (v_iq − v_jq)², i, j) over the rows of ``vectors`` for integer
    weights W_q ≥ 0 of any size, exactly (module docstring, 3.).

    The weights are cut into limbs of b bits, W_q = Σ_l w_ql 2^{bl}, with b such that
    2^b · 4 Σ_q M_q² < 2^51 (M_q = max_i |v_iq|): each limb's pair scores own_i + own_j −
    2 Σ_q w_ql v_iq v_jq, and every partial sum of them, are then integers below 2^52, which
    float64 holds exactly whatever the order of the additions — so the Gram products run in
    BLAS, exactly, on any machine — and so is every step of adding the limbs up digit by digit
    (carries, in int64); the largest number is found by comparing the digits from the most
    significant one. Contributions too large for one bit per limb in float64 (4 Σ_q M_q² ≥
    2^50) take int64 limbs below 2^62 instead (numpy's integer products: exact, slower);
    :class:`~tessera.errors.ResourceError` when 4 Σ_q M_q² reaches 2^61 (no limb fits)."""
    v = np.asarray(vectors, dtype=np.int64)
    n, m = v.shape
    w = [int(x) for x in weights]
    if len(w) != m or min(w, default=0) < 0:
        raise ValueError(f"{len(w)} weights for {m} linear queries: one integer ≥ 0 each")
    if n == 0:
        raise ValueError("no contribution vectors")
    tops = [int(t) for t in np.abs(v).max(axis=0)]
    spread = (4 * sum(t * t for t in tops)).bit_length()
    b = min(FLOAT_LIMIT.bit_length() - 1 - spread, 48)
    kind: type[np.floating] | type[np.integer] = np.float64
    if b < 1:  # (int64 limbs: exact in numpy's integer products)
        b, kind = min(PAIR_LIMIT.bit_length() - 1 - spread, 60), np.int64
    if b < 1:
        raise ResourceError("contributions too large for exact int64 pair scores")
    mask = (1 << b) - 1
    n_limbs = max(1, -(-max(w, default=0).bit_length() // b))
    limbs = [np.array([(x >> (b * k)) & mask for x in w], dtype=np.int64)
             for k in range(n_limbs)]
    vk = v.astype(kind)
    own = [((v * v) @ lw).astype(kind) for lw in limbs]
    weighted = [(v * lw).astype(kind) for lw in limbs]
    best: tuple[int, int, int] = (-1, 0, 0)
    rows = max(1, BLOCK // n)
    for s in range(0, n, rows):
        carry = np.zeros((min(rows, n - s), n), dtype=np.int64)
        digits = []
        for k in range(n_limbs):  # exact: every term < 2^51 (2^62), every carry < 2^(52 − b)
            t = (own[k][s:s + rows, None] + own[k][None, :]
                 - 2 * (weighted[k][s:s + rows] @ vk.T) + carry).astype(np.int64)
            digits.append(t & mask)
            carry = t >> b
        keys = [carry, *reversed(digits)]  # most significant first
        hit = np.ones(carry.shape, dtype=bool)
        for key in keys:
            hit &= key == key[hit].max()
        i, j = (int(c) for c in np.argwhere(hit)[0])
        value = sum(int(d[i, j]) << (b * k) for k, d in enumerate(digits)) \
            + (int(carry[i, j]) << (b * n_limbs))
        if value > best[0]:
            best = (value, s + i, j)
    return best


def exact_pair_cost(domain: Domain, linear: Sequence[LinearQuery], weights: Sequence[int], *,
                    max_states: int = MAX_VECTORS, max_grid: int = MAX_GRID) -> PairMaximum:
    """S_sub = max_{x,y} Σ_q W_q (a_q(x) − a_q(y))² for integer weights W_q, exactly, with a
    pair of records attaining it (re-evaluated directly: an internal error if it does not);
    :class:`~tessera.errors.ResourceError` when not tractable (:func:`contribution_vectors`)."""
    vecs = contribution_vectors(domain, linear, max_states=max_states, max_grid=max_grid)
    value, i, j = pair_maximum(vecs.vectors, weights)
    x = tuple(int(c) for c in vecs.points[i])
    y = tuple(int(c) for c in vecs.points[j])
    if change_cost(domain, linear, weights, x, y)[0] != value:  # fail closed
        raise RuntimeError("internal error: the pair maximum's records do not attain it")
    return PairMaximum(value, x, y, len(vecs.vectors))
