"""Exponential mechanism: selection frequencies against P[i] ∝ exp(ε s_i/(2Δ))."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tessera.errors import TesseraError
from tessera.mechanisms import (
    ExponentialMechanism,
    NoiseSource,
    exponential,
    selection_probabilities,
)
from tessera.mechanisms.randomness import opendp_prelude
from tessera.privacy import Definition
from tests.mechanisms.checks import P_REJECT, categorical_chi_square

FLOAT_SCORES = np.array([0.0, 0.3, 1.7, 2.2, 3.14159, -1.25])
INT_SCORES = np.array([0, 1, 2, 3, 5])
N_SEEDED = 100_000
N_SECURE = 10_000


def missing_factor_two(scores: np.ndarray, epsilon: float, sensitivity: float) -> np.ndarray:
    """The common mistake P[i] ∝ exp(ε s_i/Δ): only 2ε-DP for non-monotone scores."""
    return selection_probabilities(scores, 2 * epsilon, sensitivity)


def test_selection_probabilities_is_the_softmax() -> None:
    p = selection_probabilities([0.0, 2.0], epsilon=1.0, sensitivity=1.0)
    assert p[1] / p[0] == pytest.approx(math.e, rel=1e-14)  # exp(1·2/(2·1))
    p = selection_probabilities([1e300, -1e300, 1e300], epsilon=1.0)  # log space: no overflow
    assert p == pytest.approx([0.5, 0.0, 0.5])


# (d) seeded path: Gumbel-max with numpy


@pytest.mark.parametrize(("epsilon", "sensitivity"), [(1.0, 1.0), (1.3, 0.5)])
def test_seeded_selection_matches_probabilities(epsilon: float, sensitivity: float) -> None:
    draws = exponential.select(FLOAT_SCORES, epsilon, sensitivity, NoiseSource.seeded(8),
                               runs=N_SEEDED)
    assert not draws.private
    expected = selection_probabilities(FLOAT_SCORES, epsilon, sensitivity)
    assert categorical_chi_square(draws.indices, expected) > P_REJECT


def test_seeded_missing_factor_two_is_rejected() -> None:
    eps, delta = 1.3, 0.5
    buggy = exponential.select(FLOAT_SCORES, 2 * eps, delta, NoiseSource.seeded(8), runs=N_SEEDED)
    expected = selection_probabilities(FLOAT_SCORES, eps, delta)
    assert categorical_chi_square(buggy.indices, expected) < P_REJECT


# (d) the secure OpenDP path: make_noisy_max with Gumbel noise


def test_opendp_float_scores_match_probabilities() -> None:
    eps, delta = 1.3, 0.5
    draws = exponential.select(FLOAT_SCORES, eps, delta, runs=N_SECURE)
    assert draws.private
    assert categorical_chi_square(
        draws.indices, selection_probabilities(FLOAT_SCORES, eps, delta)
    ) > P_REJECT
    # the same test rejects the ε/Δ variant (missing factor 2)
    assert categorical_chi_square(
        draws.indices, missing_factor_two(FLOAT_SCORES, eps, delta)
    ) < P_REJECT


def test_opendp_integer_scores_match_probabilities() -> None:
    draws = exponential.select(INT_SCORES, 1.0, 2.0, runs=5_000)
    expected = selection_probabilities(INT_SCORES, 1.0, 2.0)
    assert categorical_chi_square(draws.indices, expected) > P_REJECT


@pytest.mark.slow
def test_opendp_selection_100k_draws() -> None:
    eps, delta = 1.0, 1.0
    draws = exponential.select(FLOAT_SCORES, eps, delta, runs=100_000)
    assert categorical_chi_square(
        draws.indices, selection_probabilities(FLOAT_SCORES, eps, delta)
    ) > P_REJECT
    assert categorical_chi_square(
        draws.indices, missing_factor_two(FLOAT_SCORES, eps, delta)
    ) < P_REJECT


def test_opendp_pure_dp_noisy_max_is_not_the_exponential_mechanism() -> None:
    """Why the zCDP measure is used: OpenDP 0.16's pure-DP noisy max adds exponential noise.

    With scale 1 on scores (0, 1): Gumbel gives P[1] = e/(1+e) ≈ 0.731, exponential noise
    1 − e^{-1}/2 ≈ 0.816. If this test fails, OpenDP changed its noisy-max distributions.
    """
    dp = opendp_prelude()
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.linf_distance(T=float)
    m = dp.m.make_noisy_max(*space, dp.max_divergence(), scale=1.0)
    scores = np.array([0.0, 1.0])
    picks = np.fromiter((m(scores) for _ in range(3_000)), dtype=np.int64)
    em = selection_probabilities(scores, epsilon=2.0, sensitivity=1.0)  # Gumbel scale 2Δ/ε = 1
    assert categorical_chi_square(picks, em) < P_REJECT
    assert categorical_chi_square(picks, np.array([math.exp(-1) / 2, 1 - math.exp(-1) / 2])) > (
        P_REJECT
    )


# privacy maps and records


def test_privacy_map_and_opendp_zcdp_map() -> None:
    em = ExponentialMechanism(epsilon=0.7, sensitivity=3.0)
    assert em.scale == pytest.approx(2 * 3.0 / 0.7, rel=1e-15)
    assert em.scale >= 2 * 3.0 / 0.7
    assert em.privacy_epsilon() <= 0.7
    assert em.privacy_epsilon() == pytest.approx(0.7, rel=1e-15)
    assert em.privacy_epsilon(sensitivity=1.5) == pytest.approx(0.35, rel=1e-15)
    assert em.definition is Definition.PURE
    dp = opendp_prelude()
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.linf_distance(T=float)
    m = dp.m.make_noisy_max(*space, dp.zero_concentrated_divergence(), scale=em.scale)
    assert m.map(3.0) == pytest.approx(em.rho(), rel=1e-12)  # ε²/8, bounded range
    assert em.rho() == pytest.approx(0.7**2 / 8, rel=1e-15)


def test_records() -> None:
    secure = ExponentialMechanism(1.0).select([1.0, 2.0, 3.0])
    assert 0 <= secure.index < 3
    assert secure.mechanism.name == "exponential mechanism (OpenDP make_noisy_max, Gumbel noise)"
    assert secure.mechanism.private and secure.mechanism.value == 1.0
    seeded = ExponentialMechanism(1.0).select([1.0, 2.0, 3.0], NoiseSource.seeded(0), runs=3)
    assert "NOT PRIVATE" in seeded.mechanism.describe()
    with pytest.raises(ValueError):
        _ = seeded.index


def test_validation() -> None:
    with pytest.raises(TesseraError, match="finite"):
        exponential.select([0.0, math.inf], 1.0)
    with pytest.raises(TesseraError, match="non-empty"):
        exponential.select([], 1.0)
    with pytest.raises(TesseraError):
        ExponentialMechanism(epsilon=0.0)
    with pytest.raises(TesseraError):
        ExponentialMechanism(epsilon=1.0, sensitivity=-1.0)
