"""Per-query noise scales for a total budget, from γ_w (docs/theory.md §3, §7).

Query q gets the share of the budget proportional to its weight, scaled so that every set of
queries one row can touch (every I(x), or I(x) Δ I(y) under substitution) composes to at most
the budget; with B = ``result.bound`` (the calibration value, never the achieved one):

* pure ε-DP:  ε_q = ε·w_q/B, Laplace scale b_q = 1/ε_q = B/(ε·w_q)      (Σ_{I(x)} ε_q ≤ ε)
* μ-GDP:      μ_q = μ·w_q/B (B = √S), Gaussian σ_q = 1/μ_q              (√Σ μ_q² ≤ μ)
* ρ-zCDP:     ρ_q = ρ·w_q²/B (B = S),  Gaussian σ_q² = 1/(2ρ_q)          (Σ ρ_q ≤ ρ)

for unit-sensitivity counting queries. Unit weights give b = γ/ε, σ = √γ/μ, σ² = γ/(2ρ).
Queries of weight 0 get no budget (infinite scale: do not release them).

Only the ratios of the weights matter (the formulas are homogeneous of degree 0 in w), so the
weights are normalised by their maximum before γ_w is computed: weights like 1e-200, whose
squares underflow to 0, would otherwise give γ_w = 0 and a zero noise scale.

One implementation: when the weights are uniform and the definition is pure or GDP under
add/remove neighbours, this is exactly the *uniform allocation* of
:func:`tessera.calibration.allocation.allocate` with the overlap oracle y ↦ γ·max_q y_q, and
the scales come from there. Otherwise the weights here are *privacy shares* (the budget split in
proportion to w_q), which the allocation module does not offer (its weights are error
importances, optimised by cutting planes), and under substitution the exact substitution score
B is tighter than its min(2·γ, t) rule — so the closed forms above apply. Per person
(``result.unit``, docs/theory.md §3.13) B is already a person's score (K·S under pure ε, K²·S
under zCDP), so b and σ grow by K through the closed forms; the allocation's cap of a load at
Σ_q y_q holds for a row only (a person moves a count by up to K), so it is not used there.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from tessera.accounting.guarantee import Guarantee
from tessera.calibration.allocation import allocate
from tessera.errors import TesseraError
from tessera.overlap.result import OverlapResult, h
from tessera.privacy import Definition, Neighbours


def normalised_weights(weights: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """w / max(w): the same calibration (only ratios matter), with h(w) = w² representable.

    Refuses negative or non-finite weights and weights whose ratio to the largest underflows
    (a positive weight that would silently become 0 and lose its noise)."""
    w = np.asarray(weights, dtype=np.float64)
    if w.size == 0:
        return w.copy()
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise TesseraError("query weights must be finite and ≥ 0")
    top = float(np.max(w))
    if top == 0.0:
        return w.copy()
    out = w / top
    tiny = (w > 0) & (out * out < np.finfo(np.float64).tiny)
    if np.any(tiny):
        i = int(np.flatnonzero(tiny)[0])
        raise TesseraError(
            f"weight {w[i]:g} (query {i}) is below the largest weight {top:g} by a factor whose "
            "square underflows",
            hint="give that query weight 0 (not released) or use closer weights",
        )
    return out


def uniform_scales(result: OverlapResult, n: int, weight: float, budget: float,
                   ) -> npt.NDArray[np.float64]:
    """Scales of the uniform allocation with γ = S / h(weight) (pure or GDP, add/remove)."""
    target = (Guarantee.pure(budget, Neighbours.ADD_REMOVE) if result.comp is Definition.PURE
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
    """Noise scale per query (Laplace b for ``pure``, Gaussian σ for ``gdp``/``zcdp``).

    ``result`` must be γ_w of these ``weights`` (as :func:`tessera.overlap.max_overlap`
    returned it); its ``bound`` — exact or a proven upper bound — calibrates.
    """
    if not budget > 0:
        raise ValueError("budget must be > 0")
    w = np.asarray(weights, dtype=np.float64)
    if len(w) != result.n_queries:
        raise TesseraError(f"{len(w)} weights for an overlap result of {result.n_queries} queries")
    if (
        len(w)
        and result.comp in (Definition.PURE, Definition.GDP)
        and result.neighbours is Neighbours.ADD_REMOVE
        # (the allocation caps the load at Σ_q y_q, a row's bound: a person moves a count by K)
        and result.unit.is_row
        and w[0] > 0
        and np.all(w == w[0])
        and result.score_bound >= float(h(result.comp, w[:1])[0])  # γ ≥ 1
    ):
        return uniform_scales(result, len(w), float(w[0]), budget)
    bound = result.bound
    if np.any(w > 0) and not bound > 0:
        raise TesseraError(
            f"γ_w = {bound:g} for positive weights: no noise scale can be calibrated from it",
            hint="rescale the weights (only their ratios matter); see normalised_weights",
        )
    with np.errstate(divide="ignore"):
        if result.comp in (Definition.PURE, Definition.GDP):
            share = budget * w / bound
            return np.where(share > 0, 1.0 / share, np.inf)
        if result.comp is Definition.ZCDP:
            rho = budget * w * w / bound
            return np.where(rho > 0, np.sqrt(1.0 / (2.0 * rho)), np.inf)
    raise ValueError(f"unknown comp {result.comp!r}")
