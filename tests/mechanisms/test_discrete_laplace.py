"""Discrete Laplace: seeded and OpenDP samplers against the pmf, intervals, privacy map."""

from __future__ import annotations

import contextlib
import math
import signal
from collections.abc import Iterator
from fractions import Fraction

import numpy as np
import pytest

from tessera.errors import TesseraError
from tessera.mechanisms import DiscreteLaplace, NoiseSource, discrete_laplace
from tessera.mechanisms.randomness import opendp_prelude
from tessera.privacy import Definition
from tests.mechanisms.checks import (
    P_REJECT,
    Z_REJECT,
    integer_chi_square,
    second_moment_z,
)

N_SEEDED = 200_000
N_SECURE = 30_000


def support(scale: float) -> np.ndarray:
    """Integers carrying all but e^{-60} of the mass of DLap(scale)."""
    top = math.ceil(60 * scale) + 10
    return np.arange(-top, top + 1)


def noise(scale: float, n: int, source: NoiseSource) -> np.ndarray:
    values = np.full(n, 17, dtype=np.int64)
    return discrete_laplace.sample(values, scale, source).values - values


# (a) seeded sampler: χ² against the pmf, and a planted bug rejected by the same test


@pytest.mark.parametrize("scale", [0.7, 3.0])
def test_seeded_sampler_matches_pmf(scale: float) -> None:
    z = noise(scale, N_SEEDED, NoiseSource.seeded(11))
    assert integer_chi_square(z, DiscreteLaplace(scale).pmf, support(scale)) > P_REJECT


@pytest.mark.parametrize("scale", [0.7, 3.0])
def test_seeded_sampler_planted_bug_is_rejected(scale: float) -> None:
    buggy = noise(scale / 2, N_SEEDED, NoiseSource.seeded(11))  # scale halved
    assert integer_chi_square(buggy, DiscreteLaplace(scale).pmf, support(scale)) < P_REJECT


# (b) the secure OpenDP path: variance (and χ²) against theory; the planted bug rejected


@pytest.mark.parametrize("scale", [0.7, 3.0])
def test_opendp_sampler_matches_theory(scale: float) -> None:
    law = DiscreteLaplace(scale)
    z = noise(scale, N_SECURE, NoiseSource.secure())
    assert abs(second_moment_z(z, law.pmf, support(scale))) < Z_REJECT
    assert integer_chi_square(z, law.pmf, support(scale)) > P_REJECT


def test_opendp_sampler_planted_bug_is_rejected() -> None:
    scale = 3.0
    law = DiscreteLaplace(scale)
    buggy = noise(scale / 2, N_SECURE, NoiseSource.secure())
    assert abs(second_moment_z(buggy, law.pmf, support(scale))) > Z_REJECT
    assert integer_chi_square(buggy, law.pmf, support(scale)) < P_REJECT


def test_closed_form_variance_matches_pmf() -> None:
    for scale in [0.3, 1.0, 7.5]:
        k = support(scale).astype(float)
        assert DiscreteLaplace(scale).variance == pytest.approx(
            float((k**2 * DiscreteLaplace(scale).pmf(k)).sum()), rel=1e-12
        )


# (c) interval half-widths: exact coverage from the pmf


@pytest.mark.parametrize("scale", [0.05, 0.4, 1.0, 2.5, 40.0, 1000.0])
@pytest.mark.parametrize("level", [0.5, 0.95, 0.99])
def test_interval_halfwidth_is_smallest_with_coverage(scale: float, level: float) -> None:
    law = DiscreteLaplace(scale)
    k = law.interval_halfwidth(level)

    def cover(j: int) -> float:
        return float(law.pmf(np.arange(-j, j + 1)).sum()) if j >= 0 else 0.0

    assert cover(k) >= level
    assert cover(k - 1) < level
    assert discrete_laplace.coverage(k, scale) == pytest.approx(cover(k), rel=1e-12)


def test_interval_halfwidth_known_value() -> None:
    # b = 1: P[|Z| ≥ k] = 2e^{-k}/(1+e^{-1}) ≤ 0.05 first at k = 4, so the half-width is 3
    assert discrete_laplace.interval_halfwidth(1.0, 0.95) == 3
    assert discrete_laplace.interval_halfwidth(0.01, 0.95) == 0



def _exact_halfwidth(scale: float, level: float) -> int:
    """⌈b·T⌉ − 1, T = log 2 − log(1 + e^{−1/b}) − log(1 − level), in 400-digit decimals from
    the floats b and level (the reference: no float rounding anywhere)."""
    from decimal import Decimal, localcontext

    with localcontext() as ctx:
        ctx.prec = 400
        b, alpha = Decimal(scale), 1 - Decimal(level)
        t = Decimal(2).ln() - (1 + (-1 / b).exp()).ln() - alpha.ln()
        return max(0, int((b * t).to_integral_value(rounding="ROUND_CEILING")) - 1)


@contextlib.contextmanager
def _deadline(seconds: int) -> Iterator[None]:
    """Raise TimeoutError in the body after ``seconds`` (SIGALRM: a hang fails, not stalls)."""
    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("scale", [1.0, 7.5, 1e6, 2.0**46, 2.0**52, 1e20, 1.5e93, 1e300,
                                   1.7976931348623157e308])
@pytest.mark.parametrize("level", [1e-10, 0.5, 0.95, 0.999999])
def test_interval_halfwidth_in_closed_form_at_any_scale(scale: float, level: float) -> None:
    """The half-width is O(1) whatever the scale (a degenerate split can ask for b = 10^93,
    refused afterwards by the release's scale check), never narrower than the exact one and
    wider by a relative 2^-46 at most (a unit search from the float bound never ended there:
    k + 1 == k in floats)."""
    with _deadline(5):
        k = discrete_laplace.interval_halfwidth(scale, level)
    exact = _exact_halfwidth(scale, level)
    assert exact <= k <= exact + max(1, exact >> 45)


# (e) privacy map


@pytest.mark.parametrize(("scale", "sensitivity"), [(2.0, 1), (3.0, 1), (0.1, 2), (7.0, 0.5)])
def test_privacy_map_is_sensitivity_over_scale(scale: float, sensitivity: float) -> None:
    eps = DiscreteLaplace(scale).epsilon(sensitivity)
    exact = Fraction(sensitivity) / Fraction(scale)
    assert Fraction(eps) >= exact
    assert eps == pytest.approx(float(exact), rel=1e-15)
    assert DiscreteLaplace(scale).definition is Definition.PURE


def test_privacy_map_agrees_with_opendp() -> None:
    dp = opendp_prelude()
    space = dp.vector_domain(dp.atom_domain(T="i64")), dp.l1_distance(T="i64")
    for scale in [0.5, 3.0, 11.0]:
        m = dp.m.make_laplace(*space, scale=scale)
        assert m.map(2) == pytest.approx(DiscreteLaplace(scale).epsilon(2), rel=1e-12)


def test_for_epsilon_never_exceeds_epsilon() -> None:
    for eps in [0.1, 0.3, 1.0, 2.7]:
        law = DiscreteLaplace.for_epsilon(eps, sensitivity=3)
        assert Fraction(3) / Fraction(law.scale) <= Fraction(eps)


# records, shapes, grouping, validation


def test_records_flag_seeded_output_not_private() -> None:
    seeded = discrete_laplace.sample([1, 2, 3], 2.0, NoiseSource.seeded(0))
    secure = discrete_laplace.sample([1, 2, 3], 2.0)
    assert not seeded.private and "NOT PRIVATE" in seeded.mechanism.describe()
    assert secure.private and "NOT PRIVATE" not in secure.mechanism.describe()
    assert secure.mechanism.name == "discrete Laplace (OpenDP make_laplace)"
    assert secure.mechanism.definition is Definition.PURE
    assert secure.mechanism.value == 2.0


def test_seeded_is_reproducible() -> None:
    a = discrete_laplace.sample(np.zeros(100, dtype=int), 5.0, NoiseSource.seeded(3)).values
    b = discrete_laplace.sample(np.zeros(100, dtype=int), 5.0, NoiseSource.seeded(3)).values
    assert np.array_equal(a, b)


@pytest.mark.parametrize("source", [NoiseSource.secure(), NoiseSource.seeded(5)], ids=str)
def test_grouping_puts_each_answer_back_in_place(source: NoiseSource) -> None:
    rng = np.random.default_rng(1)
    values = rng.integers(-1000, 1000, size=(40, 25))
    scales = np.where(rng.random((40, 25)) < 0.5, 1e-3, 50.0)  # P[noise ≠ 0 | b=1e-3] ≈ 0
    out = discrete_laplace.sample(values, scales, source)
    assert out.values.shape == values.shape and out.parameters.shape == values.shape
    tiny = scales == 1e-3
    assert np.array_equal(out.values[tiny], values[tiny])
    assert (out.values[~tiny] != values[~tiny]).mean() > 0.9
    assert out.mechanism.value is None


def test_validation() -> None:
    with pytest.raises(TesseraError, match="integer"):
        discrete_laplace.sample(np.array([1.5]), 1.0)
    with pytest.raises(TesseraError, match="positive"):
        discrete_laplace.sample([1, 2], [1.0, 0.0])
    with pytest.raises(TesseraError, match="2 values"):
        discrete_laplace.sample([1, 2, 3], [1.0, 2.0])
    with pytest.raises(TesseraError, match="2\\^62"):
        discrete_laplace.sample([2**63 - 1], 1.0)
    with pytest.raises(TesseraError):
        DiscreteLaplace(-1.0)
    with pytest.raises(TesseraError):
        discrete_laplace.interval_halfwidth(1.0, 1.0)
