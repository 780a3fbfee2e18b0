"""Numerical trade-off functions from PLDs: safe side, closeness, agreement with dp-accounting."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pldlib

from tessera.accounting import (
    Exactness,
    check_axioms,
    compose_plds,
    discrete_gaussian,
    discrete_laplace,
    gaussian,
    gaussian_dp,
    laplace,
    pure_dp,
    tensor,
    to_pld,
    tradeoff_of_pair,
)
from tests.oracles.accounting import discrete_gaussian_pmf

ALPHA = np.linspace(0.0, 1.0, 20001)


def laplace_tradeoff(eps: float, a: np.ndarray) -> np.ndarray:
    """Exact T(Lap(0,1/ε), Lap(1,1/ε)) (Dong–Roth–Su, Example of Laplace mechanism)."""
    out = np.where(
        a < math.exp(-eps) / 2,
        1 - math.exp(eps) * a,
        np.where(a <= 0.5, math.exp(-eps) / (4 * np.maximum(a, 1e-300)), math.exp(-eps) * (1 - a)),
    )
    return out


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_laplace_lower_bound_is_safe_and_close(eps: float) -> None:
    f = laplace(1.0 / eps)
    truth = laplace_tradeoff(eps, ALPHA)
    diff = truth - f(ALPHA)
    assert np.all(diff >= -1e-15), "PLD-based Laplace trade-off above the exact one"
    assert np.max(diff) < 2e-3
    assert f.exactness is Exactness.LOWER_BOUND
    assert check_axioms(f.lower).ok


@pytest.mark.parametrize("b", [0.5, 1.0, 4.0])
def test_discrete_laplace_is_pure_dp_exactly(b: float) -> None:
    """DL with scale b, Δ = 1 has likelihood ratios e^{±1/b} only: T = f_{1/b,0} exactly."""
    f = discrete_laplace(b)
    truth = pure_dp(1.0 / b)(ALPHA)
    diff = truth - f(ALPHA)
    assert np.all(diff >= -1e-15)
    assert np.max(diff) < 1e-3  # discretisation of the loss 1/b to the 1e-4 grid
    assert f.epsilon(0.0) == pytest.approx(1.0 / b, abs=2e-4)
    assert f.epsilon(0.0) >= 1.0 / b


@pytest.mark.parametrize("mu", [0.2, 1.0, 2.5])
def test_gaussian_pld_below_gdp_and_close(mu: float) -> None:
    f = gaussian(1.0 / mu)
    diff = gaussian_dp(mu)(ALPHA) - f(ALPHA)
    assert np.all(diff >= -1e-15)
    assert np.max(diff) < 1e-4
    for d in [1e-3, 1e-6]:
        assert f.epsilon(d) >= gaussian_dp(mu).epsilon(d) - 1e-12
        assert f.epsilon(d) == pytest.approx(gaussian_dp(mu).epsilon(d), abs=2e-3)


@pytest.mark.parametrize("sigma", [0.7, 2.0])
def test_discrete_gaussian_against_brute_force_pair(sigma: float) -> None:
    """Exact T for the discrete Gaussian pair (truncated far in the tails), by Neyman–Pearson."""
    z, p = discrete_gaussian_pmf(sigma, int(40 * sigma) + 10)
    # Q = P shifted by one: Q(z) = P(z − 1).
    q = np.concatenate([[0.0], p[:-1]])
    p = np.concatenate([p[:-1], [p[-1]]])
    truth = tradeoff_of_pair(p, q)
    f = discrete_gaussian(sigma)
    diff = truth(ALPHA) - f(ALPHA)
    assert np.all(diff >= -1e-12)
    assert np.max(diff) < 1e-3


def test_composition_agrees_with_dp_accounting_epsilon() -> None:
    """Our PLD composition = dp-accounting's own (Laplace ×5 ⊗ Gaussian ×3) ε(δ)."""
    lap, gau = laplace(2.0), gaussian(3.0)
    ours = compose_plds([lap] * 5 + [gau] * 3)
    ref = (
        pldlib.from_laplace_mechanism(2.0, value_discretization_interval=1e-4)
        .self_compose(5)
        .compose(
            pldlib.from_gaussian_mechanism(3.0, value_discretization_interval=1e-4).self_compose(3)
        )
    )
    for d in [1e-3, 1e-6, 1e-9]:
        assert ours.epsilon(d) == pytest.approx(ref.get_epsilon_for_delta(d), rel=1e-9)
        assert ours.epsilon(d) >= ref.get_epsilon_for_delta(d)
    # Its f-representation is consistent with its profile (ε from f ≥ dp-accounting's ε).
    for d in [1e-3, 1e-6]:
        eps_f = ours.lower.epsilon(d)
        assert eps_f >= ours.epsilon(d) - 1e-12
        assert eps_f == pytest.approx(ours.epsilon(d), rel=2e-2)


def test_gaussian_composition_pld_matches_gdp_closed_form() -> None:
    """k Gaussian mechanisms through PLDs vs the exact G_{μ√k}: safe and close."""
    f = tensor([gaussian(2.0)] * 4)  # PLD route
    g = gaussian_dp(0.5 * 2.0)
    diff = g(ALPHA) - f(ALPHA)
    assert np.all(diff >= -1e-15)
    assert np.max(diff) < 2e-4


def test_pure_dp_pld_profile_is_exact_profile() -> None:
    f = pure_dp(1.0)
    p = to_pld(f)
    e = np.array([0.0, 0.3, 0.7, 0.99, 1.0, 2.0])
    assert np.allclose(p.delta(e), f.delta(e), atol=1e-4 * math.e)
    assert np.all(p.delta(e) >= f.delta(e) - 1e-15)


def test_pl_to_pld_keeps_both_directions() -> None:
    """An asymmetric PL f: its PLD profile bounds δ of both T(P,Q) and T(Q,P)."""
    p = np.array([0.7, 0.2, 0.1, 0.0])
    q = np.array([0.1, 0.1, 0.3, 0.5])
    f = tradeoff_of_pair(p, q)
    g = tradeoff_of_pair(q, p)
    pld = to_pld(f)
    e = np.linspace(0, 3, 31)
    assert np.all(pld.delta(e) >= np.maximum(f.delta(e), g.delta(e)) - 1e-12)
    assert np.all(pld(ALPHA) <= f(ALPHA) + 1e-15)
