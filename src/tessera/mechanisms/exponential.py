"""The exponential mechanism for private selection (docs/theory.md §7).

Given scores s_1 … s_m whose sensitivity is Δ (every |s_i(D) − s_i(D′)| ≤ Δ for neighbours),
select index i with probability

    P[i] = exp(ε s_i / (2Δ)) / Σ_j exp(ε s_j / (2Δ))

(McSherry and Talwar, "Mechanism Design via Differential Privacy", FOCS 2007). This is pure
ε-DP. Note the 2: with exp(ε s_i/Δ), as some texts write it, the mechanism is only 2ε-DP unless
the scores are monotone (all move in the same direction between neighbours). It is also
ε-bounded-range, hence ε²/8-zCDP (Cesar and Rogers, "Bounding, Concentrating, and Truncating:
Unifying Privacy Loss Composition for Data Analytics", ALT 2021), which :meth:`rho` reports.

Sampling is Gumbel-max: argmax_i (s_i + G_i), G_i i.i.d. Gumbel with scale β = 2Δ/ε, has
exactly the law above. OpenDP (0.14.2 to 0.16: the range ``pyproject.toml`` allows, each
checked by tests/mechanisms) implements it as ``make_noisy_max`` with the
**zero-concentrated-divergence** output measure, and ``scale`` = β:

* ``make_noisy_max(..., output_measure=max_divergence(), scale)`` does *not* sample the
  exponential mechanism in 0.16: it adds *exponential* noise (report-noisy-max with exponential
  noise, equivalent to permute-and-flip; ε = 2Δ/scale), a different selection law. The
  deprecated ``make_report_noisy_max_gumbel`` delegates to it and also uses exponential noise.
* With ``zero_concentrated_divergence()`` the noise is Gumbel and OpenDP's own privacy map is
  ρ = (2Δ/scale)²/8 = ε²/8, which agrees with the bounded-range bound above; the pure ε-DP
  claim is McSherry–Talwar's for this law.

Float scores: the measurement is built on ``atom_domain(T=float, nan=False)`` (f64) and OpenDP
converts each score and the scale to exact arbitrary-precision numbers and compares the noisy
scores with lazily refined exact Gumbel samples, so float scores are handled without rounding
in the selection. Integer scores use ``T="i64"``. Scores must be finite (OpenDP itself would
silently clamp ±inf to the largest finite float). When all scores are equal OpenDP returns a
uniformly random index, which is the same law. The scale 2Δ/ε is rounded *up* to a float, so
the ε actually spent is at most the ε asked for.

The seeded test path is Gumbel-max with numpy on ε(s_i − max s)/(2Δ).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from scipy.special import logsumexp

from tessera.errors import TesseraError
from tessera.mechanisms.randomness import NoiseSource, opendp_prelude
from tessera.mechanisms.record import MechanismRecord, Selection, float_at_least
from tessera.privacy import Definition

__all__ = [
    "ExponentialMechanism",
    "epsilon",
    "gumbel_scale",
    "select",
    "selection_probabilities",
]

OPENDP_NAME = "exponential mechanism (OpenDP make_noisy_max, Gumbel noise)"
SEEDED_NAME = "exponential mechanism (seeded numpy Gumbel-max)"


def _check(epsilon: float, sensitivity: float) -> tuple[float, float]:
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise TesseraError(f"ε must be finite and positive, got {epsilon!r}")
    if not (math.isfinite(sensitivity) and sensitivity > 0):
        raise TesseraError(
            f"the score sensitivity Δ must be finite and positive, got {sensitivity!r}"
        )
    return float(epsilon), float(sensitivity)


def _scores(scores: np.ndarray | list[float]) -> np.ndarray:
    arr = np.asarray(scores)
    if arr.ndim != 1 or arr.size == 0:
        raise TesseraError(f"scores must be a non-empty vector, got shape {arr.shape}")
    if arr.dtype == np.bool_ or not (
        np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)
    ):
        raise TesseraError(f"scores must be numbers, got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float64)
        if not np.isfinite(arr).all():
            first = int(np.flatnonzero(~np.isfinite(arr))[0])
            raise TesseraError("scores must be finite", where=f"score {first}")
        return np.ascontiguousarray(arr)
    if int(arr.max()) > np.iinfo(np.int64).max or int(arr.min()) < np.iinfo(np.int64).min:
        raise TesseraError("integer scores must fit in 64 bits")
    return np.ascontiguousarray(arr, dtype=np.int64)


def selection_probabilities(
    scores: np.ndarray | list[float], epsilon: float, sensitivity: float = 1.0
) -> np.ndarray:
    """P[i] = softmax(ε s / (2Δ))_i, computed in log space (pure function, for tests/reports)."""
    eps, delta = _check(epsilon, sensitivity)
    u = _scores(scores).astype(np.float64)
    u = eps * (u - u.max()) / (2.0 * delta)
    return np.exp(u - logsumexp(u))


def gumbel_scale(epsilon: float, sensitivity: float = 1.0) -> float:
    """β = 2Δ/ε rounded up to a float (so 2Δ/β ≤ ε): the Gumbel scale OpenDP is given."""
    eps, delta = _check(epsilon, sensitivity)
    return float_at_least(2 * Fraction(delta) / Fraction(eps))


def epsilon(scale: float, sensitivity: float = 1.0) -> float:
    """Privacy map: Gumbel-max with scale β on scores of sensitivity Δ is ε-DP, ε = 2Δ/β.

    (McSherry–Talwar with ε s/(2Δ) = s/β; exact, rounded up.)
    """
    beta = float(scale)
    if not (math.isfinite(beta) and beta > 0):
        raise TesseraError(f"the Gumbel scale must be finite and positive, got {scale!r}")
    if not (math.isfinite(sensitivity) and sensitivity >= 0):
        raise TesseraError(f"a sensitivity must be finite and non-negative, got {sensitivity!r}")
    return float_at_least(2 * Fraction(sensitivity) / Fraction(beta))


@functools.lru_cache(maxsize=256)
def _measurement(scale: float, integer: bool) -> Any:
    dp = opendp_prelude()
    if integer:
        space = dp.vector_domain(dp.atom_domain(T="i64")), dp.linf_distance(T="i64")
    else:
        space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.linf_distance(T=float)
    return dp.m.make_noisy_max(*space, dp.zero_concentrated_divergence(), scale=scale)


def record(epsilon: float, source: NoiseSource) -> MechanismRecord:
    """The record of an exponential-mechanism run with this ε from this source."""
    return MechanismRecord(
        name=OPENDP_NAME if source.private else SEEDED_NAME,
        definition=Definition.PURE,
        parameter="ε",
        value=float(epsilon),
        private=source.private,
    )


def select(
    scores: np.ndarray | list[float],
    epsilon: float,
    sensitivity: float = 1.0,
    source: NoiseSource | None = None,
    runs: int = 1,
) -> Selection:
    """Run the exponential mechanism ``runs`` independent times on the same scores.

    Each run is ε-DP; ``runs`` runs cost runs·ε by sequential composition (``runs`` > 1 is
    meant for tests). With the secure source, each run is one call of OpenDP ``make_noisy_max``
    (zCDP measure, Gumbel noise, scale 2Δ/ε); the measurement is built once per scale.
    """
    source = NoiseSource.secure() if source is None else source
    eps, delta = _check(epsilon, sensitivity)
    s = _scores(scores)
    if isinstance(runs, bool) or int(runs) != runs or runs < 1:
        raise TesseraError(f"runs must be a positive integer, got {runs!r}")
    if source.private:
        meas = _measurement(gumbel_scale(eps, delta), np.issubdtype(s.dtype, np.integer))
        indices = np.fromiter((meas(s) for _ in range(int(runs))), dtype=np.int64, count=runs)
    else:
        u = eps * (s.astype(np.float64) - float(s.max())) / (2.0 * delta)
        g = source.generator.gumbel(size=(int(runs), s.size))  # not-privacy-noise: seeded test path
        indices = np.argmax(u[None, :] + g, axis=1).astype(np.int64)
    return Selection(indices=indices, mechanism=record(eps, source))


@dataclass(frozen=True)
class ExponentialMechanism:
    """The exponential mechanism with privacy parameter ε for scores of sensitivity Δ."""

    epsilon: float
    sensitivity: float = 1.0

    def __post_init__(self) -> None:
        eps, delta = _check(self.epsilon, self.sensitivity)
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "sensitivity", delta)

    @property
    def definition(self) -> Definition:
        """Pure ε-DP."""
        return Definition.PURE

    def privacy_epsilon(self, sensitivity: float | None = None) -> float:
        """Privacy map of one run: ε = 2Δ/β for scores of sensitivity Δ (default: the design Δ).

        With the design Δ this is at most :attr:`epsilon` (β is rounded up).
        """
        return epsilon(self.scale, self.sensitivity if sensitivity is None else sensitivity)

    def rho(self) -> float:
        """ε²/8: the zCDP of one run (ε-bounded range, Cesar–Rogers 2021; rounded up)."""
        return float_at_least(Fraction(self.epsilon) ** 2 / 8)

    @property
    def scale(self) -> float:
        """The Gumbel scale β = 2Δ/ε (rounded up) given to OpenDP."""
        return gumbel_scale(self.epsilon, self.sensitivity)

    def probabilities(self, scores: np.ndarray | list[float]) -> np.ndarray:
        """The selection law P[i] ∝ exp(ε s_i/(2Δ))."""
        return selection_probabilities(scores, self.epsilon, self.sensitivity)

    def record(self, source: NoiseSource | None = None) -> MechanismRecord:
        """What a run from ``source`` (default secure) is."""
        return record(self.epsilon, NoiseSource.secure() if source is None else source)

    def select(
        self, scores: np.ndarray | list[float], source: NoiseSource | None = None, runs: int = 1
    ) -> Selection:
        """Select an index (``runs`` independent times; each run costs ε)."""
        return select(scores, self.epsilon, self.sensitivity, source, runs)
