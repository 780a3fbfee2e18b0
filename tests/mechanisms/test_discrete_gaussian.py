"""Discrete Gaussian: samplers against the pmf, intervals, ρ, and the CKS20 Thm 7 profile."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from tessera.errors import TesseraError
from tessera.mechanisms import (
    DiscreteGaussian,
    NoiseSource,
    delta_for_epsilon,
    discrete_gaussian,
    epsilon_for_delta,
)
from tessera.mechanisms import discrete_gaussian as dg
from tessera.mechanisms.discrete_gaussian import log_delta_for_epsilon
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


def support(sigma: float) -> np.ndarray:
    """Integers carrying all but e^{-200} of the mass of N_Z(0, σ²)."""
    top = math.ceil(20 * sigma) + 10
    return np.arange(-top, top + 1)


def noise(sigma: float, n: int, source: NoiseSource) -> np.ndarray:
    values = np.full(n, -5, dtype=np.int64)
    return discrete_gaussian.sample(values, sigma, source).values - values


# (a) seeded sampler (CKS20 Algorithm 3 with numpy)


@pytest.mark.parametrize("sigma", [0.8, 4.0])
def test_seeded_sampler_matches_pmf(sigma: float) -> None:
    z = noise(sigma, N_SEEDED, NoiseSource.seeded(21))
    assert integer_chi_square(z, DiscreteGaussian(sigma).pmf, support(sigma)) > P_REJECT


@pytest.mark.parametrize("sigma", [0.8, 4.0])
def test_seeded_sampler_planted_bug_is_rejected(sigma: float) -> None:
    buggy = noise(0.9 * sigma, N_SEEDED, NoiseSource.seeded(21))  # σ·0.9
    assert integer_chi_square(buggy, DiscreteGaussian(sigma).pmf, support(sigma)) < P_REJECT


# (b) the secure OpenDP path


@pytest.mark.parametrize("sigma", [0.8, 4.0])
def test_opendp_sampler_matches_theory(sigma: float) -> None:
    law = DiscreteGaussian(sigma)
    z = noise(sigma, N_SECURE, NoiseSource.secure())
    assert abs(second_moment_z(z, law.pmf, support(sigma))) < Z_REJECT
    assert integer_chi_square(z, law.pmf, support(sigma)) > P_REJECT


def test_opendp_sampler_planted_bug_is_rejected() -> None:
    sigma = 4.0
    law = DiscreteGaussian(sigma)
    buggy = noise(0.9 * sigma, N_SECURE, NoiseSource.secure())
    assert abs(second_moment_z(buggy, law.pmf, support(sigma))) > Z_REJECT
    assert integer_chi_square(buggy, law.pmf, support(sigma)) < P_REJECT


# pmf and normaliser


@pytest.mark.parametrize("sigma", [0.2, 0.9, 1.0, 1.5, 6.0])
def test_normaliser_poisson_and_direct_sums_agree(sigma: float) -> None:
    k = support(sigma).astype(float)
    direct = float(np.exp(-(k * k) / (2 * sigma * sigma)).sum())
    assert discrete_gaussian.normaliser(sigma) == pytest.approx(direct, rel=1e-14)
    assert float(DiscreteGaussian(sigma).pmf(k).sum()) == pytest.approx(1.0, rel=1e-14)


def test_variance_is_at_most_sigma_squared() -> None:
    assert DiscreteGaussian(0.5).variance < 0.25  # CKS20: Var ≤ σ², strictly for small σ
    assert DiscreteGaussian(5.0).variance == pytest.approx(25.0, rel=1e-12)


@pytest.mark.parametrize("sigma", [8.0, 20.0, 1000.0, 1e10])
def test_variance_above_eight_is_sigma_squared(sigma: float) -> None:
    """σ ≥ 8 (the residual contrasts' σ reach 10^10): Var = σ² by Poisson summation, checked
    against the direct sum where it is feasible, and no O(σ) sum refused."""
    assert discrete_gaussian.variance(sigma) == sigma * sigma
    if sigma <= 1000.0:
        y = np.arange(1, int(12 * sigma + 10), dtype=np.float64)
        direct = 2 * float((y * y * np.exp(-(y * y) / (2 * sigma * sigma))).sum())
        direct /= discrete_gaussian.normaliser(sigma)
        assert direct == pytest.approx(sigma * sigma, rel=1e-13)


# (c) interval half-widths


@pytest.mark.parametrize("sigma", [0.2, 0.5, 1.0, 3.7, 50.0, 1000.0])
@pytest.mark.parametrize("level", [0.5, 0.95, 0.99])
def test_interval_halfwidth_is_smallest_with_coverage(sigma: float, level: float) -> None:
    law = DiscreteGaussian(sigma)
    k = law.interval_halfwidth(level)

    def cover(j: int) -> float:  # pmf normalised by Poisson summation: an independent route
        return float(law.pmf(np.arange(-j, j + 1)).sum()) if j >= 0 else 0.0

    assert cover(k) >= level
    assert cover(k - 1) < level
    assert discrete_gaussian.coverage(k, sigma) == pytest.approx(cover(k), rel=1e-12)


def test_interval_halfwidth_close_to_continuous() -> None:
    # for σ ≫ 1 the 95% half-width is ⌈1.96σ⌉ give or take one
    assert abs(discrete_gaussian.interval_halfwidth(100.0) - 196) <= 1


# (e) privacy: ρ, Thm 7 profile versus zCDP conversions, inversion


def log_zcdp_delta_bun_steinke(rho: float, eps: float) -> float:
    """ρ-zCDP ⇒ (ε, δ)-DP, log δ = −(ε − ρ)²/(4ρ) for ε ≥ ρ (Bun–Steinke 2016 Prop 1.3)."""
    return -((eps - rho) ** 2) / (4 * rho) if eps >= rho else 0.0


def log_zcdp_delta_cks(rho: float, eps: float) -> float:
    """ρ-zCDP ⇒ (ε, δ)-DP, δ = inf_{α>1} e^{(α−1)(αρ−ε)}/(α−1) · (1 − 1/α)^α (CKS20 §2.3)."""

    def log_delta(a: float) -> float:
        return (a - 1) * (a * rho - eps) - math.log(a - 1) + a * math.log1p(-1 / a)

    res = minimize_scalar(log_delta, bounds=(1 + 1e-9, 1e6), method="bounded",
                          options={"xatol": 1e-12})
    return min(0.0, float(res.fun))


def brute_force_delta(sigma: float, eps: float, shift: int) -> float:
    """max over both orders of Σ_y (P(y) − e^ε Q(y))₊ for N_Z(0,σ²), N_Z(shift,σ²), directly."""
    y = np.arange(-math.ceil(40 * sigma) - 20, math.ceil(40 * sigma) + 20 + shift)
    p = np.exp(-(y * y) / (2 * sigma * sigma))
    q = np.exp(-((y - shift) ** 2) / (2 * sigma * sigma))
    p, q = p / p.sum(), q / q.sum()
    e = math.exp(eps)
    return float(max(np.maximum(p - e * q, 0).sum(), np.maximum(q - e * p, 0).sum()))


@pytest.mark.parametrize(("sigma", "sensitivity"), [(3.0, 1), (0.5, 2), (10.0, 3)])
def test_rho_is_delta_squared_over_two_sigma_squared(sigma: float, sensitivity: int) -> None:
    law = DiscreteGaussian(sigma)
    exact = Fraction(sensitivity) ** 2 / (2 * Fraction(sigma) ** 2)
    assert Fraction(law.rho(sensitivity)) >= exact
    assert law.rho(sensitivity) == pytest.approx(float(exact), rel=1e-15)
    assert law.definition is Definition.ZCDP
    dp = opendp_prelude()
    space = dp.vector_domain(dp.atom_domain(T="i64")), dp.l2_distance(T="i64")
    opendp_rho = dp.m.make_gaussian(*space, scale=sigma).map(sensitivity)
    assert opendp_rho == pytest.approx(law.rho(sensitivity), rel=1e-12)


def test_for_rho_never_exceeds_rho() -> None:
    for rho in [0.01, 0.5, 2.0]:
        law = DiscreteGaussian.for_rho(rho, sensitivity=2)
        assert Fraction(4) / (2 * Fraction(law.sigma) ** 2) <= Fraction(rho)


@pytest.mark.parametrize("sigma", [0.3, 1.0, 3.0, 12.0])
@pytest.mark.parametrize("eps", [0.0, 0.1, 0.5, 1.0, 3.0])
@pytest.mark.parametrize("sensitivity", [1, 2])
def test_thm7_is_a_tight_upper_bound(sigma: float, eps: float, sensitivity: int) -> None:
    ours = delta_for_epsilon(sigma, eps, sensitivity)
    truth = brute_force_delta(sigma, eps, sensitivity)
    if truth < 1e-280:  # the brute force is all rounding noise there
        assert ours < 1e-250
        return
    assert ours >= truth * (1 - 1e-12)
    assert ours <= truth * (1 + 1e-7) + 1e-300


@pytest.mark.parametrize("sigma", [0.5, 1.0, 3.0, 12.0])
@pytest.mark.parametrize("eps", [0.05, 0.3, 1.0, 2.0, 5.0])
def test_thm7_is_at_most_the_zcdp_conversions(sigma: float, eps: float) -> None:
    rho = DiscreteGaussian(sigma).rho()
    thm7 = log_delta_for_epsilon(sigma, eps)
    cks = log_zcdp_delta_cks(rho, eps)
    assert thm7 <= cks + 1e-9
    assert cks <= log_zcdp_delta_bun_steinke(rho, eps) + 1e-9
    assert delta_for_epsilon(sigma, eps) <= max(math.exp(cks) * (1 + 1e-9), math.ulp(0.0))


@pytest.mark.parametrize("sigma", [0.7, 2.0, 15.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-10])
def test_epsilon_for_delta_is_safe_and_nearly_tight(sigma: float, delta: float) -> None:
    eps = epsilon_for_delta(sigma, delta)
    assert delta_for_epsilon(sigma, eps) <= delta
    assert delta_for_epsilon(sigma, eps * (1 - 1e-6)) > delta
    rho = DiscreteGaussian(sigma).rho()
    assert eps <= rho + 2 * math.sqrt(rho * math.log(1 / delta))  # Bun–Steinke ε(δ)


def test_epsilon_for_delta_zero_when_tv_is_small() -> None:
    # δ(0) is the total variation distance, about 0.04 for σ = 10
    assert epsilon_for_delta(10.0, 0.5) == 0.0


# records and validation


def test_records() -> None:
    seeded = discrete_gaussian.sample([1, 2], [1.0, 2.0], NoiseSource.seeded(1))
    secure = discrete_gaussian.sample([1, 2], 3.0)
    assert not seeded.private and seeded.mechanism.value is None
    assert "NOT PRIVATE" in seeded.mechanism.describe()
    assert secure.private and secure.mechanism.name == "discrete Gaussian (OpenDP make_gaussian)"
    assert secure.mechanism.definition is Definition.ZCDP and secure.mechanism.value == 3.0


def test_grouping_puts_each_answer_back_in_place() -> None:
    rng = np.random.default_rng(2)
    values = rng.integers(-100, 100, size=2000)
    sigmas = np.where(rng.random(2000) < 0.5, 0.05, 40.0)  # σ = 0.05: P[noise ≠ 0] < e^{-199}
    out = discrete_gaussian.sample(values, sigmas)
    small = sigmas == 0.05
    assert np.array_equal(out.values[small], values[small])
    assert (out.values[~small] != values[~small]).mean() > 0.9


def test_validation() -> None:
    with pytest.raises(TesseraError):
        DiscreteGaussian(0.0)
    with pytest.raises(TesseraError, match="integer sensitivity"):
        delta_for_epsilon(1.0, 1.0, sensitivity=1.5)
    with pytest.raises(TesseraError, match="δ must be"):
        epsilon_for_delta(1.0, 0.0)
    with pytest.raises(TesseraError):
        discrete_gaussian.sample([1.0], 1.0)


@pytest.mark.parametrize("sigma", [10_000.0, 23_456.7])
def test_wide_halfwidth_covers_and_is_tight(sigma, monkeypatch):
    """Above LARGE_SIGMA the half-width is the normal one widened: it covers the level, and
    is at most two steps above the exact one (summed over the pmf)."""
    wide = dg.interval_halfwidth(sigma)
    assert dg.coverage(wide, sigma) >= 0.95
    monkeypatch.setattr(dg, "LARGE_SIGMA", float("inf"))
    exact = dg.interval_halfwidth(sigma)
    assert exact <= wide <= exact + 2
