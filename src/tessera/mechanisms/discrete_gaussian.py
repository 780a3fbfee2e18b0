"""The discrete Gaussian mechanism on integer answers (docs/theory.md §7).

Release q(D) + Z, Z ~ N_ℤ(0, σ²) i.i.d. per coordinate, where

    P[Z = z] = e^{−z²/(2σ²)} / C(σ),   C(σ) = Σ_{y∈ℤ} e^{−y²/(2σ²)},

(Canonne, Kamath, Steinke, "The Discrete Gaussian for Differential Privacy", NeurIPS 2020,
arXiv:2004.00010; "CKS20" below). What is *proven*, and what Tessera therefore claims:

* **ρ-zCDP, exactly:** for L2 sensitivity Δ the mechanism is ρ-zCDP with ρ = Δ²/(2σ²)
  (CKS20 Thm 4; the multivariate statement in the same paper gives the L2 version), the zCDP of
  Bun and Steinke ("Concentrated Differential Privacy: Simplifications, Extensions, and Lower
  Bounds", TCC 2016, arXiv:1605.02065).
* **(ε, δ)-DP, tightly:** for a scalar integer query with sensitivity Δ, CKS20 Thm 7 gives the
  exact privacy profile

      δ(ε) = P[Z > εσ²/Δ − Δ/2] − e^ε · P[Z > εσ²/Δ + Δ/2],

  computed here as an *upper bound* (:func:`delta_for_epsilon`), and :func:`epsilon_for_delta`
  inverts it on the safe side.

It is **not** exactly μ-GDP: its trade-off function is that of a discrete distribution, not
G_{Δ/σ}, so Tessera never reports μ = Δ/σ for it (CKS20 show the two are close, not equal).
Use ρ for composition, or the profile above.

Sampling: OpenDP's ``make_gaussian`` on ``vector_domain(atom_domain(T="i64"))`` with
``l2_distance(T="i64")`` — on an integer domain it is OpenDP's exact discrete Gaussian sampler
(CKS20 Algorithm 3) with ``scale`` = σ, from secure randomness; one measurement per distinct σ.
The seeded test path runs the same Algorithm 3 with numpy: t = ⌊σ⌋ + 1, Y ~ DLap(t), accept
with probability exp(−(|Y| − σ²/t)²/(2σ²)).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from scipy.special import log_ndtr, logsumexp

from tessera.errors import ResourceError, TesseraError
from tessera.mechanisms.batch import as_integer_values, as_parameters, by_parameter
from tessera.mechanisms.randomness import NoiseSource, opendp_prelude
from tessera.mechanisms.record import MechanismRecord, NoisyRelease, float_at_least
from tessera.privacy import Definition

__all__ = [
    "DiscreteGaussian",
    "coverage",
    "delta_for_epsilon",
    "epsilon_for_delta",
    "interval_halfwidth",
    "log_delta_for_epsilon",
    "normaliser",
    "pmf",
    "rho",
    "sample",
    "variance",
]

OPENDP_NAME = "discrete Gaussian (OpenDP make_gaussian)"
SEEDED_NAME = "discrete Gaussian (seeded numpy, CKS20 rejection sampler)"
#: Largest σ for the O(σ) numerical functions (profile, interval, variance).
MAX_NUMERIC_SIGMA = 1e8
_CHUNK = 1 << 20
_U = np.finfo(np.float64).eps


def _check_sigma(sigma: float) -> float:
    s = float(sigma)
    if not (math.isfinite(s) and s > 0):
        raise TesseraError(f"the discrete Gaussian σ must be finite and positive, got {sigma!r}")
    return s


def _check_numeric_sigma(sigma: float) -> float:
    s = _check_sigma(sigma)
    if s > MAX_NUMERIC_SIGMA:
        raise ResourceError(
            f"σ = {s:g}: this computation sums O(σ) terms, refused above {MAX_NUMERIC_SIGMA:g}",
            hint="use the ρ-zCDP guarantee for such a large σ",
        )
    return s


def rho(sigma: float, sensitivity: float = 1) -> float:
    """Privacy map: ρ = Δ²/(2σ²) for L2 sensitivity Δ (ρ-zCDP, CKS20 Thm 4; rounded up)."""
    if isinstance(sensitivity, bool) or not math.isfinite(float(sensitivity)) or sensitivity < 0:
        raise TesseraError(f"a sensitivity must be finite and non-negative, got {sensitivity!r}")
    s = Fraction(_check_sigma(sigma))
    return float_at_least(Fraction(sensitivity) ** 2 / (2 * s * s))


def normaliser(sigma: float) -> float:
    """C(σ) = Σ_y e^{−y²/(2σ²)}, to double precision.

    For σ ≥ 1 by Poisson summation, C = σ√(2π) (1 + 2 Σ_{k≥1} e^{−2π²σ²k²}) (three terms are
    far beyond double precision); for σ < 1 by the direct sum over |y| ≤ 12σ + 10.
    """
    s = _check_sigma(sigma)
    if s >= 1.0:
        k = np.arange(1, 4, dtype=np.float64)
        theta = 1.0 + 2.0 * float(np.exp(-2 * (math.pi * s * k) ** 2).sum())
        return s * math.sqrt(2 * math.pi) * theta
    y = np.arange(1, math.ceil(12 * s + 10) + 1, dtype=np.float64)
    return 1.0 + 2.0 * float(np.exp(-(y * y) / (2 * s * s)).sum())


def _normaliser_lower(s: float) -> float:
    """A lower bound of C(σ): partial sums of positive series, lowered by 1e-12 for rounding."""
    poisson = s * math.sqrt(2 * math.pi) * (1.0 + 2.0 * math.exp(-2 * (math.pi * s) ** 2))
    if s < 4.0:
        y = np.arange(1, math.ceil(12 * s + 10) + 1, dtype=np.float64)
        direct = 1.0 + 2.0 * float(np.exp(-(y * y) / (2 * s * s)).sum())
        poisson = max(poisson, direct)
    return poisson * (1.0 - 1e-12)


def pmf(k: np.ndarray | int, sigma: float) -> np.ndarray:
    """P[Z = k] = e^{−k²/(2σ²)}/C(σ)."""
    s = _check_sigma(sigma)
    kk = np.asarray(k, dtype=np.float64)
    return np.exp(-(kk * kk) / (2 * s * s)) / normaliser(s)


def _half_weights(s: float) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(y, e^{−y²/(2σ²)}) for y = 1 … ⌈12σ + 10⌉ in chunks (mass beyond is < e^{−72})."""
    top = math.ceil(12 * s + 10)
    for start in range(1, top + 1, _CHUNK):
        y = np.arange(start, min(start + _CHUNK, top + 1), dtype=np.float64)
        yield y, np.exp(-(y * y) / (2 * s * s))


def variance(sigma: float) -> float:
    """Var Z = 2 Σ_{y≥1} y² e^{−y²/(2σ²)} / C(σ) (≤ σ², CKS20): summed numerically for σ < 8;
    above, by Poisson summation, Var Z = σ² (1 − 8π²σ² Σ_k k² q^{k²} / (1 + 2 Σ_k q^{k²})),
    q = e^{−2π²σ²} < e^{−1263}: σ² to double precision."""
    s = _check_sigma(sigma)
    if s >= 8.0:
        return s * s
    s = _check_numeric_sigma(s)
    total = sum(float((y * y * w).sum()) for y, w in _half_weights(s))
    return 2.0 * total / normaliser(s)


def coverage(k: int, sigma: float) -> float:
    """P[|Z| ≤ k], normalised numerically over ±(12σ + 10)."""
    s = _check_numeric_sigma(sigma)
    if k < 0:
        return 0.0
    inside = 1.0
    total = 1.0
    for y, w in _half_weights(s):
        total += 2.0 * float(w.sum())
        inside += 2.0 * float(w[y <= k].sum())
    return inside / total


def interval_halfwidth(sigma: float, level: float = 0.95) -> int:
    """The smallest integer k ≥ 0 with P[|Z| ≤ k] ≥ level, by summing the pmf exactly.

    The pmf is normalised numerically over ±(12σ + 10) (the mass outside is below e^{−72}).
    """
    s = _check_numeric_sigma(sigma)
    if not 0.0 < level < 1.0:
        raise TesseraError(f"a coverage level must be in (0, 1), got {level!r}")
    if s >= LARGE_SIGMA and level < 1.0 - 1e-6:
        return _wide_halfwidth(s, level)
    total = 1.0 + 2.0 * sum(float(w.sum()) for _, w in _half_weights(s))
    if 1.0 / total >= level:
        return 0
    inside = 1.0
    for y, w in _half_weights(s):
        cum = inside + 2.0 * np.cumsum(w)
        hit = np.flatnonzero(cum / total >= level)
        if hit.size:
            return int(y[hit[0]])
        inside = float(cum[-1])
    return math.ceil(12 * s + 10)  # pragma: no cover - level < 1 is reached before the end


#: From this σ on, :func:`interval_halfwidth` is the normal one widened (O(1), not O(σ)).
LARGE_SIGMA = 10_000.0


def _wide_halfwidth(s: float, level: float) -> int:
    """A half-width k with P[|Z| ≤ k] ≥ level for σ ≥ :data:`LARGE_SIGMA`, in O(1) (a sum's
    noise in fine units has σ in the millions; the exact sum would take σ steps).

    By the midpoint rule with Euler–Maclaurin's remainder, Σ_{|y|≤k} e^{−y²/(2σ²)} is
    ∫_{−k−½}^{k+½} e^{−t²/(2σ²)} dt within ∫|f''|/24 < 0.1/σ, and C(σ) = σ√(2π) within a
    relative e^{−2π²σ²} (Poisson): P[|Z| ≤ k] ≥ P[|N(0, σ²)| ≤ k + ½] − 10^−9 for σ ≥ 10^4.
    So k = ⌈σ·z − ½⌉ + 1 with z the normal quantile of level + 10^−8 covers at least ``level``
    (the +1 absorbs the float rounding of σ·z), at most two steps above the exact k."""
    from statistics import NormalDist

    z = NormalDist().inv_cdf(0.5 + 0.5 * min(level + 1e-8, 1.0 - 1e-12))
    return max(0, math.ceil(s * z - 0.5) + 1)


def _log_delta_shift(s: float, eps: float, k: int) -> float:
    """log of an upper bound of δ(ε) for the pair N_ℤ(0, σ²), N_ℤ(k, σ²) (CKS20 Thm 7).

    δ_k(ε) = Σ_x p(x) (1 − e^{ε − L(x)}), over integers x with L(x) = (2xk + k²)/(2σ²) > ε,
    i.e. x > a = εσ²/k − k/2; every term is non-negative. Upper-bounding: C(σ) is replaced by a
    lower bound, L(x) − ε is raised by a bound on its rounding error, the sum beyond x_top by
    ∫_{x_top}^∞ e^{−x²/(2σ²)} dx = σ√(2π) Φ(−x_top/σ), and the total by a relative 1e-9.
    """
    two_s2 = 2.0 * s * s
    a = eps * s * s / k - k / 2.0
    x_start = math.floor(a)
    base = max(x_start, 0)
    # beyond x_top the terms are below e^{-60} of the largest one
    x_top = max(math.ceil(math.sqrt(base * base + 120.0 * s * s)) + 2, x_start + 2)
    twoeps_s2 = 2.0 * eps * s * s
    logs: list[float] = []
    for start in range(x_start, x_top + 1, _CHUNK):
        x = np.arange(start, min(start + _CHUNK, x_top + 1), dtype=np.float64)
        num = 2.0 * x * k + k * k
        d = (num - twoeps_s2) / two_s2
        d_up = d + 8 * _U * (np.abs(num) + twoeps_s2) / two_s2 + 8 * _U * np.abs(d)
        keep = d_up > 0
        if not keep.any():
            continue
        factor = -np.expm1(-d_up[keep]) * (1 + 4 * _U)
        logs.append(float(logsumexp(-(x[keep] ** 2) / two_s2 + np.log(factor))))
    logs.append(math.log(s * math.sqrt(2 * math.pi)) + float(log_ndtr(-x_top / s)))
    return float(logsumexp(logs)) - math.log(_normaliser_lower(s)) + math.log1p(1e-9)


def log_delta_for_epsilon(sigma: float, eps: float, sensitivity: int = 1) -> float:
    """log of :func:`delta_for_epsilon` before clamping (an upper bound of log δ(ε), capped at 0).

    Useful where δ(ε) is below the smallest float.
    """
    s = _check_numeric_sigma(sigma)
    if not (math.isfinite(eps) and eps >= 0):
        raise TesseraError(f"ε must be finite and non-negative, got {eps!r}")
    if isinstance(sensitivity, bool) or int(sensitivity) != sensitivity or sensitivity < 1:
        raise TesseraError(
            f"the discrete Gaussian profile needs an integer sensitivity ≥ 1, got {sensitivity!r}"
        )
    shifts = range(1, int(sensitivity) + 1)
    return min(0.0, max(_log_delta_shift(s, float(eps), k) for k in shifts))


def delta_for_epsilon(sigma: float, eps: float, sensitivity: int = 1) -> float:
    """δ(ε) of the discrete Gaussian on a scalar integer query, CKS20 Thm 7, as an upper bound.

    δ(ε) = P[Z > εσ²/Δ − Δ/2] − e^ε P[Z > εσ²/Δ + Δ/2] is the hockey-stick divergence of the
    worst pair N_ℤ(0,σ²), N_ℤ(Δ,σ²). Neighbouring answers may differ by any integer 1 … Δ, so
    the maximum over those shifts is returned (it is the shift-Δ value when δ grows with the
    shift, as CKS20 state). Summed over the support with a tail bound (see
    :func:`_log_delta_shift`); the result is never below the true δ, and is at least the
    smallest positive float (δ > 0 for every ε). Cost O(σ + Δ) per shift.
    """
    log_delta = log_delta_for_epsilon(sigma, eps, sensitivity)
    return min(1.0, max(math.exp(log_delta), math.ulp(0.0)))


def epsilon_for_delta(sigma: float, delta: float, sensitivity: int = 1) -> float:
    """The smallest ε (to a relative 1e-10, rounded up) with :func:`delta_for_epsilon` ≤ δ.

    Bisection on the upper bound δ̂(ε) ≥ δ(ε), keeping the end where δ̂(ε) ≤ δ: so the returned
    ε is a valid (ε, δ)-DP guarantee (safe direction). 0 when δ̂(0) ≤ δ.
    """
    if not (0.0 < delta < 1.0):
        raise TesseraError(
            f"δ must be in (0, 1), got {delta!r}",
            hint="δ = 0 would be pure DP, which the discrete Gaussian does not satisfy",
        )
    profile = functools.partial(delta_for_epsilon, sigma, sensitivity=sensitivity)
    if profile(0.0) <= delta:
        return 0.0
    r = rho(sigma, sensitivity)
    hi = max(1e-6, r + 2.0 * math.sqrt(r * math.log(1.0 / delta)))  # Bun–Steinke Prop 1.3
    while profile(hi) > delta:
        hi *= 2.0
    lo = 0.0
    while hi - lo > 1e-10 * hi:
        mid = 0.5 * (lo + hi)
        if profile(mid) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


@functools.lru_cache(maxsize=4096)
def _measurement(sigma: float) -> Any:
    dp = opendp_prelude()
    space = dp.vector_domain(dp.atom_domain(T="i64")), dp.l2_distance(T="i64")
    return dp.m.make_gaussian(*space, scale=sigma)


def _seeded_noise(sigmas: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """CKS20 Algorithm 3 with numpy (test only): Y ~ DLap(⌊σ⌋ + 1), accept w.p.
    exp(−(|Y| − σ²/t)²/(2σ²)); the accepted Y has law N_ℤ(0, σ²)."""
    out = np.zeros(sigmas.size, dtype=np.int64)
    pending = np.arange(sigmas.size)
    while pending.size:
        s = sigmas[pending]
        t = np.floor(s) + 1.0
        p = -np.expm1(-1.0 / t)
        y = rng.geometric(p) - rng.geometric(p)  # not-privacy-noise: seeded test path
        accept = rng.random(pending.size) < np.exp(-((np.abs(y) - s * s / t) ** 2) / (2 * s * s))
        out[pending[accept]] = y[accept]
        pending = pending[~accept]
    return out


def record(sigmas: np.ndarray | float, source: NoiseSource) -> MechanismRecord:
    """The record of a discrete Gaussian run with these σ from this source."""
    arr = np.atleast_1d(np.asarray(sigmas, dtype=np.float64))
    single = arr.size > 0 and bool(np.all(arr == arr[0]))
    return MechanismRecord(
        name=OPENDP_NAME if source.private else SEEDED_NAME,
        definition=Definition.ZCDP,
        parameter="σ",
        value=float(arr[0]) if single else None,
        private=source.private,
    )


def sample(
    values: np.ndarray | list[int],
    sigmas: np.ndarray | float,
    source: NoiseSource | None = None,
) -> NoisyRelease:
    """values[i] + N_ℤ(0, sigmas[i]²) for every i (vectorised; ``source`` defaults to secure).

    With the secure source, OpenDP ``make_gaussian`` is built once per distinct σ and run on the
    sub-vector of answers with that σ. The output has the shape of ``values``.
    """
    source = NoiseSource.secure() if source is None else source
    shape = np.shape(values)
    x = as_integer_values(values)
    sg = as_parameters(sigmas, x.size, "discrete Gaussian σ")
    if source.private:
        out = np.empty_like(x)
        for sigma, where in by_parameter(sg):
            out[where] = np.asarray(_measurement(sigma)(np.ascontiguousarray(x[where])))
    else:
        out = x + _seeded_noise(sg, source.generator)
    return NoisyRelease(values=out.reshape(shape), parameters=sg.reshape(shape),
                        mechanism=record(sg, source))


@dataclass(frozen=True)
class DiscreteGaussian:
    """The discrete Gaussian N_ℤ(0, σ²) and the mechanism adding it (see module doc)."""

    sigma: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", _check_sigma(self.sigma))

    @staticmethod
    def for_rho(rho: float, sensitivity: float = 1) -> DiscreteGaussian:
        """The smallest float σ with Δ²/(2σ²) ≤ ρ (ρ-zCDP for L2 sensitivity Δ)."""
        if not (math.isfinite(rho) and rho > 0):
            raise TesseraError(f"ρ must be finite and positive, got {rho!r}")
        if not (math.isfinite(float(sensitivity)) and sensitivity > 0):
            raise TesseraError(f"a sensitivity must be finite and positive, got {sensitivity!r}")
        sigma = float(sensitivity) / math.sqrt(2.0 * rho)
        while Fraction(sensitivity) ** 2 / (2 * Fraction(sigma) ** 2) > Fraction(rho):
            sigma = math.nextafter(sigma, math.inf)
        return DiscreteGaussian(sigma)

    @property
    def definition(self) -> Definition:
        """ρ-zCDP."""
        return Definition.ZCDP

    def rho(self, sensitivity: float = 1) -> float:
        """ρ = Δ²/(2σ²) (exact; rounded up)."""
        return rho(self.sigma, sensitivity)

    def delta_for_epsilon(self, eps: float, sensitivity: int = 1) -> float:
        """CKS20 Thm 7 δ(ε), an upper bound."""
        return delta_for_epsilon(self.sigma, eps, sensitivity)

    def epsilon_for_delta(self, delta: float, sensitivity: int = 1) -> float:
        """The smallest safe ε with δ(ε) ≤ δ."""
        return epsilon_for_delta(self.sigma, delta, sensitivity)

    def pmf(self, k: np.ndarray | int) -> np.ndarray:
        """P[Z = k]."""
        return pmf(k, self.sigma)

    @property
    def variance(self) -> float:
        """Var Z (numerically; at most σ², equal to it in double precision for σ ≳ 2)."""
        return variance(self.sigma)

    def interval_halfwidth(self, level: float = 0.95) -> int:
        """The smallest k with P[|Z| ≤ k] ≥ level."""
        return interval_halfwidth(self.sigma, level)

    def record(self, source: NoiseSource | None = None) -> MechanismRecord:
        """What a run of this mechanism from ``source`` (default secure) is."""
        return record(self.sigma, NoiseSource.secure() if source is None else source)

    def sample(
        self, values: np.ndarray | list[int], source: NoiseSource | None = None
    ) -> NoisyRelease:
        """values + N_ℤ(0, σ²) elementwise."""
        return sample(values, self.sigma, source)
