"""Tessera's ρ-zCDP ⇒ (ε, δ) conversion (CKS20 Prop. 12 / Cor. 13, :mod:`tessera.accounting.zcdp`)
cross-checked against OpenDP's own, ``opendp.combinators.make_zCDP_to_approxDP``.

OpenDP evaluates the same CKS20 bound at the order α its bisection finds on [1.01, ∞), in
outward (upward) rounding: a valid upper bound, and the exact infimum up to a few ulps wherever
the minimising α exceeds 1.01 (checked below for every point). So on that region:

* **never below OpenDP** (ε, and δ): ours may be lower than OpenDP's only by OpenDP's own
  rounding allowance, far below :data:`BELOW` (relative 1e-12); anything more would put ours
  below the exact bound, i.e. claim more privacy than CKS20 proves;
* **at most** :data:`ABOVE` (relative 1e-9) **above it**: the bisection of
  :func:`epsilon_for_delta` keeps the upper end of a bracket of relative width 1e-12, and
  :func:`delta_for_epsilon` rounds its log-δ up by 1e-14 × the size of its terms (≤ 7e-12
  relative at δ ≈ 1e-285); measured over ρ ∈ [1e-4, 10] (21 values) × δ ∈ [1e-12, 1e-2]
  (11 values): ε within [+5e-15, +9.7e-13] relative of OpenDP's, never below.

The inverse, :func:`rho_for_epsilon_delta`, is checked through OpenDP too: OpenDP's ε at the ρ
returned is within the ε asked for, and a ρ larger by 1e-6 (relative) is not.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from tessera.accounting.zcdp import delta_for_epsilon, epsilon_for_delta, rho_for_epsilon_delta

dp = pytest.importorskip("opendp.prelude")

#: How far below OpenDP ours may be (relative): OpenDP's outward rounding, a few ulps.
BELOW = 1e-12
#: How far above OpenDP ours may be (relative): our bisection width and rounding allowance.
ABOVE = 1e-9

RHOS = [float(r) for r in np.geomspace(1e-4, 10.0, 7)]
DELTAS = [float(d) for d in np.geomspace(1e-12, 1e-2, 5)]


def opendp_profile(rho: float) -> Any:
    """OpenDP's privacy profile of a ρ-zCDP measurement: ``make_zCDP_to_approxDP`` of a
    measurement whose privacy map is exactly ρ (so both sides convert the same float ρ)."""
    dp.enable_features("contrib", "honest-but-curious")
    zcdp = dp.m.make_user_measurement(
        dp.atom_domain(T=int), dp.absolute_distance(T=int), dp.zero_concentrated_divergence(),
        lambda x: x, lambda d_in: rho)
    converted = dp.c.make_zCDP_to_approxDP(zcdp)
    assert converted.map(1) is not None
    return converted.map(1)


def unclamped(rho: float, eps: float) -> bool:
    """Whether the minimising order exceeds OpenDP's floor α = 1.01: the derivative of the
    log-δ in α, (2α − 1)ρ − ε + ln(1 − 1/α), is negative there (it increases in α)."""
    return (2 * 1.01 - 1) * rho - eps + math.log1p(-1 / 1.01) < 0


def within(ours: float, theirs: float) -> bool:
    return theirs * (1 - BELOW) <= ours <= theirs * (1 + ABOVE) + 1e-300


@pytest.mark.parametrize("rho", RHOS)
def test_epsilon_is_opendps_never_below(rho: float) -> None:
    profile = opendp_profile(rho)
    for delta in DELTAS:
        theirs = float(profile.epsilon(delta))
        ours = epsilon_for_delta(rho, delta)
        assert unclamped(rho, theirs), (rho, delta)
        assert within(ours, theirs), (rho, delta, ours, theirs, ours - theirs)


@pytest.mark.parametrize("rho", RHOS)
def test_delta_is_opendps_never_below(rho: float) -> None:
    """δ(ε) at the ε of each δ of the grid (so δ spans 1e-12..1e-2), and at a few round ε."""
    profile = opendp_profile(rho)
    points = [float(profile.epsilon(d)) for d in DELTAS] + [0.5, 1.0, 4.0]
    for eps in points:
        if not unclamped(rho, eps):
            continue  # OpenDP's α floor binds: its δ is then looser than the bound
        theirs = float(profile.delta(eps))
        ours = delta_for_epsilon(rho, eps)
        if theirs < 1e-290:  # both underflow: nothing to compare
            assert ours < 1e-280
            continue
        assert within(ours, theirs), (rho, eps, ours, theirs, ours - theirs)


@pytest.mark.parametrize(("eps", "delta"), [(0.1, 1e-9), (1.0, 1e-6), (8.0, 1e-3)])
def test_rho_for_a_budget_is_valid_and_tight_by_opendp(eps: float, delta: float) -> None:
    rho = rho_for_epsilon_delta(eps, delta)
    assert float(opendp_profile(rho).epsilon(delta)) <= eps
    assert float(opendp_profile(rho * (1 + 1e-6)).epsilon(delta)) > eps
