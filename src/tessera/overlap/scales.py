"""Per-query noise scales for a total budget, from γ_w (SPEC §3, §7). A thin helper.

Query q gets the share of the budget proportional to its weight, scaled so that every set of
queries one row can touch (every I(x), or I(x) Δ I(y) under substitution) composes to at most
the budget; with B = ``result.bound`` (the calibration value, never the achieved one):

* pure ε-DP:  ε_q = ε·w_q/B, Laplace scale b_q = 1/ε_q = B/(ε·w_q)      (Σ_{I(x)} ε_q ≤ ε)
* μ-GDP:      μ_q = μ·w_q/B (B = √S), Gaussian σ_q = 1/μ_q              (√Σ μ_q² ≤ μ)
* ρ-zCDP:     ρ_q = ρ·w_q²/B (B = S),  Gaussian σ_q² = 1/(2ρ_q)          (Σ ρ_q ≤ ρ)

for unit-sensitivity counting queries. Unit weights give b = γ/ε, σ = √γ/μ, σ² = γ/(2ρ).
Queries of weight 0 get no budget (infinite scale: do not release them).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from tessera.overlap.result import OverlapResult


def per_query_scales(
    result: OverlapResult, weights: npt.ArrayLike, budget: float
) -> npt.NDArray[np.float64]:
    """Noise scale per query (Laplace b for ``pure``, Gaussian σ for ``gdp``/``zcdp``)."""
    if not budget > 0:
        raise ValueError("budget must be > 0")
    w = np.asarray(weights, dtype=np.float64)
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
