"""ρ-zCDP ⇒ (ε, δ): the CKS20 conversion, its inverses, and their safe rounding."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.accounting.zcdp import delta_for_epsilon, epsilon_for_delta, rho_for_epsilon_delta


def _grid_delta(rho: float, eps: float) -> float:
    """The CKS20 bound minimised over a fine grid of orders α (each α is a valid δ)."""
    alphas = 1.0 + np.geomspace(1e-6, 1e4, 200_001)
    log = ((alphas - 1) * (alphas * rho - eps) - np.log(alphas - 1)
           + alphas * np.log1p(-1 / alphas))
    return float(min(1.0, math.exp(log.min())))


@settings(max_examples=60, deadline=None)
@given(st.floats(1e-3, 20.0), st.floats(0.0, 60.0))
def test_delta_is_the_infimum_over_orders(rho: float, eps: float) -> None:
    ours = delta_for_epsilon(rho, eps)
    grid = _grid_delta(rho, eps)
    assert ours <= grid * (1 + 1e-6) + 1e-300  # never looser than a fine grid
    assert ours >= grid * (1 - 1e-3) - 1e-300  # and a valid value of the bound (not below it)


@pytest.mark.parametrize("rho", [0.01, 0.1, 0.5, 2.0, 10.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-10])
def test_inverse_maps_round_the_safe_way(rho: float, delta: float) -> None:
    eps = epsilon_for_delta(rho, delta)
    assert delta_for_epsilon(rho, eps) <= delta
    assert delta_for_epsilon(rho, eps * (1 - 1e-6)) > delta  # and it is tight
    assert eps <= rho + 2 * math.sqrt(rho * math.log(1 / delta))  # never worse than BS16
    back = rho_for_epsilon_delta(eps, delta)
    assert epsilon_for_delta(back, delta) <= eps and back == pytest.approx(rho, rel=1e-6)


def test_refuses_bad_parameters() -> None:
    with pytest.raises(Exception, match="δ must be in"):
        epsilon_for_delta(0.5, 0.0)
    with pytest.raises(Exception, match="ε must be finite"):
        rho_for_epsilon_delta(0.0, 1e-6)
