"""The weighted overlap of linear queries — counts and clamped sums — as the weighted overlap
of count pieces (docs/theory.md §3.14).

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
  otherwise: the weights of a sum whose clamped values take both signs are doubled.

So the max-plus program of §3.8, its solvers and witness, the ledger's exact rationals and
``tessera verify`` apply unchanged to the levels (:func:`pieces`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tessera.errors import QueryError
from tessera.privacy import Definition, Neighbours
from tessera.schema.domain import Domain
from tessera.workload.aggregates import MAX_PIECES, LinearQuery
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
           neighbours: Neighbours | str = Neighbours.ADD_REMOVE,
           max_pieces: int = MAX_PIECES) -> Pieces:
    """Every linear query's levels with their factors (module docstring)."""
    p = power(definition)
    n = Neighbours.parse(neighbours)
    total = sum(1 if lq.role == "count" else 2 * lq.bound(domain) for lq in linear)
    if total > max_pieces:
        raise QueryError(f"the sums split into {total:,} levels (one per unit of the clamp), "
                         f"above the limit of {max_pieces:,}",
                         hint="narrow the summed attributes' ranges in the schema, or group by "
                              "fewer attributes")
    queries: list[Query | BooleanClause] = []
    owner: list[int] = []
    factor: list[int] = []
    for i, lq in enumerate(linear):
        values = [g for _, g in lq.values(domain)] if lq.role == "sum" else [1]
        two_signed = (p == 2 and n is Neighbours.SUBSTITUTE
                      and min(values, default=0) < 0 < max(values, default=0))
        for q, t in lq.levels(domain):
            if q.is_contradiction():
                continue
            queries.append(q)
            owner.append(i)
            factor.append((1 if p == 1 else 2 * t - 1) * (2 if two_signed else 1))
    return Pieces(tuple(queries), np.array(owner, dtype=np.int64),
                  np.array(factor, dtype=np.int64))


def sensitivities(domain: Domain, linear: Sequence[LinearQuery]) -> npt.NDArray[np.int64]:
    """max_x |g_q(x)| of every linear query: 1 for a count, the largest |clamp| for a sum."""
    return np.array([lq.bound(domain) for lq in linear], dtype=np.int64)
