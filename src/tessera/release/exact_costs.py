"""The spent budget of releases, bounded in exact arithmetic, without SQLite (docs/theory.md §9).

S = max over rows x (pairs x → y) of the summed costs c_q of every query of every release that
touches x (changes between x and y): the maximum weighted overlap of the union of the releases'
workloads, computed by :func:`tessera.overlap.max_overlap` on integer scores. Costs are the
decimals their floats print as (:mod:`tessera.release.decimals`); scaled by their least common
denominator they are integers, whose sums floating point adds exactly, so no tolerance is applied
anywhere (see :class:`CostBound`). Costs with too many digits for 51-bit integers are rounded
*up* to a multiple of 2^−k instead, which only raises the bound; :func:`settle` decides exactly,
by enumerating the maximal overlapping sets when they are few, what that rounding left undecided
against a threshold. The ledger (:mod:`tessera.release.ledger`) charges with these bounds;
:func:`combined_cost` gives the same figure for releases without a ledger.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from tessera.errors import TesseraError
from tessera.overlap import OverlapResult, max_overlap, maximal_overlapping_sets
from tessera.overlap.routes import Method
from tessera.privacy import ONE_ROW, Definition, Neighbours, PrivacyUnit
from tessera.release.decimals import decimal_value, float_down, float_up
from tessera.release.ledger_records import LedgerError
from tessera.schema.domain import Domain
from tessera.workload.ranges import RangeQueries
from tessera.workload.workload import Workload

__all__ = [
    "DEFAULT_TIME_LIMIT",
    "REFINE_MAX_SETS",
    "SCORE_LIMIT",
    "CostBound",
    "checked_costs",
    "combined_cost",
    "cost_bound",
    "settle",
    "union_of",
]

#: Seconds a maximum-overlap solve may take inside a charge (it then returns an upper bound).
DEFAULT_TIME_LIMIT = 30.0
#: Integer scores stay below this, so that every sum of them is exact in floating point.
SCORE_LIMIT = 2**51
#: At most this many overlap patterns are enumerated to settle a decision exactly.
REFINE_MAX_SETS = 20_000


@dataclass(frozen=True)
class CostBound:
    """S = max over rows x (pairs x → y) of Σ_{q ∈ I(x)} c_q (Σ over I(x) Δ I(y)), bounded.

    Arithmetic is exact: a cost is the decimal its float prints as (``repr``, what the ledger's
    JSON stores: 0.1 is one tenth), and the costs scaled by the least common denominator
    ``scale`` are integers, whose sums floating point adds exactly; the solver
    (:func:`tessera.overlap.max_overlap`) works on those integer scores, and the maximum of
    integers is at most ⌊its bound⌋. When the integers would reach 2^51 (costs with many
    digits), each cost is instead rounded *up* to a multiple of 1/scale = 2^−k, which only
    raises the bound. So

    * ``value`` (a :class:`~fractions.Fraction`) ≥ S, with no rounding error: the value for
      decisions; ``bound`` is the float whose decimal is the least one ≥ ``value``;
    * ``achieved`` ≤ S: the witness row's (pair's) summed costs (``achieved_value`` exactly);
    * ``exact``: the solver found the maximum of the integer scores, so ``value`` is S — up to
      the rounding of costs to multiples of 1/``scale`` when they had too many digits (then
      ``value`` − ``achieved_value`` ≤ 1/scale per query the witness touches, ~1e-13);
    * ``overlap``: the solver's result on the integer scores (witness, method, notes).

    Per person (:func:`cost_bound` with a unit of K rows): ``value`` and ``achieved_value`` are
    the factor (K for ε, K² for ρ) times the row-level ones, exactly (docs/theory.md §3.13).
    """

    value: Fraction
    achieved_value: Fraction
    exact: bool
    scale: int | Fraction
    overlap: OverlapResult

    @property
    def bound(self) -> float:
        """An upper bound on S, as a float whose decimal is ≥ ``value``."""
        return float_up(self.value)

    @property
    def achieved(self) -> float:
        """A lower bound on S, as a float whose decimal is ≤ ``achieved_value``."""
        return float_down(self.achieved_value)


def combined_cost(
    releases: Sequence[tuple[Workload, npt.ArrayLike]],
    *,
    neighbours: Neighbours | str = Neighbours.ADD_REMOVE,
    time_limit: float | None = DEFAULT_TIME_LIMIT,
    unit: PrivacyUnit = ONE_ROW,
    definition: Definition | str = Definition.PURE,
) -> CostBound:
    """The spent budget of these releases (workload, per-query costs), without a ledger: the
    maximum over rows of the summed costs of every query of every release that touches the row
    (docs/theory.md §9). Costs are ε_q (pure) or ρ_q (zCDP); both add up. All workloads must
    share one domain. Per person (``unit``): the factor of ``definition`` times that
    (:func:`cost_bound`)."""
    if not releases:
        raise TesseraError("no releases to combine")
    domain = releases[0][0].domain
    for i, (w, _) in enumerate(releases):
        if w.domain != domain:
            raise TesseraError(f"release {i}: its workload is over another domain",
                               hint="every release of one data set uses the same schema")
    union, costs = union_of([(w, checked_costs(w, c)) for w, c in releases])
    return cost_bound(domain, union, costs, neighbours=Neighbours.parse(neighbours),
                      time_limit=time_limit, unit=unit, definition=definition)


def union_of(
    parts: Sequence[tuple[Workload, npt.NDArray[np.float64]]],
) -> tuple[Workload, npt.NDArray[np.float64]]:
    """One workload holding every part's queries and families, and the costs in its expanded
    order (every predicate query first, then every family's cells)."""
    domain = parts[0][0].domain
    queries = [q for w, _ in parts for q in w.queries]
    families = [p for w, _ in parts for p in w.partitions]
    pred = [c[: len(w.queries)] for w, c in parts]
    cells = [c[len(w.queries):] for w, c in parts]
    union = Workload(domain, tuple(queries), tuple(f"q{i}" for i in range(len(queries))),
                     (1.0,) * len(queries), None, tuple(families))
    return union, np.concatenate(pred + cells)


def cost_bound(
    domain: Domain,
    queries: Sequence[Any],
    costs: npt.ArrayLike,
    *,
    neighbours: Neighbours | str = Neighbours.ADD_REMOVE,
    time_limit: float | None = DEFAULT_TIME_LIMIT,
    threshold: Fraction | None = None,
    unit: PrivacyUnit = ONE_ROW,
    definition: Definition | str = Definition.PURE,
) -> CostBound:
    """:class:`CostBound` of queries with per-query costs ``costs`` (finite, ≥ 0).

    ``threshold``: when rounding costs up leaves the bound above it but the witness below it
    (add/remove neighbours), settle the question exactly by enumerating the maximal overlapping
    sets (:func:`tessera.overlap.maximal_overlapping_sets`, when there are few) and summing
    each one's costs in integers.

    ``unit`` (a person of at most K rows) with the costs' ``definition`` (ε: pure; ρ: zCDP):
    the person's cost, ``unit.factor(definition)`` × the largest row-level bound of
    ``unit.row_relations(neighbours)``, in exact rationals (docs/theory.md §3.13; the proof is
    in :class:`tessera.privacy.PrivacyUnit`). One row: the relation's own bound. A person
    counted once per query (``unit.count == "people"``): the maximum weighted coverage of K
    rows with the costs as scores, in ε and ρ alike (every count moves by 0 or 1), on the
    same integer scores (:mod:`tessera.overlap.coverage`).
    """
    n = Neighbours.parse(neighbours)
    if unit.counts_people:  # the coverage of the costs themselves (docs/theory.md §3.14)
        return _cost_bound(domain, queries, costs, n, time_limit, unit=unit)
    factor = unit.factor(definition)
    relations = unit.row_relations(n)
    share = None if time_limit is None else time_limit / len(relations)
    parts = []
    for rel in relations:
        cb = _cost_bound(domain, queries, costs, rel, share)
        if threshold is not None:
            cb = settle(cb, domain, queries, costs, rel, threshold / factor,
                        time_limit=share)
        parts.append(cb)
    if unit.is_row:
        return parts[0]
    top = max(parts, key=lambda c: c.value)
    best = max(parts, key=lambda c: c.achieved_value)
    return CostBound(factor * top.value, factor * best.achieved_value,
                     all(c.exact for c in parts) or top.value <= best.achieved_value,
                     top.scale, top.overlap)


def settle(
    cb: CostBound, domain: Domain, queries: Sequence[Any], costs: npt.ArrayLike,
    neighbours: Neighbours, threshold: Fraction, *, time_limit: float | None = 0.0,
) -> CostBound:
    """``cb`` made exact when it is undecided against ``threshold`` (add/remove neighbours):
    by enumerating the maximal overlapping sets when they are few; else, when ToulBar2 gave the
    bound, by the exact branch and bound on the same integer scores within ``time_limit``
    seconds (0: not tried). ToulBar2 rounds the scores up once more, to integers below 2^40,
    so its bound — counted exact within 1e-9 — lies up to a unit per query a row pays above the
    maximum; which solver proves it depends on the machine's load (the branch and bound gets
    a short wall-clock warm-up first), and the re-check a certificate's scales passed on one
    machine must pass on another (``tessera verify``)."""
    if (cb.value <= threshold or cb.achieved_value > threshold
            or neighbours is not Neighbours.ADD_REMOVE
            or (isinstance(queries, Workload) and queries.is_structured)):
        return cb
    if isinstance(queries, Workload):
        queries = queries.queries
    try:
        sets = maximal_overlapping_sets(list(queries), domain=domain, max_sets=REFINE_MAX_SETS)
    except TesseraError:
        if time_limit == 0 or "toulbar2" not in cb.overlap.method:
            return cb
        again = _cost_bound(domain, queries, costs, neighbours, time_limit, "branch-bound")
        return again if again.value < cb.value else cb
    exact_costs = [decimal_value(x) for x in np.asarray(costs, dtype=np.float64).tolist()]
    common = math.lcm(*(r.denominator for r in exact_costs)) if exact_costs else 1
    ints = [r.numerator * (common // r.denominator) for r in exact_costs]
    best = Fraction(max((sum(ints[i] for i in s) for s in sets), default=0), common)
    if not cb.achieved_value <= best <= cb.value:  # fail closed
        raise LedgerError(f"internal error: exact maximum {float(best)!r} outside "
                          f"[{float(cb.achieved_value)!r}, {float(cb.value)!r}]")
    return CostBound(best, best, True, common, cb.overlap)


def _cost_bound(
    domain: Domain, queries: Sequence[Any], costs: npt.ArrayLike, neighbours: Neighbours,
    time_limit: float | None, method: Method = "auto", unit: PrivacyUnit = ONE_ROW,
) -> CostBound:
    c = np.asarray(costs, dtype=np.float64).reshape(-1)
    n = queries.n_queries if isinstance(queries, Workload) else len(queries)
    if c.shape != (n,) or not (np.isfinite(c).all() and (c >= 0).all()):
        raise TesseraError(f"{c.size} costs for {n} queries: one finite cost ≥ 0 per query")
    # rationals for the distinct costs only (a marginal's cells share one cost)
    distinct, inverse, counts = np.unique(c, return_inverse=True, return_counts=True)
    exact_distinct = [decimal_value(x) for x in distinct.tolist()]
    ints_distinct, scale = _integer_scores(exact_distinct, counts.tolist())
    ints = np.array(ints_distinct, dtype=np.float64)[inverse.ravel()]
    # (lazy range families stay lazy: the overlap dispatcher solves them in closed form)
    subject = queries if isinstance(queries, (Workload, RangeQueries)) else list(queries)
    res = max_overlap(subject, ints, domain=None if isinstance(queries, Workload) else domain,
                      comp=Definition.PURE, neighbours=neighbours, time_limit=time_limit,
                      method=method, unit=unit)
    top = math.floor(res.bound)  # the maximum of integer scores is an integer ≤ res.bound
    witness = [] if res.witness is None else list(res.witness.queries)
    achieved = sum((exact_distinct[int(inverse.ravel()[i])] for i in witness), Fraction(0))
    value = Fraction(top) / scale
    if top < res.score_achieved or achieved > value:  # fail closed
        raise LedgerError(f"internal error: the witness ({float(achieved)!r}) exceeds the "
                          f"bound ({float(value)!r}) on the summed costs")
    return CostBound(value, achieved, top <= res.score_achieved, scale, res)


def _integer_scores(
    costs: Sequence[Fraction], counts: Sequence[int] | None = None
) -> tuple[list[int], int | Fraction]:
    """Integers n_q ≥ c_q · scale with Σ n_q < 2^51: equal (scale = the least common
    denominator) when that fits, else ⌈c_q · 2^k⌉ for the largest k that fits. ``counts``:
    how many queries carry each (distinct) cost, for the sums."""
    if not costs:
        return [], 1
    m = [1] * len(costs) if counts is None else [int(x) for x in counts]
    n = sum(m)
    scale = math.lcm(*(r.denominator for r in costs))
    ints = [r.numerator * (scale // r.denominator) for r in costs]
    if sum(i * k for i, k in zip(ints, m)) < SCORE_LIMIT:
        return ints, scale
    total = sum((r * k for r, k in zip(costs, m)), Fraction(0))
    if total > 2**40:
        raise TesseraError(f"costs summing to {float(total):g} are beyond any privacy budget")
    k = math.floor(math.log2((SCORE_LIMIT - n) / float(total)))
    while True:
        unit = Fraction(2) ** k
        ints = [math.ceil(r * unit) for r in costs]
        if sum(i * c for i, c in zip(ints, m)) < SCORE_LIMIT:
            return ints, unit if k < 0 else int(unit)
        k -= 1


def checked_costs(workload: Workload, costs: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """A copy of the per-query costs of ``workload`` as floats, checked: one per query (expanded
    order), each finite and ≥ 0."""
    c = np.array(costs, dtype=np.float64, copy=True).reshape(-1)
    if c.shape != (workload.n_queries,):
        raise TesseraError(f"{c.size} costs for {workload.n_queries} queries",
                           hint="one cost (ε_q or ρ_q) per query")
    bad = ~(np.isfinite(c) & (c >= 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise TesseraError(f"query {workload.describe(i)}: cost {c[i]!r} must be finite and ≥ 0")
    return c

