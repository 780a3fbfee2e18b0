"""Noise and private selection over OpenDP (docs/theory.md §7).

* :class:`DiscreteLaplace` — geometric mechanism (Ghosh–Roughgarden–Sundararajan), pure
  ε = Δ/b; OpenDP ``make_laplace`` on integers.
* :class:`DiscreteGaussian` — Canonne–Kamath–Steinke (arXiv:2004.00010): ρ = Δ²/(2σ²)-zCDP
  and the tight (ε, δ) profile of their Thm 7; OpenDP ``make_gaussian`` on integers.
* :class:`ExponentialMechanism` — McSherry–Talwar, P[i] ∝ exp(ε s_i/(2Δ)); OpenDP
  ``make_noisy_max`` with Gumbel noise.

All randomness is OpenDP's secure randomness (:meth:`NoiseSource.secure`, the default); a
seeded numpy :meth:`NoiseSource.seeded` exists for tests and marks everything it produces
``private=False``. Every output carries a :class:`MechanismRecord` saying which mechanism ran.

Each module also has the vectorised functions, e.g. ``discrete_laplace.sample(values, scales,
source)`` and ``discrete_laplace.interval_halfwidth(scale, level)``; the most used are
re-exported below under unambiguous names.
"""

from tessera.mechanisms import discrete_gaussian, discrete_laplace, exponential
from tessera.mechanisms.discrete_gaussian import (
    DiscreteGaussian,
    delta_for_epsilon,
    epsilon_for_delta,
)
from tessera.mechanisms.discrete_laplace import DiscreteLaplace
from tessera.mechanisms.exponential import ExponentialMechanism, selection_probabilities
from tessera.mechanisms.randomness import NoiseSource
from tessera.mechanisms.record import MechanismRecord, NoisyRelease, Selection

sample_discrete_laplace = discrete_laplace.sample
sample_discrete_gaussian = discrete_gaussian.sample
select_exponential = exponential.select
laplace_interval_halfwidth = discrete_laplace.interval_halfwidth
gaussian_interval_halfwidth = discrete_gaussian.interval_halfwidth

__all__ = [
    "DiscreteGaussian",
    "DiscreteLaplace",
    "ExponentialMechanism",
    "MechanismRecord",
    "NoiseSource",
    "NoisyRelease",
    "Selection",
    "delta_for_epsilon",
    "discrete_gaussian",
    "discrete_laplace",
    "epsilon_for_delta",
    "exponential",
    "gaussian_interval_halfwidth",
    "laplace_interval_halfwidth",
    "sample_discrete_gaussian",
    "sample_discrete_laplace",
    "select_exponential",
    "selection_probabilities",
]
