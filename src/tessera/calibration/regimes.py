"""Privacy regimes of the allocation: how a target's parameters p map to loads u = h(p) and
errors c·u^{−k} (docs/theory.md §3, §7).

=========  =========================  ==========  ========  ===  ===
target     mechanism                  u = h(p)    Var       c    k
=========  =========================  ==========  ========  ===  ===
pure ε     (discrete) Laplace, b=1/ε  ε           2/ε²      2    2
μ-GDP      Gaussian, σ = 1/μ          μ²          1/μ²      1    1
(ε,δ)      Gaussian via the largest   μ²          1/μ²      1    1
           μ with G_μ ⇒ (ε,δ)
ρ-zCDP     (discrete) Gaussian        ρ           1/(2ρ)    ½    1
=========  =========================  ==========  ========  ===  ===
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tessera.accounting.guarantee import Guarantee
from tessera.accounting.tradeoff import GaussianDP
from tessera.calibration.oracles import FloatArray
from tessera.errors import TesseraError
from tessera.privacy import Definition


def gdp_mu_for(eps: float, delta: float) -> float:
    """The largest μ with G_μ (ε,δ)-DP, i.e. δ_μ(ε) ≤ δ (bisection; returns the safe end)."""
    if not (eps >= 0 and 0 < delta < 1):
        raise TesseraError(f"need ε ≥ 0 and δ in (0, 1), got ({eps!r}, {delta!r})")
    lo, hi = 0.0, 1.0
    while float(GaussianDP(hi).delta(eps)) <= delta:
        lo, hi = hi, 2.0 * hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if float(GaussianDP(mid).delta(eps)) <= delta:
            lo = mid
        else:
            hi = mid
    return lo


@dataclass(frozen=True)
class Regime:
    """How parameters p map to loads u = h(p) and errors c·u^{−k}."""

    k: int
    c: float
    budget: float
    mechanism: str
    squared: bool  # u = p² (GDP) rather than u = p (pure ε, zCDP ρ)
    zcdp: bool

    def to_u(self, p: FloatArray) -> FloatArray:
        return p**2 if self.squared else p

    def from_u(self, u: FloatArray) -> FloatArray:
        return np.sqrt(u) if self.squared else u

    def scales(self, p: FloatArray) -> FloatArray:
        return 1.0 / np.sqrt(2.0 * p) if self.zcdp else 1.0 / p

    def error(self, u: FloatArray, w: FloatArray) -> float:
        return float(self.c * np.sum(w * u ** (-float(self.k))))


def check_importance(workload_size: int, importance: npt.ArrayLike | None) -> FloatArray | None:
    if importance is None:
        return None
    w = np.asarray(importance, dtype=np.float64)
    if w.shape != (workload_size,):
        raise TesseraError(f"need {workload_size} importance weights, got shape {w.shape}")
    if np.any(~np.isfinite(w)) or np.any(w <= 0):
        raise TesseraError(
            "importance weights must be finite and > 0",
            hint="drop a query instead of giving it weight 0 (weight 0 means infinite noise)",
        )
    return w


def regime_for(target: Guarantee, mechanism: str | None) -> Regime:
    d = target.definition
    if d is Definition.PURE:
        k, c, budget, mech, squared = 2, 2.0, float(target.epsilon or 0.0), "laplace", False
    elif d is Definition.GDP:
        k, c, budget, mech, squared = 1, 1.0, float(target.mu or 0.0) ** 2, "gaussian", True
    elif d is Definition.APPROX:
        mu = gdp_mu_for(float(target.epsilon or 0.0), float(target.delta or 0.0))
        k, c, budget, mech, squared = 1, 1.0, mu**2, "gaussian", True
    elif d is Definition.ZCDP:
        k, c, budget, mech, squared = 1, 0.5, float(target.rho or 0.0), "gaussian", False
    else:
        raise TesseraError(
            f"cannot allocate for a {d.label} target",
            hint="use pure ε, μ-GDP, ρ-zCDP or (ε,δ)",
        )
    # Discrete Laplace with scale 1/ε is exactly ε-DP (Δ = 1) and the discrete Gaussian with
    # σ is exactly 1/(2σ²)-zCDP (Canonne–Kamath–Steinke 2020); the discrete Gaussian is *not*
    # known to be exactly (1/σ)-GDP, so GDP calibration admits the continuous Gaussian only
    # (use via="pld" to calibrate a discrete Gaussian for an (ε,δ) target).
    if mech == "laplace":
        allowed = {"laplace", "discrete_laplace"}
    elif d is Definition.ZCDP:
        allowed = {"gaussian", "discrete_gaussian"}
    else:
        allowed = {"gaussian"}
    if mechanism is not None and mechanism not in allowed:
        raise TesseraError(
            f"a {d.label} target is calibrated here for {sorted(allowed)}, not {mechanism!r}",
            hint="for a discrete Gaussian use a ρ-zCDP target, or an (ε,δ) target with via='pld'",
        )
    if budget <= 0.0:
        raise TesseraError("the privacy target must be > 0")
    return Regime(k, c, budget, mechanism or mech, squared, d is Definition.ZCDP)
