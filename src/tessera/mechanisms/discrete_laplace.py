"""The discrete Laplace (two-sided geometric) mechanism on integer answers (docs/theory.md §7).

For an integer query q with L1 sensitivity Δ (|q(D) − q(D′)|₁ ≤ Δ for neighbours), release
q(D) + Z with Z ~ DLap(b) i.i.d. per coordinate, where

    P[Z = z] = tanh(1/(2b)) · e^{−|z|/b},   z ∈ ℤ,

the *geometric mechanism* of Ghosh, Roughgarden and Sundararajan ("Universally
utility-maximizing privacy mechanisms", STOC 2009), in the parametrisation of OpenDP (``scale``
b) and of Canonne, Kamath and Steinke ("The Discrete Gaussian for Differential Privacy",
NeurIPS 2020, arXiv:2004.00010, §5.2). Since P[z]/P[z+d] ≤ e^{|d|/b}, it is pure ε-DP with

    ε = Δ / b         (exact, analytic; never through a PLD).

Var Z = 2e^{−1/b}/(1 − e^{−1/b})² = 1/(2 sinh²(1/(2b))), and for k ≥ 1

    P[|Z| ≥ k] = 2 e^{−k/b} / (1 + e^{−1/b}),

so the exact interval half-width at level ℓ is the smallest k with P[|Z| ≤ k] ≥ ℓ.

Sampling: OpenDP's ``make_laplace`` on ``vector_domain(atom_domain(T="i64"))`` with
``l1_distance(T="i64")`` — on an integer domain it samples the discrete Laplace exactly (CKS20
Algorithm 2, rational arithmetic) from OpenDP's secure randomness. One measurement is built per
distinct scale. The seeded test path draws Z = G₁ − G₂, G_i i.i.d. geometric with success
probability 1 − e^{−1/b} (numpy), which has exactly this law.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from tessera.errors import TesseraError
from tessera.mechanisms.batch import as_integer_values, as_parameters, by_parameter
from tessera.mechanisms.randomness import NoiseSource, opendp_prelude
from tessera.mechanisms.record import MechanismRecord, NoisyRelease, float_at_least
from tessera.privacy import Definition

__all__ = [
    "DiscreteLaplace",
    "coverage",
    "epsilon",
    "interval_halfwidth",
    "pmf",
    "sample",
    "variance",
]

OPENDP_NAME = "discrete Laplace (OpenDP make_laplace)"
SEEDED_NAME = "discrete Laplace (seeded numpy, difference of geometrics)"


def _check_scale(scale: float) -> float:
    b = float(scale)
    if not (math.isfinite(b) and b > 0):
        raise TesseraError(
            f"the discrete Laplace scale b must be finite and positive, got {scale!r}"
        )
    return b


def _check_sensitivity(sensitivity: float) -> Fraction:
    if isinstance(sensitivity, bool) or not math.isfinite(float(sensitivity)) or sensitivity < 0:
        raise TesseraError(f"a sensitivity must be finite and non-negative, got {sensitivity!r}")
    return Fraction(sensitivity)


def epsilon(scale: float, sensitivity: float = 1) -> float:
    """Privacy map: ε = Δ/b for L1 sensitivity Δ (pure DP; rounded up to a float)."""
    return float_at_least(_check_sensitivity(sensitivity) / Fraction(_check_scale(scale)))


def pmf(k: np.ndarray | int, scale: float) -> np.ndarray:
    """P[Z = k] = tanh(1/(2b)) e^{−|k|/b}."""
    b = _check_scale(scale)
    return math.tanh(0.5 / b) * np.exp(-np.abs(np.asarray(k, dtype=np.float64)) / b)


def variance(scale: float) -> float:
    """Var Z = 1/(2 sinh²(1/(2b))) = 2e^{−1/b}/(1 − e^{−1/b})²."""
    b = _check_scale(scale)
    return 0.5 / math.sinh(0.5 / b) ** 2


def _upper_tail(k: int, b: float) -> float:
    """P[|Z| ≥ k] (k ≥ 1) = 2 e^{−k/b}/(1 + e^{−1/b})."""
    return 2.0 * math.exp(-k / b) / (1.0 + math.exp(-1.0 / b))


def coverage(k: int, scale: float) -> float:
    """P[|Z| ≤ k] = 1 − 2 e^{−(k+1)/b}/(1 + e^{−1/b}) for integer k ≥ 0."""
    if k < 0:
        return 0.0
    return 1.0 - _upper_tail(int(k) + 1, _check_scale(scale))


#: The relative margin the closed-form half-width is widened by: T is computed in floats to
#: within a few ulps (2^-52 each), so b·T·MARGIN is never below the exact b·T.
MARGIN = Fraction(1) + Fraction(1, 2**46)


def interval_halfwidth(scale: float, level: float = 0.95) -> int:
    """The smallest integer k ≥ 0 with P[|Z| ≤ k] ≥ level (from the CDF), in closed form: O(1)
    for every scale b, however large (no search over k).

    P[|Z| > k] = 2e^{−(k+1)/b}/(1 + e^{−1/b}) ≤ α = 1 − level  ⇔  k + 1 ≥ b·T,  with

        T = log 2 − log(1 + e^{−1/b}) − log α = log1p(tanh(1/(2b))) − log1p(−level) > 0,

    two positive terms in log space (no overflow, no underflow, no cancellation: T is within
    a few ulps), so k = max(0, ⌈b·T⌉ − 1). The product is taken in exact rational arithmetic
    from the floats b and T (no rounding, no overflow for b near the float maximum) and
    widened by :data:`MARGIN` for T's rounding: k is never narrower than the exact half-width
    (coverage ≥ level), and equals it unless b·T lies within a relative 2^-46 below an
    integer (then it is one more).
    """
    b = _check_scale(scale)
    if not 0.0 < level < 1.0:
        raise TesseraError(f"a coverage level must be in (0, 1), got {level!r}")
    t = math.log1p(math.tanh(0.5 / b)) - math.log1p(-level)
    return max(0, math.ceil(Fraction(b) * Fraction(t) * MARGIN) - 1)


@functools.lru_cache(maxsize=4096)
def _measurement(scale: float) -> Any:
    dp = opendp_prelude()
    space = dp.vector_domain(dp.atom_domain(T="i64")), dp.l1_distance(T="i64")
    return dp.m.make_laplace(*space, scale=scale)


def _seeded_noise(scales: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Z = G₁ − G₂ with G_i ~ Geometric(1 − e^{−1/b}): P[Z = z] ∝ e^{−|z|/b} (test only)."""
    p = -np.expm1(-1.0 / scales)
    return rng.geometric(p) - rng.geometric(p)  # not-privacy-noise: seeded test path


def record(scales: np.ndarray | float, source: NoiseSource) -> MechanismRecord:
    """The record of a discrete Laplace run with these scales from this source."""
    arr = np.atleast_1d(np.asarray(scales, dtype=np.float64))
    single = arr.size > 0 and bool(np.all(arr == arr[0]))
    return MechanismRecord(
        name=OPENDP_NAME if source.private else SEEDED_NAME,
        definition=Definition.PURE,
        parameter="scale b",
        value=float(arr[0]) if single else None,
        private=source.private,
    )


def sample(
    values: np.ndarray | list[int],
    scales: np.ndarray | float,
    source: NoiseSource | None = None,
) -> NoisyRelease:
    """values[i] + DLap(scales[i]) for every i (vectorised; ``source`` defaults to secure).

    With the secure source, OpenDP ``make_laplace`` is built once per distinct scale and run on
    the sub-vector of answers with that scale. The output has the shape of ``values``.
    """
    source = NoiseSource.secure() if source is None else source
    shape = np.shape(values)
    x = as_integer_values(values)
    b = as_parameters(scales, x.size, "discrete Laplace scale b")
    if source.private:
        out = np.empty_like(x)
        for scale, where in by_parameter(b):
            out[where] = np.asarray(_measurement(scale)(np.ascontiguousarray(x[where])))
    else:
        out = x + _seeded_noise(b, source.generator)
    return NoisyRelease(values=out.reshape(shape), parameters=b.reshape(shape),
                        mechanism=record(b, source))


@dataclass(frozen=True)
class DiscreteLaplace:
    """The discrete Laplace distribution DLap(b) and the mechanism adding it (see module doc)."""

    scale: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", _check_scale(self.scale))

    @staticmethod
    def for_epsilon(epsilon: float, sensitivity: float = 1) -> DiscreteLaplace:
        """The smallest float scale b with Δ/b ≤ ε, i.e. b ≥ Δ/ε (ε-DP for L1 sensitivity Δ)."""
        if not (math.isfinite(epsilon) and epsilon > 0):
            raise TesseraError(f"ε must be finite and positive, got {epsilon!r}")
        s = _check_sensitivity(sensitivity)
        if s == 0:
            raise TesseraError("a sensitivity of 0 needs no noise")
        return DiscreteLaplace(float_at_least(s / Fraction(epsilon)))

    @property
    def definition(self) -> Definition:
        """Pure ε-DP."""
        return Definition.PURE

    def epsilon(self, sensitivity: float = 1) -> float:
        """ε = Δ/b (pure DP, exact; rounded up)."""
        return epsilon(self.scale, sensitivity)

    def pmf(self, k: np.ndarray | int) -> np.ndarray:
        """P[Z = k]."""
        return pmf(k, self.scale)

    @property
    def variance(self) -> float:
        """Var Z."""
        return variance(self.scale)

    def interval_halfwidth(self, level: float = 0.95) -> int:
        """The smallest k with P[|Z| ≤ k] ≥ level."""
        return interval_halfwidth(self.scale, level)

    def record(self, source: NoiseSource | None = None) -> MechanismRecord:
        """What a run of this mechanism from ``source`` (default secure) is."""
        return record(self.scale, NoiseSource.secure() if source is None else source)

    def sample(
        self, values: np.ndarray | list[int], source: NoiseSource | None = None
    ) -> NoisyRelease:
        """values + DLap(b) elementwise."""
        return sample(values, self.scale, source)
