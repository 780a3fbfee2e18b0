"""The weighted overlap of linear queries — counts and clamped sums — as the weighted overlap
of disjoint count pieces (docs/theory.md §3.14).

A linear query f_q(D) = Σ_{x∈D} q(x)·g_q(x), with g_q constant on each code of its summed
attribute a (g_q(x) = clamp(value(x_a)); a count has g_q = 1), is the sum of its pieces
P_{q,c} = q ∧ (x_a = c) weighted g_{q,c}: exactly one piece of q holds at any row x that q
counts, none elsewhere. So for costs c_q ≥ 0 and p ∈ {1, 2} (pure ε: p = 1; ρ-zCDP: p = 2)

    max_x Σ_q c_q |f_q(x)|^p  =  max_x Σ_{pieces P ∋ x} c_q |g_{q,c}|^p,

the maximum weighted overlap of the pieces with weights c_q·|g_{q,c}|^p: the same max-plus
program, solved exactly with a witness by :func:`tessera.overlap.max_overlap` (or, in exact
rationals, by :func:`tessera.release.exact_costs.cost_bound`). That is *add/remove*.

Under *substitution* (x → y) the pieces score Σ over the pieces holding x or y, but not both:
for a query counting both rows with different values g ≠ g' this is c(|g|^p + |g'|^p) where the
change costs c|g − g'|^p. For p = 1, |g − g'| ≤ |g| + |g'| (triangle inequality); for p = 2,
(g − g')² ≤ g² + g'² when g·g' ≥ 0 and ≤ 2(g² + g'²) always. So the pieces' pair score is a
sound **upper bound** under substitution — not exact — once the weights of a sum whose values
take both signs are doubled under zCDP (:func:`pieces`, ``neighbours``); a count's pieces are
exact as before.
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
    """The count pieces of linear queries: ``queries[j]`` belongs to linear query
    ``owner[j]`` and weighs ``factor[j]`` = |g|^p (×2 for a two-signed sum under zCDP
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
    """Every linear query's pieces with their factors |g|^p (module docstring)."""
    p = power(definition)
    n = Neighbours.parse(neighbours)
    total = sum(1 if lq.role == "count" else domain[lq.attribute].n_values  # type: ignore[index]
                for lq in linear)
    if total > max_pieces:
        raise QueryError(f"the sums split into {total:,} pieces (one per summed value), above "
                         f"the limit of {max_pieces:,}",
                         hint="narrow the summed attributes' ranges in the schema, or group by "
                              "fewer attributes")
    queries: list[Query | BooleanClause] = []
    owner: list[int] = []
    factor: list[int] = []
    for i, lq in enumerate(linear):
        parts = lq.pieces(domain)
        two_signed = (p == 2 and n is Neighbours.SUBSTITUTE
                      and any(g < 0 for _, g in parts) and any(g > 0 for _, g in parts))
        for q, g in parts:
            if q.is_contradiction():
                continue
            queries.append(q)
            owner.append(i)
            factor.append(abs(g) ** p * (2 if two_signed else 1))
    return Pieces(tuple(queries), np.array(owner, dtype=np.int64),
                  np.array(factor, dtype=np.int64))


def sensitivities(domain: Domain, linear: Sequence[LinearQuery]) -> npt.NDArray[np.int64]:
    """max_x |g_q(x)| of every linear query: 1 for a count, the largest |clamp| for a sum."""
    return np.array([lq.bound(domain) for lq in linear], dtype=np.int64)
