"""What linear queries — counts and clamped sums — cost one row or one person, in exact
rationals (docs/theory.md §3.13, §3.15).

S = max over one neighbour change of Σ_q c_q |Δf_q|^p (p = 1 for ε, 2 for ρ) is the weighted
overlap of the queries' levels (:mod:`tessera.overlap.linear`): exact under add/remove and,
in pure ε, under substitution; an upper bound under ρ-zCDP substitution.
:func:`linear_cost_bound` computes it with :func:`tessera.release.exact_costs.cost_bound`
(exact arithmetic, witness re-checked) for every row relation of the unit, and a person of
at most K rows pays K (ε) or K² (ρ) times the largest (docs/theory.md §3.13, whose proof is
for linear queries).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from fractions import Fraction

import numpy.typing as npt

from tessera.overlap.linear import Pieces, attaining, pieces
from tessera.privacy import ONE_ROW, Definition, Neighbours, PrivacyUnit
from tessera.release.exact_costs import DEFAULT_TIME_LIMIT, CostBound, cost_bound
from tessera.schema.domain import Domain
from tessera.workload.aggregates import LinearQuery
from tessera.workload.workload import Workload


def piece_workload(domain: Domain, cut: Pieces) -> Workload:
    """The levels as a counting workload (what a ledger stores and re-solves)."""
    n = len(cut.queries)
    return Workload(domain, cut.queries, tuple(f"piece {j}" for j in range(n)), (1.0,) * n)


def linear_cost_bound(
    domain: Domain, linear: Sequence[LinearQuery], costs: npt.ArrayLike, *,
    definition: Definition | str, neighbours: Neighbours | str = Neighbours.ADD_REMOVE,
    unit: PrivacyUnit = ONE_ROW, time_limit: float | None = DEFAULT_TIME_LIMIT,
    threshold: Fraction | None = None,
) -> CostBound | None:
    """max over one change of the unit of Σ_q c_q |Δf_q|^p, bounded above exactly (``None``:
    no query can change, the cost is 0). ``costs``: c_q per unit of sensitivity (ε_q = 1/b_q
    or ρ_q = 1/(2σ_q²)). The witness's queries are levels of the last relation solved."""
    d = Definition.parse(definition)
    factor = unit.factor(d)
    parts: list[CostBound] = []
    for rel in unit.row_relations(Neighbours.parse(neighbours)):
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

