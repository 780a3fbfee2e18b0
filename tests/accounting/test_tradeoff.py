"""Closed forms, PL representation, axioms, conversions (docs/theory.md §3)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from tessera.accounting import (
    Exactness,
    Identity,
    PiecewiseLinear,
    check_axioms,
    dominates,
    eps_delta,
    gaussian_dp,
    pure_dp,
    tradeoff_of_pair,
)
from tessera.accounting.tradeoff import FLOAT_SLACK
from tessera.errors import TesseraError
from tests.oracles.accounting import random_pair, tradeoff_brute

ALPHA = np.linspace(0.0, 1.0, 4001)


def test_closed_forms_values() -> None:
    assert np.allclose(Identity()(ALPHA), 1 - ALPHA)
    g = gaussian_dp(1.3)
    z = stats.norm.ppf(1 - ALPHA[1:-1])
    assert np.allclose(g(ALPHA[1:-1]), stats.norm.cdf(z - 1.3), atol=1e-14)
    assert g(0.0) == pytest.approx(1.0) and g(1.0) == pytest.approx(0.0)
    f = eps_delta(1.0, 0.1)
    a = 0.2
    assert f(a) == pytest.approx(max(0, 0.9 - math.e * a, math.exp(-1) * (0.9 - a)))
    assert gaussian_dp(0.0)(ALPHA) == pytest.approx(1 - ALPHA)


@pytest.mark.parametrize(
    "f", [Identity(), gaussian_dp(0.3), gaussian_dp(3.0), pure_dp(2.0), eps_delta(0.5, 0.2)]
)
def test_closed_forms_satisfy_axioms(f) -> None:
    assert check_axioms(f).ok
    assert check_axioms(f.to_piecewise_linear()).ok


def test_axiom_checks_catch_violations() -> None:
    nonconvex = PiecewiseLinear(np.array([0, 0.5, 1.0]), np.array([0.8, 0.45, 0.0]))
    assert "not convex" in check_axioms(nonconvex).violations
    above = PiecewiseLinear(np.array([0, 0.5, 1.0]), np.array([1.0, 0.6, 0.0]))
    assert "f(α) > 1 − α somewhere" in check_axioms(above).violations
    increasing = PiecewiseLinear(np.array([0, 0.5, 1.0]), np.array([0.2, 0.1, 0.3]))
    assert "not non-increasing" in check_axioms(increasing).violations


def test_eps_family_ordering() -> None:
    """f_{ε,0} ≥ f_{ε',0} iff ε ≤ ε' (larger ε = less private), and strictly somewhere."""
    eps = [0.0, 0.1, 0.5, 1.0, 2.0, 5.0]
    for a, b in zip(eps, eps[1:], strict=False):
        fa, fb = pure_dp(a)(ALPHA), pure_dp(b)(ALPHA)
        assert np.all(fa >= fb - 1e-15)
        assert np.max(fa - fb) > 1e-3
        assert dominates(pure_dp(a), pure_dp(b)) and not dominates(pure_dp(b), pure_dp(a))
    assert np.allclose(pure_dp(0.0)(ALPHA), 1 - ALPHA)


def test_gdp_profile_matches_conjugate_numerically() -> None:
    """δ(ε) closed form = sup_α (1 − e^ε α − G_μ(α)), maximised numerically."""
    g = gaussian_dp(1.5)
    a = np.concatenate([np.logspace(-16, -1, 20001), np.linspace(0.1, 1, 20001)])
    for e in [0.0, 0.3, 1.0, 2.5, 5.0]:
        brute = np.max(1 - math.exp(e) * a - g(a))
        assert float(g.delta(e)) == pytest.approx(brute, abs=1e-7)


def test_epsdelta_profile_and_round_trip() -> None:
    f = eps_delta(1.2, 1e-3)
    pl = f.to_piecewise_linear()
    for e in [0.0, 0.4, 1.2, 3.0]:
        assert float(f.delta(e)) == pytest.approx(float(pl.delta(e)), abs=1e-15)
    assert float(f.delta(1.2)) == pytest.approx(1e-3)
    # (ε,δ) → f → ε at the same δ gives ε back; → δ(ε) gives δ back.
    assert f.epsilon(1e-3) == pytest.approx(1.2, rel=1e-12)
    assert f.epsilon(1e-3) >= 1.2
    assert pl.epsilon(1e-3 + 1e-12) == pytest.approx(1.2, rel=1e-9)
    assert f.epsilon(5e-4) == math.inf
    assert pure_dp(0.7).epsilon(0.0) == pytest.approx(0.7)


@settings(max_examples=60, deadline=None)
@given(
    eps=st.floats(0.0, 8.0),
    delta=st.floats(0.0, 0.5),
)
def test_round_trip_eps_delta_profile(eps: float, delta: float) -> None:
    """(ε,δ) → f → profile → f again: exactly f_{ε,δ} when the grid contains ε."""
    f = eps_delta(eps, delta)
    grid = np.unique(np.concatenate([np.linspace(0, 10, 51), [eps]]))
    back = PiecewiseLinear.from_profile(grid, f.delta(grid))
    diff = f(ALPHA) - back(ALPHA)
    assert np.all(diff >= -1e-15)  # never above: safe
    # Loss: the slack, plus the 1e-9 relative left shift of the zero crossing.
    assert np.max(diff) <= 2 * FLOAT_SLACK + 2e-9


def test_gdp_epsilon_inverts_profile() -> None:
    for mu in [0.1, 0.5, 1.0, 3.0]:
        g = gaussian_dp(mu)
        for d in [1e-3, 1e-6, 1e-10]:
            e = g.epsilon(d)
            assert float(g.delta(e)) <= d  # safe side, exactly
            assert float(g.delta(e * (1 - 1e-9) - 1e-12)) > d or e == 0.0


def test_pl_from_lines_is_max_of_lines_minus_slack() -> None:
    rng = np.random.default_rng(7)
    for _ in range(50):
        n = rng.integers(1, 40)
        inter = rng.uniform(0.2, 1.0, n)
        # Lines below 1 − α on [0, 1] (c ≤ 1, c + s ≤ 0), as supporting lines of an f are.
        slopes = -inter * np.exp(np.abs(rng.normal(0, 2, n)))
        pl = PiecewiseLinear.from_lines(inter, slopes)
        truth = np.maximum(0.0, np.max(inter[None] + slopes[None] * ALPHA[:, None], axis=1))
        truth = np.minimum(truth, 1 - ALPHA)
        diff = truth - pl(ALPHA)
        assert np.all(diff >= 0.0), "lower bound above the max of its lines"
        assert np.max(diff) <= 3 * FLOAT_SLACK + 2e-9 * np.max(np.abs(slopes))


def test_pl_of_gdp_is_below_and_close_even_between_breakpoints() -> None:
    """The tangent construction is a lower bound everywhere; a chord construction would fail
    this test at the midpoints between breakpoints."""
    g = gaussian_dp(1.0)
    pl = g.to_piecewise_linear()
    mids = 0.5 * (pl.alphas[1:] + pl.alphas[:-1])
    pts = np.concatenate([ALPHA, mids])
    diff = g(pts) - pl(pts)
    assert np.all(diff >= 0.0)
    assert np.max(diff) < 2e-6
    # A chord through points on G_μ lies above it: the check above is able to fail.
    chord = PiecewiseLinear(pl.alphas, g(pl.alphas))
    assert np.min(g(mids) - chord(mids)) < 0


def test_pl_delta_and_epsilon_are_consistent() -> None:
    rng = np.random.default_rng(3)
    for _ in range(30):
        p, q = random_pair(rng, int(rng.integers(2, 6)))
        f = tradeoff_of_pair(p, q)
        for d in [0.0, 1e-3, 0.1]:
            e = f.epsilon(d)
            if math.isfinite(e):
                assert float(f.delta(e)) <= d + 1e-15
                if e > 1e-9:
                    assert float(f.delta(e * (1 - 1e-6))) > d


def test_tradeoff_of_pair_matches_definition() -> None:
    """Neyman–Pearson construction vs enumeration of all tests on ≤ 6 outcomes."""
    rng = np.random.default_rng(11)
    at = np.linspace(0, 1, 301)
    for _ in range(40):
        p, q = random_pair(rng, int(rng.integers(1, 7)))
        f = tradeoff_of_pair(p, q)
        assert check_axioms(f).ok
        assert np.allclose(f(at), tradeoff_brute(p, q, at), atol=1e-12)
        # finite_pair is an exact inverse of the construction.
        p2, q2 = f.finite_pair()
        assert np.allclose(tradeoff_of_pair(p2, q2)(at), f(at), atol=1e-12)


def test_gdp_is_trade_off_of_two_gaussians() -> None:
    """G_μ = T(N(0,1), N(μ,1)) evaluated by the Neyman–Pearson threshold test."""
    mu = 0.8
    for a in [0.01, 0.2, 0.5, 0.9]:
        thr = stats.norm.isf(a)  # reject when X > thr
        beta = stats.norm.cdf(thr - mu)
        assert float(gaussian_dp(mu)(a)) == pytest.approx(beta, abs=1e-14)
    # KL sanity: ∫ of the profile's derivative … cheap extra check of δ(0) = TV = 2Φ(μ/2) − 1.
    assert float(gaussian_dp(mu).delta(0.0)) == pytest.approx(2 * stats.norm.cdf(mu / 2) - 1)
    assert integrate.quad(lambda x: float(gaussian_dp(mu)(x)), 0, 1)[0] < 0.5


def test_invalid_inputs_raise() -> None:
    with pytest.raises(TesseraError):
        gaussian_dp(-1)
    with pytest.raises(TesseraError):
        eps_delta(1.0, 2.0)
    with pytest.raises(TesseraError):
        gaussian_dp(1)(1.5)
    with pytest.raises(TesseraError):
        PiecewiseLinear(np.array([0.0, 0.5]), np.array([1.0, 0.0]))
    with pytest.raises(TesseraError):
        gaussian_dp(1).epsilon(1.0)


def test_exactness_flags() -> None:
    assert gaussian_dp(1).exactness is Exactness.EXACT
    assert gaussian_dp(1).to_piecewise_linear().exactness is Exactness.LOWER_BOUND
    assert pure_dp(1).to_piecewise_linear().exactness is Exactness.EXACT
    assert Exactness.EXACT.combine(Exactness.APPROXIMATION) is Exactness.APPROXIMATION
