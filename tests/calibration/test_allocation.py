"""Budget allocation meets the target exactly, never above; weighted optimum; utility gain."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tessera.accounting import Guarantee, compose_plds, gaussian_dp, laplace
from tessera.calibration import allocate, gdp_mu_for, overlap_from_sets, utility_gain
from tessera.errors import TesseraError
from tessera.privacy import Definition, Neighbours


def _brute_load(params: np.ndarray, sets: list[tuple[int, ...]], power: int) -> float:
    return max(sum(params[list(s)] ** power) for s in sets)


@pytest.mark.parametrize("gamma", [1, 3, 7])
def test_uniform_meets_budget_exactly(gamma: int) -> None:
    t = 10
    a = allocate(t, Guarantee.pure(1.0), overlap=gamma)
    assert all(p == pytest.approx(1.0 / gamma, rel=1e-12) for p in a.parameters)
    assert a.load <= 1.0 and a.load == pytest.approx(1.0, rel=1e-12)
    assert a.achieved.epsilon <= 1.0
    g = allocate(t, Guarantee.gdp(0.5), overlap=gamma)
    assert all(p == pytest.approx(0.5 / math.sqrt(gamma), rel=1e-12) for p in g.parameters)
    assert g.achieved.mu <= 0.5 and g.achieved.mu == pytest.approx(0.5, rel=1e-12)
    assert g.noise_scales[0] == pytest.approx(1 / g.parameters[0])


def test_sequential_default_and_substitution_doubles_load() -> None:
    assert allocate(8, Guarantee.pure(2.0)).parameters[0] == pytest.approx(0.25)
    sub = allocate(8, Guarantee.pure(2.0, Neighbours.SUBSTITUTE), overlap=2)
    assert sub.parameters[0] == pytest.approx(0.5)  # 2·γ = 4 queries per change
    # Σ_q bound caps the doubled one: γ = 6 of 8 → min(12, 8) = 8.
    assert allocate(8, Guarantee.pure(2.0, Neighbours.SUBSTITUTE), overlap=6).parameters[0] == (
        pytest.approx(0.25)
    )


def test_approx_via_gdp() -> None:
    mu = gdp_mu_for(1.0, 1e-6)
    assert float(gaussian_dp(mu).delta(1.0)) <= 1e-6
    assert float(gaussian_dp(mu * (1 + 1e-9)).delta(1.0)) > 1e-6
    a = allocate(20, Guarantee.approx(1.0, 1e-6), overlap=4)
    assert a.mechanism == "gaussian"
    assert a.achieved.definition is Definition.APPROX
    assert a.achieved.epsilon <= 1.0 + 1e-9 and a.achieved.epsilon == pytest.approx(1.0, rel=1e-6)


def test_approx_via_pld_is_calibrated_and_tight() -> None:
    target = Guarantee.approx(1.0, 1e-6)
    a = allocate(30, target, overlap=3, via="pld", mechanism="laplace", discretization=1e-3)
    scale = a.noise_scales[0]
    eps = compose_plds([laplace(scale, 1, 1e-3)] * 3, 1e-3).epsilon(1e-6)
    assert eps <= 1.0
    # 0.1% less noise violates the target: the bisection is tight.
    assert compose_plds([laplace(scale * 0.999, 1, 1e-3)] * 3, 1e-3).epsilon(1e-6) > 1.0
    with pytest.raises(TesseraError):
        allocate(3, target, importance=[1, 2, 3], overlap=2, via="pld")


def test_weighted_meets_budget_and_matches_blockwise_closed_form() -> None:
    """Disjoint blocks: the optimum is the Lagrange shape within each block, each block using
    the full budget: ε_q ∝ w_q^{1/3} (pure), μ_q ∝ w_q^{1/4} (GDP)."""
    rng = np.random.default_rng(4)
    sets = [(0, 1, 2), (3, 4), (5,), (6, 7, 8, 9)]
    w = rng.uniform(0.5, 5.0, 10)
    for target, k, power in [(Guarantee.pure(1.0), 3, 1), (Guarantee.gdp(1.0), 4, 2)]:
        a = allocate(10, target, importance=w, maximal_sets=sets)
        p = np.array(a.parameters)
        budget = 1.0
        assert _brute_load(p, sets, power) <= budget
        assert _brute_load(p, sets, power) == pytest.approx(budget, rel=1e-12)
        for s in sets:
            shape = w[list(s)] ** (1 / k)
            expect = shape * (budget / np.sum(shape**power)) ** (1 / power)
            # the optimiser is exact now (it was SLSQP to 2e-3 before)
            assert np.allclose(p[list(s)], expect, rtol=1e-9)


def test_weighted_beats_uniform_and_shape_only() -> None:
    rng = np.random.default_rng(9)
    t = 12
    sets = [tuple(sorted(rng.choice(t, 4, replace=False).tolist())) for _ in range(6)]
    w = rng.uniform(0.2, 10.0, t)
    target = Guarantee.gdp(1.0)
    uni = allocate(t, target, maximal_sets=sets)
    shape = allocate(t, target, importance=w, maximal_sets=sets, refine=False)
    opt = allocate(t, target, importance=w, maximal_sets=sets)
    for a in (uni, shape, opt):
        assert _brute_load(np.array(a.parameters), sets, 2) <= 1.0 + 1e-15
    assert opt.weighted_error(w) <= shape.weighted_error(w) + 1e-9
    assert opt.weighted_error(w) <= uni.weighted_error(w) + 1e-9


def test_untrusted_shape_of_oracle_still_safe() -> None:
    """A non-homogeneous (but valid, upper-bounding) oracle: the final check still holds."""
    sets = [(0, 1), (1, 2), (3,)]
    exact = overlap_from_sets(4, sets)

    def padded(y: np.ndarray) -> float:
        return 1.5 * exact(y) + 0.01

    a = allocate(4, Guarantee.pure(1.0), importance=[1, 2, 3, 4], overlap=padded)
    assert padded(np.array(a.parameters)) <= 1.0
    assert exact(np.array(a.parameters)) <= 1.0


def test_utility_gain_homogeneous_formulas() -> None:
    t, gamma = 100, 4
    assert utility_gain(t, Guarantee.pure(1.0), overlap=gamma).gain == pytest.approx(1 - gamma / t)
    assert utility_gain(t, Guarantee.gdp(1.0), overlap=gamma).gain == pytest.approx(
        1 - math.sqrt(gamma / t)
    )
    assert utility_gain(5, Guarantee.gdp(1.0), overlap=5).gain == pytest.approx(0.0, abs=1e-12)


def test_bad_inputs() -> None:
    with pytest.raises(TesseraError):
        allocate(3, Guarantee.pure(1.0), importance=[1, 0, 1])
    with pytest.raises(TesseraError):
        allocate(3, Guarantee.pure(1.0), importance=[1, 1])
    with pytest.raises(TesseraError):
        allocate(3, Guarantee.pure(1.0), overlap=0.5)
    with pytest.raises(TesseraError):
        allocate(3, Guarantee.fdp(gaussian_dp(1.0)))


def test_mechanism_choice_is_checked() -> None:
    a = allocate(4, Guarantee.pure(1.0), overlap=2, mechanism="discrete_laplace")
    assert a.mechanism == "discrete_laplace" and a.noise_scales[0] == pytest.approx(2.0)
    with pytest.raises(TesseraError):
        allocate(4, Guarantee.gdp(1.0), overlap=2, mechanism="discrete_gaussian")
    with pytest.raises(TesseraError):
        allocate(4, Guarantee.pure(1.0), overlap=2, mechanism="gaussian")
    b = allocate(
        4,
        Guarantee.approx(1.0, 1e-6),
        overlap=2,
        via="pld",
        mechanism="discrete_gaussian",
        discretization=1e-3,
    )
    assert b.achieved.epsilon <= 1.0


def test_zcdp_uniform_and_discrete_gaussian() -> None:
    """ρ-zCDP: ρ_q = ρ/γ, σ_q = 1/√(2ρ_q); the discrete Gaussian is exactly 1/(2σ²)-zCDP."""
    a = allocate(6, Guarantee.zcdp(0.5), overlap=2, mechanism="discrete_gaussian")
    assert a.mechanism == "discrete_gaussian"
    assert all(p == pytest.approx(0.25, rel=1e-12) for p in a.parameters)
    assert a.noise_scales[0] == pytest.approx(math.sqrt(1 / (2 * 0.25)), rel=1e-12)
    assert a.achieved.definition is Definition.ZCDP and a.achieved.rho <= 0.5
    assert a.variances()[0] == pytest.approx(2.0, rel=1e-12)  # σ² = 1/(2ρ_q)
    with pytest.raises(TesseraError):
        allocate(6, Guarantee.zcdp(0.5), overlap=2, mechanism="laplace")




def test_final_check_meets_a_sticky_oracle() -> None:
    """The last step re-checks the parameters with the oracle itself. A valid, monotone oracle
    whose slack does not shrink with the parameters (ToulBar2's integer costs round up, so its
    bound can stay put under a tiny shrink) must still be met: the margin has to grow."""
    from types import SimpleNamespace

    from tessera.calibration.allocation import shrink_until_valid

    regime = SimpleNamespace(budget=1.0, squared=False, to_u=lambda p: p)

    def load(u: np.ndarray) -> float:  # ≥ Σu, non-decreasing, stuck above 1 down to 1 − 1e-8
        total = float(np.sum(u))
        return max(total, 1.0 + 1e-11) if total > 1.0 - 1e-8 else total

    params, final = shrink_until_valid(np.array([0.5, 0.5]), regime, load)  # type: ignore[arg-type]
    assert final <= 1.0 and load(params) <= 1.0
    assert float(np.sum(params)) >= 1.0 - 1e-6  # the margin overshoots by at most ~2×
