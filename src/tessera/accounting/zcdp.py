"""ρ-zCDP ⇒ (ε, δ)-DP by the tightest standard conversion, in the safe direction
(docs/theory.md §3, §7).

Canonne, Kamath and Steinke [CKS20, Prop. 12 / Cor. 13] (also Asoodeh et al. 2021): a ρ-zCDP
mechanism is (ε, δ)-DP for every ε ≥ 0 with

    δ(ε) = inf_{α > 1}  exp((α − 1)(αρ − ε)) / (α − 1) · (1 − 1/α)^α,

which is never worse than Bun–Steinke's ε = ρ + 2√(ρ log(1/δ)) [BS16, Prop. 1.3]. Any single α
gives a valid δ, so a numerically imperfect minimisation can only make δ larger (safe), and the
bound at the α found is evaluated rounded up (a relative allowance for the float evaluation).
The inverse maps round the safe way too: :func:`epsilon_for_delta` returns an ε whose δ(ε) ≤ δ, and
:func:`rho_for_epsilon_delta` the largest ρ found whose ε(δ) ≤ ε.

[CKS20] C. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential Privacy",
NeurIPS 2020, arXiv:2004.00010. [BS16] M. Bun, T. Steinke, "Concentrated Differential Privacy",
TCC 2016, arXiv:1605.02065. The tests compare both directions with OpenDP's implementation of
the same bound (``make_zCDP_to_approxDP``): never below it, at most 1e-9 (relative) above.

>>> round(epsilon_for_delta(0.5, 1e-6), 3) < 0.5 + 2 * (0.5 * 13.8155) ** 0.5
True
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
from scipy.optimize import minimize_scalar

from tessera.errors import TesseraError

__all__ = ["CLOSED_FORM_ALLOWANCE", "bisect", "delta_for_epsilon", "epsilon_closed_form",
           "epsilon_for_delta", "rho_closed_form", "rho_for_epsilon_delta"]


def _log_delta(rho: float, eps: float, alpha: float) -> float:
    """log of the CKS20 δ at one order α > 1 (a valid bound for every α), as floats compute it
    (the search's objective; :func:`_log_delta_up` is the bound returned)."""
    return ((alpha - 1.0) * (alpha * rho - eps) - math.log(alpha - 1.0)
            + alpha * math.log1p(-1.0 / alpha))


#: Relative rounding allowance of :func:`_log_delta_up`: far above the few ulps (2⁻⁵³ ≈ 1.1e-16
#: each) that its three terms, their sum and ``exp`` can lose, far below any budget's digits.
_ROUNDING = 1e-14


def _log_delta_up(rho: float, eps: float, alpha: float) -> float:
    """:func:`_log_delta` rounded up: the float sum of its three terms plus
    :data:`_ROUNDING` × (1 + the sum of their magnitudes), which bounds the error of the float
    evaluation and of the ``exp`` after it, so ``exp`` of this is never below the exact δ of
    the order α — every α gives a valid δ only if it is evaluated in the safe direction."""
    t1 = (alpha - 1.0) * (alpha * rho - eps)
    t2 = -math.log(alpha - 1.0)
    t3 = alpha * math.log1p(-1.0 / alpha)
    return t1 + t2 + t3 + _ROUNDING * (1.0 + abs(t1) + abs(t2) + abs(t3))


#: The search grid of :func:`delta_for_epsilon` (fixed: computed once).
_NEAR_ONE = 1.0 + np.geomspace(1e-9, 1.0, 81)
_AROUND = np.geomspace(0.05, 20.0, 161)


def _log_delta_grid(rho: float, eps: float, alpha: np.ndarray) -> np.ndarray:
    """:func:`_log_delta` at every order of ``alpha`` at once (the grid search's values; the
    refinement and the returned bound use :func:`_log_delta` itself)."""
    return ((alpha - 1.0) * (alpha * rho - eps) - np.log(alpha - 1.0)
            + alpha * np.log1p(-1.0 / alpha))


def _centres(rho: float, eps: float) -> tuple[float, float]:
    """Two estimates of the minimising order, the grid of :func:`delta_for_epsilon` is laid
    around both. The derivative of the log-δ in α is (2α − 1)ρ − ε + ln(1 − 1/α); with
    ln(1 − 1/α) ≈ −1/α its zero is α = a + √(a² + 1/(2ρ)), a = (ε + ρ)/(4ρ), which is right
    also for ε ≲ √ρ (where the minimiser is near 1/√(2ρ)); and the Bun–Steinke optimum
    (ε + ρ)/(2ρ) + 1, its large-ε limit."""
    a = (eps + rho) / (4.0 * rho)
    return (max(1.0 + 1e-9, a + math.sqrt(a * a + 0.5 / rho)),
            max(1.0 + 1e-9, (eps + rho) / (2.0 * rho) + 1.0))


def delta_for_epsilon(rho: float, eps: float) -> float:
    """δ(ε) of a ρ-zCDP mechanism (CKS20 Cor. 13): an upper bound on the true δ.

    The order α is searched (a grid, then a bounded scalar refinement); whichever α is found,
    the δ returned is its bound rounded up (:func:`_log_delta_up`), so an imperfect search can
    only make δ larger."""
    if not (rho >= 0 and math.isfinite(rho)):
        raise TesseraError(f"ρ must be finite and ≥ 0, got {rho!r}")
    if rho == 0.0:
        return 0.0
    if eps < 0:
        raise TesseraError(f"ε must be ≥ 0, got {eps!r}")
    # search around the estimates of the minimiser, and down to α → 1⁺ (small ε with large ρ
    # has its minimum there)
    grid = np.concatenate([_NEAR_ONE, *(c * _AROUND for c in _centres(rho, eps))])
    grid = np.unique(grid[grid > 1.0 + 1e-12])
    values = _log_delta_grid(rho, eps, grid)
    i = int(np.argmin(values))
    lo = float(grid[max(i - 1, 0)])
    hi = float(grid[min(i + 1, len(grid) - 1)])
    alpha = float(grid[i])
    best = _log_delta(rho, eps, alpha)  # the scalar formula, as the refinement
    if hi > lo:
        res = minimize_scalar(lambda a: _log_delta(rho, eps, a), bounds=(lo, hi),
                              method="bounded", options={"xatol": 1e-10 * hi})
        if res.success and res.fun < best:
            alpha = float(res.x)
    return float(min(1.0, math.exp(_log_delta_up(rho, eps, alpha))))


def bisect(below: Callable[[float], bool], lo: float, hi: float,
           near: tuple[float, float] | None = None) -> tuple[float, float]:
    """Shrink [lo, hi] around the boundary of a monotone predicate, ``below(lo)`` true and
    ``below(hi)`` false, to a relative width of 1e-12: the caller keeps the end that is safe
    for it (``lo`` satisfies the predicate, ``hi`` does not).

    ``near = (a, b)``: the boundary is known to lie in [a, b] (a closed form of it, with an
    allowance), so a midpoint below ``a`` is taken as ``below`` and one above ``b`` as not,
    without evaluating the predicate: the same midpoints as without ``near`` (the same
    result, if the boundary is in [a, b]), but the predicate is evaluated only at the few
    inside [a, b]. The end the caller keeps may then be one never evaluated: it must check
    it (:func:`epsilon_for_delta`, :func:`rho_for_epsilon_delta` do)."""
    a, b = near if near is not None else (-math.inf, math.inf)
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if mid < a or (mid <= b and below(mid)):
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    return lo, hi


#: Relative allowance around the closed-form boundaries (:func:`epsilon_closed_form`,
#: :func:`rho_closed_form`) inside which the bisections evaluate their predicate: far above the
#: optimiser's and the floats' errors in them (≈ 2e-12 relative at most over random ε, δ, ρ:
#: tests/accounting/test_zcdp.py), far below a budget's digits; ~log₂(2·10⁻¹⁰ / 10⁻¹²) ≈ 8
#: evaluations instead of ~45 per bisection.
CLOSED_FORM_ALLOWANCE = 1e-10

#: Orders searched by the closed forms (α − 1 over 18 decades; refined by a scalar search).
_ORDERS = 1.0 + np.geomspace(1e-9, 1e9, 721)


def _extreme_over_orders(f: Callable[[np.ndarray], np.ndarray]) -> float:
    """min over α > 1 of ``f`` (vectorised): a grid of orders, then a bounded scalar search
    between the grid neighbours of the best."""
    values = f(_ORDERS)
    i = int(np.argmin(values))
    lo, hi = float(_ORDERS[max(i - 1, 0)]), float(_ORDERS[min(i + 1, len(_ORDERS) - 1)])
    best = float(values[i])
    res = minimize_scalar(lambda a: float(f(np.array([a]))[0]), bounds=(lo, hi),
                          method="bounded", options={"xatol": 1e-13 * hi})
    return min(best, float(res.fun)) if res.success else best


def epsilon_closed_form(rho: float, delta: float) -> float:
    """ε(δ) of ρ-zCDP without a bisection: the CKS20 bound at order α equals δ exactly at
    ε_α = αρ − (ln δ + ln(α − 1) − α ln(1 − 1/α)) / (α − 1), so ε(δ) = min over α of ε_α (an
    estimate: only the window of :func:`epsilon_for_delta`'s bisection, never its result)."""
    ld = math.log(delta)
    return _extreme_over_orders(
        lambda a: a * rho - (ld + np.log(a - 1.0) - a * np.log1p(-1.0 / a)) / (a - 1.0))


def rho_closed_form(eps: float, delta: float) -> float:
    """The largest ρ with ρ-zCDP ⇒ (ε, δ)-DP without a bisection: solving the CKS20 bound at
    order α for ρ, ρ_α = (ε + (ln δ + ln(α − 1) − α ln(1 − 1/α)) / (α − 1)) / α, and ρ is the
    max over α of ρ_α (an estimate: only the window of :func:`rho_for_epsilon_delta`'s
    bisection, never its result)."""
    ld = math.log(delta)
    return -_extreme_over_orders(
        lambda a: -(eps + (ld + np.log(a - 1.0) - a * np.log1p(-1.0 / a)) / (a - 1.0)) / a)


def _window(x: float) -> tuple[float, float]:
    return x - CLOSED_FORM_ALLOWANCE * abs(x), x + CLOSED_FORM_ALLOWANCE * abs(x)


def epsilon_for_delta(rho: float, delta: float) -> float:
    """The smallest ε found with δ(ε) ≤ ``delta`` (bisection keeping the safe, upper end).

    The bisection evaluates δ(ε) only near the closed-form ε (:func:`bisect`'s ``near``); both
    ends it stops at are then checked, δ(ε) ≤ ``delta`` at the ε returned and not at the other
    (valid and tight); should either fail (the closed form off by more than its allowance),
    the whole bisection runs, every midpoint evaluated."""
    if not 0.0 < delta < 1.0:
        raise TesseraError(f"δ must be in (0, 1), got {delta!r}")
    if rho == 0.0 or delta_for_epsilon(rho, 0.0) <= delta:  # (tiny ρ, large δ: ε = 0 holds)
        return 0.0
    hi = rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))  # Bun–Steinke: always enough
    while delta_for_epsilon(rho, hi) > delta:  # (cannot happen in exact arithmetic)
        hi *= 1.0 + 1e-9
    above = _remembered(lambda e: delta_for_epsilon(rho, e) > delta)
    lo, eps = bisect(above, 0.0, hi, _window(epsilon_closed_form(rho, delta)))
    if not above(eps) and (lo == 0.0 or above(lo)):  # checked at both ends: valid and tight
        return eps
    return bisect(above, 0.0, hi)[1]  # (the closed form was off: every midpoint evaluated)


def _remembered(predicate: Callable[[float], bool]) -> Callable[[float], bool]:
    """``predicate`` with its values kept (the ends' checks re-ask the bisection's last ones)."""
    seen: dict[float, bool] = {}

    def ask(x: float) -> bool:
        if x not in seen:
            seen[x] = predicate(x)
        return seen[x]
    return ask


@functools.lru_cache(maxsize=1024)
def rho_for_epsilon_delta(eps: float, delta: float) -> float:
    """The largest ρ found such that ρ-zCDP ⇒ (ε, δ)-DP (bisection keeping the lower end).
    Pure: memoised (a ledger, a plan and a run convert the same budget).

    The bisection's predicate is the checks' own, :func:`epsilon_for_delta` (ρ) ≤ ε; it is
    evaluated only near the closed-form ρ (:func:`rho_closed_form`, :func:`bisect`'s
    ``near``), so the ρ is the float the full bisection finds, and both ends are checked: the ρ
    returned meets the predicate and the end above it (within 1e-12, relative) does not.
    Should either check fail, the full bisection runs, every midpoint evaluated."""
    if not (eps > 0 and math.isfinite(eps)):
        raise TesseraError(f"ε must be finite and > 0, got {eps!r}")
    if not 0.0 < delta < 1.0:
        raise TesseraError(f"δ must be in (0, 1), got {delta!r}")
    meets = _remembered(lambda r: epsilon_for_delta(r, delta) <= eps)  # the checks' own test
    near = _window(rho_closed_form(eps, delta))
    lo, hi = 0.0, max(eps, 1.0)
    while hi < near[0] or (hi <= near[1] and meets(hi)):
        lo, hi = hi, 2.0 * hi
    lo, hi = bisect(meets, lo, hi, near)
    if not (lo > 0 and meets(lo) and not meets(hi)):  # checked at both ends: valid and tight
        lo, hi = 0.0, max(eps, 1.0)  # (the closed form was off: every midpoint evaluated)
        while meets(hi):
            lo, hi = hi, 2.0 * hi
        lo = bisect(meets, lo, hi)[0]
    if not (lo > 0 and meets(lo)):
        raise TesseraError(f"no ρ > 0 meets (ε, δ) = ({eps}, {delta})")
    return lo
