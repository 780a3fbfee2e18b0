"""ρ-zCDP ⇒ (ε, δ): the CKS20 conversion, its inverses, and their safe rounding."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.accounting import zcdp
from tessera.accounting.zcdp import (
    CLOSED_FORM_ALLOWANCE,
    bisect,
    delta_for_epsilon,
    epsilon_closed_form,
    epsilon_for_delta,
    rho_closed_form,
    rho_for_epsilon_delta,
)


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


def _plain_rho(eps: float, delta: float) -> float:
    """The conversion as a plain bisection on the checks' predicate ε(δ) ≤ ε, every midpoint
    evaluated (no closed-form window): the brute-force reference."""
    lo, hi = 0.0, max(eps, 1.0)
    while epsilon_for_delta(hi, delta) <= eps:
        lo, hi = hi, 2.0 * hi
    return bisect(lambda r: epsilon_for_delta(r, delta) <= eps, lo, hi)[0]


def _plain_epsilon(rho: float, delta: float) -> float:
    hi = rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))
    return bisect(lambda e: delta_for_epsilon(rho, e) > delta, 0.0, hi)[1]


_BUDGETS = st.tuples(st.floats(0.01, 30.0), st.floats(-14.0, -1.5).map(lambda x: 10.0 ** x))


@settings(max_examples=8, deadline=None)
@given(_BUDGETS)
def test_rho_meets_the_checks_predicate_tightly_and_matches_the_plain_bisection(
        budget: tuple[float, float]) -> None:
    eps, delta = budget
    rho = rho_for_epsilon_delta.__wrapped__(eps, delta)  # not the memoised value
    assert epsilon_for_delta(rho, delta) <= eps  # what the ledger and the verifier test
    assert epsilon_for_delta(rho * (1 + 1e-9), delta) > eps  # and tight
    assert rho == _plain_rho(eps, delta)  # the same float as evaluating every midpoint


@settings(max_examples=25, deadline=None)
@given(st.floats(1e-5, 50.0), st.floats(-14.0, -1.5).map(lambda x: 10.0 ** x))
def test_epsilon_matches_the_plain_bisection(rho: float, delta: float) -> None:
    if delta_for_epsilon(rho, 0.0) <= delta:
        return
    eps = epsilon_for_delta(rho, delta)
    assert delta_for_epsilon(rho, eps) <= delta
    assert eps == _plain_epsilon(rho, delta)


@settings(max_examples=25, deadline=None)
@given(_BUDGETS, st.floats(1e-5, 50.0))
def test_closed_forms_are_well_inside_the_bisection_window(
        budget: tuple[float, float], rho: float) -> None:
    eps, delta = budget
    assert rho_closed_form(eps, delta) == pytest.approx(
        rho_for_epsilon_delta(eps, delta), rel=CLOSED_FORM_ALLOWANCE / 10)
    if delta_for_epsilon(rho, 0.0) > delta:
        assert epsilon_closed_form(rho, delta) == pytest.approx(
            epsilon_for_delta(rho, delta), rel=CLOSED_FORM_ALLOWANCE / 10)


@pytest.mark.parametrize("off", [0.5, 1 + 1e-6, 2.0])
def test_a_wrong_closed_form_falls_back_to_a_valid_conversion(
        off: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """The window only skips evaluations: a closed form off by any factor still gives a ρ
    the predicate accepts (the full bisection's)."""
    eps, delta = 0.7, 1e-8
    want = _plain_rho(eps, delta)
    monkeypatch.setattr(zcdp, "rho_closed_form", lambda e, d: want * off)
    monkeypatch.setattr(zcdp, "epsilon_closed_form", lambda r, d: r * off)
    rho = rho_for_epsilon_delta.__wrapped__(eps, delta)
    assert epsilon_for_delta(rho, delta) <= eps and rho == pytest.approx(want, rel=1e-11)
