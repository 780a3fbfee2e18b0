"""What linear queries — counts and clamped sums — cost one row or one person, in exact
rationals (docs/theory.md §3.13, §3.15).

S = max over one neighbour change of Σ_q c_q |Δf_q|^p (p = 1 for ε, 2 for ρ). Under
add/remove, and under substitution in pure ε, it is the weighted overlap of the queries' count
pieces (:mod:`tessera.overlap.linear`), computed with
:func:`tessera.release.exact_costs.cost_bound` (exact arithmetic, witness re-checked). Under
ρ-zCDP substitution the pieces only bound it from above, so S_sub = max_{x,y} Σ_q c_q
(a_q(x) − a_q(y))² is computed by the exact pair program of
:mod:`tessera.overlap.linear_pairs` on the costs scaled to integers, when its distinct
contribution vectors are few enough; beyond that limit the pieces' bound is used, marked not
exact, with the true pair score of its witness pair as the achieved value. A person of at most
K rows pays K (ε) or K² (ρ) times the largest row-level value over the unit's row relations
(docs/theory.md §3.13, whose proof is for linear queries; K copies of the worst row or pair
attain it). A person counted once per query (``count="people"``: each group's count of
persons and sum of their clamped totals) pays instead the maximum weighted coverage of K
records (2K under substitution) with the scores c_q·D_q^p (:func:`people_linear_cost`,
docs/theory.md §3.14, "Aggregates counting people").
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from tessera.errors import ResourceError, TesseraError
from tessera.overlap import OverlapResult, Witness
from tessera.overlap.coverage import float_down, float_up
from tessera.overlap.linear import Pieces, attaining, pieces, power
from tessera.overlap.linear_pairs import MAX_VECTORS, change_cost, exact_pair_cost
from tessera.overlap.people_linear import best_person_change
from tessera.privacy import MAX_ROWS_LIMIT, ONE_ROW, Definition, Neighbours, PrivacyUnit
from tessera.release import decimals
from tessera.release.decimals import decimal_value
from tessera.release.exact_costs import DEFAULT_TIME_LIMIT, CostBound, cost_bound, union_of
from tessera.schema.domain import Domain
from tessera.workload.aggregates import LinearQuery
from tessera.workload.workload import Workload

#: Bits of the largest integer weight of the pair program (costs with more digits are rounded up).
WEIGHT_BITS = 96


def piece_workload(domain: Domain, cut: Pieces) -> Workload:
    """The levels as a counting workload (what a ledger stores and re-solves)."""
    n = len(cut.queries)
    return Workload(domain, cut.queries, tuple(f"piece {j}" for j in range(n)), (1.0,) * n)


def linear_cost_bound(
    domain: Domain, linear: Sequence[LinearQuery], costs: npt.ArrayLike, *,
    definition: Definition | str, neighbours: Neighbours | str = Neighbours.ADD_REMOVE,
    unit: PrivacyUnit = ONE_ROW, time_limit: float | None = DEFAULT_TIME_LIMIT,
    threshold: Fraction | None = None, max_vectors: int = MAX_VECTORS,
) -> CostBound | None:
    """max over one change of the unit of Σ_q c_q |Δf_q|^p, exactly where tractable and
    bounded above otherwise (``None``: no query can change, the cost is 0). ``costs``: c_q per
    unit of sensitivity (ε_q = 1/b_q or ρ_q = 1/(2σ_q²)). The witness is that of the largest
    relation: under ρ-zCDP substitution a pair of records x, y whose queries are the linear
    queries that change (:func:`substitution_cost`), else levels or cells of the pieces.
    ``max_vectors``: the pair program's state limit (beyond it, the pieces' bound)."""
    d = Definition.parse(definition)
    if unit.counts_people:  # each person once per query (docs/theory.md §3.14)
        return people_linear_cost(domain, linear, costs, definition=d, neighbours=neighbours,
                                  unit=unit, time_limit=time_limit)
    factor = unit.factor(d)
    parts: list[CostBound] = []
    for rel in unit.row_relations(Neighbours.parse(neighbours)):
        if d is Definition.ZCDP and rel is Neighbours.SUBSTITUTE:
            part = substitution_cost(domain, linear, costs, time_limit=time_limit,
                                     max_vectors=max_vectors)
            if part is not None:
                parts.append(part)
            continue
        cut = pieces(domain, linear, d, rel)
        if not cut.queries:
            continue
        part = cost_bound(domain, list(cut.queries), cut.costs(costs), neighbours=rel,
                          time_limit=time_limit,
                          threshold=None if threshold is None else threshold / factor)
        wit = part.overlap.witness
        if rel is Neighbours.ADD_REMOVE and wit is not None:  # a cell's record that attains it
            overlap = dataclasses.replace(part.overlap, witness=dataclasses.replace(
                wit, x=attaining(domain, linear, wit.x)))
            part = dataclasses.replace(part, overlap=overlap)
        parts.append(part)
    if not parts:
        return None
    top = max(parts, key=lambda c: c.value)
    best = max(parts, key=lambda c: c.achieved_value)
    if factor == 1 and len(parts) == 1:
        return top
    return CostBound(factor * top.value, factor * best.achieved_value,
                     all(c.exact for c in parts) or top.value <= best.achieved_value,
                     top.scale, top.overlap)


def people_linear_cost(
    domain: Domain, linear: Sequence[LinearQuery], costs: npt.ArrayLike, *,
    definition: Definition | str, neighbours: Neighbours | str = Neighbours.ADD_REMOVE,
    unit: PrivacyUnit, time_limit: float | None = DEFAULT_TIME_LIMIT,
    counted: Sequence[tuple[Workload, npt.NDArray[np.float64]]] = (),
) -> CostBound | None:
    """What one person counted once per query costs linear queries (and the counting
    workloads ``counted``, with their costs: a ledger's other releases), docs/theory.md §3.14
    "Aggregates counting people": the maximum weighted coverage of K records (2K under
    substitution) with the scores s_q = c_q·D_q^p (D_q: :meth:`~tessera.workload.aggregates.
    LinearQuery.person_bound`, the substitution one under substitution; each score rounded up
    to a float whose decimal is ≥ it), solved by :func:`~.exact_costs.cost_bound` on the
    conditions — exact where tractable, else its proven bound. ``None``: nothing can change.

    The achieved value is real: the witness person's records, moved within their cells to the
    values that change the sums most (:func:`tessera.overlap.people_linear.best_person_change`),
    evaluated with the person-level semantics (totals, clamp) — plus the costs of the counting
    queries they cover. ``exact`` only when the coverage was solved exactly and those records
    make every covered query move by its full D_q (so a real person pays the bound, up to the
    scores' rounding up)."""
    d = Definition.parse(definition)
    n = Neighbours.parse(neighbours)
    p = power(d)
    c = checked(costs, len(linear))
    exact = [decimal_value(x) for x in c.tolist()]
    sub = n is Neighbours.SUBSTITUTE
    scores = [r * lq.person_bound(sub) ** p for r, lq in zip(exact, linear)]
    s = np.array([decimals.float_up(x) for x in scores], dtype=np.float64)
    names = tuple(f"{lq.role} {i}" for i, lq in enumerate(linear))
    blocks = [(Workload(domain, tuple(lq.query for lq in linear), names, (1.0,) * len(linear)),
               s), *counted]
    union, all_costs = union_of(blocks)
    if not np.any(all_costs > 0):
        return None
    cb = cost_bound(domain, union if union.is_structured else union.queries, all_costs,
                    neighbours=n, time_limit=time_limit, unit=unit, definition=d)
    if cb.value == 0:
        return None
    wit = cb.overlap.witness
    rows = () if wit is None else wit.rows
    covered = () if wit is None else wit.queries
    others = sum((decimal_value(float(all_costs[i])) for i in covered if i >= len(linear)),
                 Fraction(0))
    real, _, _ = best_person_change(domain, linear, exact, p, rows, unit.max_rows)
    achieved = others + real
    full = sum((scores[i] for i in covered if i < len(linear)), Fraction(0))
    attained = cb.exact and real == full
    if sub and not counted and not attained:  # a pair: the halves of a 2K coverage witness
        pair, pair_full, twice = substitution_pair(domain, linear, exact, scores, all_costs, p,
                                                   unit, time_limit)
        if pair is not None and pair > achieved:
            achieved = pair
            # the 2K coverage solved exactly on the same integer scores, and attained
            attained = pair == pair_full and twice is not None and twice.value >= cb.value
    if achieved > cb.value:  # fail closed
        raise TesseraError(f"internal error: a person changes the answers by "
                           f"{float(achieved)!r}, above the bound {float(cb.value)!r}")
    return CostBound(cb.value, achieved, attained, cb.scale, cb.overlap)


def substitution_pair(domain: Domain, linear: Sequence[LinearQuery], exact: Sequence[Fraction],
                      scores: Sequence[Fraction], costs: npt.NDArray[np.float64], p: int,
                      unit: PrivacyUnit, time_limit: float | None
                      ) -> tuple[Fraction | None, Fraction, CostBound | None]:
    """A real substitution's change for :func:`people_linear_cost`: the maximum coverage of 2K
    records with the substitution scores (its witness W), W's first K records replaced by the
    rest, their values searched (:func:`~tessera.overlap.people_linear.best_person_change`).
    Returns (that change or None, Σ of the scores W covers — −1 when the 2K coverage was not
    solved exactly —, the 2K coverage when solved exactly)."""
    if 2 * unit.max_rows > MAX_ROWS_LIMIT:
        return None, Fraction(0), None
    queries = [lq.query for lq in linear]
    twice = cost_bound(domain, queries, costs, neighbours=Neighbours.ADD_REMOVE,
                       time_limit=time_limit,
                       unit=dataclasses.replace(unit, max_rows=2 * unit.max_rows))
    wit = twice.overlap.witness
    if wit is None or len(wit.rows) <= unit.max_rows:
        return None, Fraction(0), None
    rows = wit.rows
    k = unit.max_rows
    change, _, _ = best_person_change(domain, linear, exact, p, rows[:k], new=rows[k:])
    if not twice.exact:
        return change, Fraction(-1), None
    return change, sum((scores[i] for i in wit.queries), Fraction(0)), twice


def substitution_cost(
    domain: Domain, linear: Sequence[LinearQuery], costs: npt.ArrayLike, *,
    time_limit: float | None = DEFAULT_TIME_LIMIT, max_vectors: int = MAX_VECTORS,
) -> CostBound | None:
    """S_sub = max_{x,y} Σ_q c_q (a_q(x) − a_q(y))² of one row under ρ-zCDP substitution
    (``None``: no query can change).

    Exact (:func:`tessera.overlap.linear_pairs.exact_pair_cost`) on the integers W_q =
    c_q·``scale`` (:func:`pair_weights`: the costs' decimals times their least common
    denominator, or rounded up to multiples of 2^−k when those have more than
    :data:`WEIGHT_BITS` bits), with the
    maximising pair as witness and its score in exact rationals as the achieved value. When the
    program is not tractable (more than ``max_vectors`` distinct contribution vectors): the
    pieces' bound (:func:`tessera.overlap.linear.pieces`, an upper bound), marked not exact
    unless its witness pair attains it, whose achieved value is the true pair score of that
    witness pair, evaluated directly."""
    c = checked(costs, len(linear))
    exact = [decimal_value(x) for x in c.tolist()]
    ints, scale = pair_weights(exact)
    try:
        best = exact_pair_cost(domain, linear, ints, max_states=max_vectors)
    except ResourceError as e:
        return pieces_bound(domain, linear, c, exact, time_limit, str(e))
    if best.value == 0:
        return None
    value = Fraction(best.value) / scale
    achieved, changed = change_cost(domain, linear, exact, best.x, best.y)
    rounded = any(w != r * scale for w, r in zip(ints, exact))
    if achieved > value or (not rounded and achieved != value):  # fail closed
        raise TesseraError(f"internal error: the pair program's witness scores "
                          f"{float(achieved)!r}, its value is {float(value)!r}")
    total = float(sum(w * r * r for w, r in zip(ints, (spread(domain, lq) for lq in linear))))
    overlap = OverlapResult(
        Definition.PURE, Neighbours.SUBSTITUTE, float_up(Fraction(best.value)),
        float_down(Fraction(best.value)), True,
        f"exact pair program ({best.n_vectors} distinct contribution vectors)",
        Witness(best.x, changed, best.y), len(linear), max(total, float_up(Fraction(best.value))))
    return CostBound(value, achieved, True, scale, overlap)


def spread(domain: Domain, lq: LinearQuery) -> int:
    """max_{x,y} |a_q(x) − a_q(y)| bounded: 1 for a count, max g − min g (0 included) for a
    sum — the change of one query alone (for the sequential score)."""
    if lq.role == "count":
        return 1
    gs = [0, *(g for _, g in lq.values(domain))]
    return max(gs) - min(gs)


def pieces_bound(domain: Domain, linear: Sequence[LinearQuery], costs: npt.NDArray[np.float64],
                 exact: Sequence[Fraction], time_limit: float | None,
                 why: str) -> CostBound | None:
    """The fallback of :func:`substitution_cost`: the levels' bound, labelled truthfully."""
    cut = pieces(domain, linear, Definition.ZCDP, Neighbours.SUBSTITUTE)
    if not cut.queries:
        return None
    part = cost_bound(domain, list(cut.queries), cut.costs(costs),
                      neighbours=Neighbours.SUBSTITUTE, time_limit=time_limit)
    wit = part.overlap.witness
    achieved = Fraction(0)
    if wit is not None and wit.y is not None:
        achieved, _ = change_cost(domain, linear, exact, wit.x, wit.y)
    if achieved > part.value:  # fail closed
        raise TesseraError(f"internal error: a pair scores {float(achieved)!r} above the "
                          f"pieces' bound {float(part.value)!r}")
    note = f"the levels' upper bound: the exact pair program is not tractable ({why})"
    ov = part.overlap
    overlap = dataclasses.replace(  # (scores in the pieces' integer units)
        ov, exact=part.value <= achieved, notes=(*ov.notes, note),
        score_achieved=min(ov.score_bound, float(math.floor(achieved * part.scale))))
    return CostBound(part.value, achieved, part.value <= achieved, part.scale, overlap)


def pair_weights(costs: Sequence[Fraction]) -> tuple[list[int], int | Fraction]:
    """Integers W_q ≥ c_q·scale for the pair program (which is exact for integers of any
    size): equal, scale the least common denominator of the costs' decimals, when the largest
    has at most :data:`WEIGHT_BITS` bits; else ⌈c_q·2^k⌉ with the largest cost below
    2^WEIGHT_BITS (the value then lies at most Σ_q (2M_q)²/scale above S, a relative 2^−90 or
    so)."""
    if not costs:
        return [], 1
    scale = math.lcm(*(r.denominator for r in costs))
    ints = [int(r * scale) for r in costs]
    if max(ints).bit_length() <= WEIGHT_BITS:
        return ints, scale
    top = max(costs)
    k = WEIGHT_BITS - 1 - math.floor(math.log2(top))
    while True:
        unit = Fraction(2) ** k
        ints = [math.ceil(r * unit) for r in costs]
        if max(ints).bit_length() <= WEIGHT_BITS:
            return ints, unit if k < 0 else int(unit)
        k -= 1


def checked(costs: npt.ArrayLike, n: int) -> npt.NDArray[np.float64]:
    """The costs as floats, one finite cost ≥ 0 per linear query."""
    c = np.asarray(costs, dtype=np.float64).reshape(-1)
    if c.shape != (n,) or not (np.isfinite(c).all() and (c >= 0).all()):
        raise TesseraError(f"{c.size} costs for {n} linear queries: one finite cost ≥ 0 each")
    return c
