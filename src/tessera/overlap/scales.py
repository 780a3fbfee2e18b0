"""Per-query noise scales for a total budget, from γ_w (SPEC §3, §7).

Query q gets the share of the budget proportional to its weight, scaled so that every set of
queries one row can touch (every I(x), or I(x) Δ I(y) under substitution) composes to at most
the budget; with B = ``result.bound`` (the calibration value, never the achieved one):

* pure ε-DP:  ε_q = ε·w_q/B, Laplace scale b_q = 1/ε_q = B/(ε·w_q)      (Σ_{I(x)} ε_q ≤ ε)
* μ-GDP:      μ_q = μ·w_q/B (B = √S), Gaussian σ_q = 1/μ_q              (√Σ μ_q² ≤ μ)
* ρ-zCDP:     ρ_q = ρ·w_q²/B (B = S),  Gaussian σ_q² = 1/(2ρ_q)          (Σ ρ_q ≤ ρ)

for unit-sensitivity counting queries. Unit weights give b = γ/ε, σ = √γ/μ, σ² = γ/(2ρ).
Queries of weight 0 get no budget (infinite scale: do not release them).

One implementation: when the weights are uniform and the definition is pure or GDP under
add/remove neighbours, this is exactly the *uniform allocation* of
:func:`tessera.accounting.allocation.allocate` with the overlap oracle y ↦ γ·max_q y_q, and the
scales come from there. Otherwise the weights here are *privacy shares* (the budget split in
proportion to w_q), which the allocation module does not offer (its weights are error
importances, optimised by cutting planes), and under substitution the exact substitution score B
is tighter than its min(2·γ, t) rule — so the closed forms above apply. For error-optimal
importance-weighted parameters use :func:`tessera.accounting.allocation.allocate` with
:func:`tessera.accounting.allocation.overlap_from_workload`.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from tessera.overlap.result import OverlapResult, h


def _uniform_allocation(
    result: OverlapResult, n: int, weight: float, budget: float
) -> npt.NDArray[np.float64]:
    from tessera.accounting.allocation import allocate
    from tessera.accounting.guarantee import Guarantee, Neighbours

    target = (Guarantee.pure(budget, Neighbours.ADD_REMOVE) if result.comp == "pure"
              else Guarantee.gdp(budget, Neighbours.ADD_REMOVE))
    # uniform weights c: S = γ·h(c), and the oracle wants γ, the number of queries a row meets
    gamma = float(result.score_bound) / float(h(result.comp, np.array([weight]))[0])
    if weight != 1.0:
        gamma *= 1.0 + 1e-12  # the division may round down; γ must not

    alloc = allocate(n, target, overlap=gamma)
    return np.asarray(alloc.noise_scales, dtype=np.float64)


def per_query_scales(
    result: OverlapResult, weights: npt.ArrayLike, budget: float
) -> npt.NDArray[np.float64]:
    """Noise scale per query (Laplace b for ``pure``, Gaussian σ for ``gdp``/``zcdp``)."""
    if not budget > 0:
        raise ValueError("budget must be > 0")
    w = np.asarray(weights, dtype=np.float64)
    if (
        len(w)
        and result.comp in ("pure", "gdp")
        and result.neighbours == "add-remove"
        and w[0] > 0
        and np.all(w == w[0])
        and result.score_bound >= float(h(result.comp, w[:1])[0])  # γ ≥ 1
    ):
        return _uniform_allocation(result, len(w), float(w[0]), budget)
    bound = result.bound
    with np.errstate(divide="ignore"):
        if result.comp == "pure":
            share = budget * w / bound
            return np.where(share > 0, 1.0 / share, np.inf)
        if result.comp == "gdp":
            share = budget * w / bound
            return np.where(share > 0, 1.0 / share, np.inf)
        if result.comp == "zcdp":
            rho = budget * w * w / bound
            return np.where(rho > 0, np.sqrt(1.0 / (2.0 * rho)), np.inf)
    raise ValueError(f"unknown comp {result.comp!r}")
