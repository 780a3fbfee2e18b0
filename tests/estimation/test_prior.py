"""The final estimate as a posterior mode (tessera.estimation.prior) against brute force: the
interaction projection against one built from an explicit main-effects design matrix, and the
posterior mode against the same objective minimised over an explicitly enumerated distribution."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

import tessera.estimation.prior as prior
from tessera.estimation.maxent import GroupMeasurement, ScopeModel, fit
from tessera.estimation.prior import interactions, posterior_mode
from tessera.schema.domain import Domain


def _main_effects_basis(shape: tuple[int, ...]) -> np.ndarray:
    """Columns spanning the functions of one attribute of a table (and the constant): one
    indicator column per (attribute, value), cells in C order."""
    cells = np.array(list(itertools.product(*(range(n) for n in shape))))
    cols = [np.ones(len(cells))]
    for a, n in enumerate(shape):
        cols += [(cells[:, a] == v).astype(float) for v in range(n)]
    return np.stack(cols, axis=1)


def _brute_interactions(model: ScopeModel, theta: np.ndarray) -> np.ndarray:
    """M θ as θ minus its least-squares projection on the main-effects basis, table by table."""
    out = np.zeros_like(theta)
    for k, shape in enumerate(model.shapes):
        lo, hi = model.offsets[k], model.offsets[k + 1]
        basis = _main_effects_basis(shape)
        coef, *_ = np.linalg.lstsq(basis, theta[lo:hi], rcond=None)
        out[lo:hi] = theta[lo:hi] - basis @ coef
    return out


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(2, 4), min_size=2, max_size=5),
       seed=st.integers(0, 2**31 - 1))
def test_interactions_is_the_orthogonal_projection_off_the_main_effects(
        sizes: list[int], seed: int) -> None:
    rng = np.random.default_rng(seed)
    d = len(sizes)
    dom = Domain.from_dict({f"a{i}": n for i, n in enumerate(sizes)})
    scopes = [tuple(range(d)), (0,), tuple(range(1, d))]
    model = ScopeModel(dom, scopes)
    x, y = rng.normal(size=(2, model.n_parameters))
    mx = interactions(model, x)
    np.testing.assert_allclose(mx, _brute_interactions(model, x), atol=1e-10)
    np.testing.assert_allclose(interactions(model, mx), mx, atol=1e-10)  # idempotent
    assert float(mx @ y) == pytest.approx(float(x @ interactions(model, y)), abs=1e-9)  # symmetric


def _explicit(model: ScopeModel, theta: np.ndarray, points: np.ndarray) -> np.ndarray:
    logp = np.zeros(len(points))
    for k, (s, sh) in enumerate(zip(model.scopes, model.shapes, strict=True)):
        logp += theta[model.offsets[k]: model.offsets[k + 1]].reshape(sh)[
            tuple(points[:, a] for a in s)]
    p = np.exp(logp - logp.max())
    return p / p.sum()


def _problem(seed: int) -> tuple[ScopeModel, list[GroupMeasurement], float, np.ndarray]:
    """A small model whose measurements are noisy (negative counts too) and overlap."""
    rng = np.random.default_rng(seed)
    sizes = [int(x) for x in rng.integers(2, 4, size=4)]
    dom = Domain.from_dict({f"a{i}": n for i, n in enumerate(sizes)})
    scopes = [(0, 1, 2), (1, 2, 3), (0, 3)]
    model = ScopeModel(dom, scopes)
    total = 300.0
    ms = [GroupMeasurement(s, rng.uniform(-20, 120, math.prod(sizes[a] for a in s)),
                           float(rng.uniform(10, 40))) for s in (*scopes, (2,))]
    points = np.array(list(itertools.product(*(range(n) for n in sizes))))
    return model, ms, total, points


def _design(model: ScopeModel, points: np.ndarray) -> np.ndarray:
    """A: one row per point, one column per parameter; log p = A θ − log Z."""
    a = np.zeros((len(points), model.n_parameters))
    rows = np.arange(len(points))
    for k, (s, sh) in enumerate(zip(model.scopes, model.shapes, strict=True)):
        a[rows, model.offsets[k] + np.ravel_multi_index(tuple(points[:, i] for i in s), sh)] = 1
    return a


def _brute_objective(model: ScopeModel, ms: list[GroupMeasurement], total: float,
                     points: np.ndarray, scale: float):  # noqa: ANN202
    """F(θ) = Σ_m ‖total·B_m p − y_m‖² / (2 sd_m²) + Σ log(1 + ((Mθ)/s)²) by enumeration of
    every point, and its gradient by the chain rule through the explicit softmax p = e^{Aθ}/Z:
    ∇ = Aᵀ (p ⊙ (g − p·g)) with g = Σ_m total · B_mᵀ (total·B_m p − y_m) / sd_m², plus
    M (2 Mθ / (s² + (Mθ)²)) (M, the orthogonal projection, is symmetric)."""
    sizes = model.domain.sizes
    design = _design(model, points)
    cells = [np.ravel_multi_index(tuple(points[:, a] for a in m.scope),
                                  [sizes[a] for a in m.scope]) for m in ms]

    def value_and_grad(theta: np.ndarray) -> tuple[float, np.ndarray]:
        p = _explicit(model, theta, points)
        loss, g = 0.0, np.zeros(len(points))
        for m, idx in zip(ms, cells, strict=True):
            r = total * np.bincount(idx, weights=p, minlength=len(m.y)) - m.y
            loss += float(r @ r) / (2 * m.sd ** 2)
            g += total * r[idx] / m.sd ** 2
        mt = _brute_interactions(model, theta)
        grad = design.T @ (p * (g - p @ g))
        grad += _brute_interactions(model, 2 * mt / (scale ** 2 + mt ** 2))
        return loss + float(np.sum(np.log1p((mt / scale) ** 2))), grad

    return value_and_grad


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("scale", [0.5, 2.5])
def test_the_posterior_mode_is_the_brute_force_minimum(seed: int, scale: float) -> None:
    """F by enumeration of every point, minimised by L-BFGS on numeric differences of the
    explicit F (no engine, no Fisher products); the library's F at its θ is the same number,
    and equals the brute-force minimum within the tolerance."""
    model, ms, total, points = _problem(seed)
    objective = _brute_objective(model, ms, total, points, scale)
    ours = posterior_mode(model, ms, total, scale=scale, iterations=5000, tolerance=1e-14)
    assert objective(ours.theta)[0] == pytest.approx(ours.loss, rel=1e-9)
    best = minimize(objective, model.zero(), jac=True, method="L-BFGS-B",
                    options={"maxiter": 20_000, "ftol": 1e-15, "gtol": 1e-9})
    assert ours.loss <= best.fun * (1 + 1e-6) + 1e-8
    assert best.fun <= ours.loss * (1 + 1e-6) + 1e-8


def test_the_check_catches_a_wrong_projection(monkeypatch: pytest.MonkeyPatch) -> None:
    """A planted bug — the prior on the whole table, main effects included (shrinking towards
    the uniform distribution) — is caught by the brute-force comparison above."""
    model, ms, total, points = _problem(0)
    objective = _brute_objective(model, ms, total, points, 0.5)
    monkeypatch.setattr(prior, "interactions", lambda model, theta: theta)
    planted = posterior_mode(model, ms, total, scale=0.5, iterations=5000, tolerance=1e-14)
    assert objective(planted.theta)[0] != pytest.approx(planted.loss, rel=1e-3)


@pytest.mark.parametrize("scale", [0.5, 2.5])
def test_the_brute_force_gradient_is_the_objectives(scale: float) -> None:
    """The brute force's analytic gradient against central differences of its value at random
    points (so the minimum it finds is the explicit objective's own)."""
    model, ms, total, points = _problem(1)
    objective = _brute_objective(model, ms, total, points, scale)
    rng = np.random.default_rng(7)
    for _ in range(3):
        theta = rng.normal(0, 1.5, model.n_parameters)
        h = 1e-6
        numeric = np.array([(objective(theta + h * e)[0] - objective(theta - h * e)[0]) / (2 * h)
                            for e in np.eye(len(theta))])
        np.testing.assert_allclose(objective(theta)[1], numeric, rtol=1e-5, atol=1e-4)


def test_a_wide_prior_gives_the_maximum_likelihood_fit() -> None:
    """As s → ∞ the posterior mode is the likelihood's: on consistent, noiseless measurements
    both reproduce them."""
    rng = np.random.default_rng(5)
    sizes = [2, 3, 2, 3]
    dom = Domain.from_dict({f"a{i}": n for i, n in enumerate(sizes)})
    points = np.array(list(itertools.product(*(range(n) for n in sizes))))
    truth = rng.dirichlet(np.ones(len(points)))
    total = 1000.0
    scopes = [(0, 1), (1, 2), (2, 3)]
    ms = []
    for s in scopes:
        idx = np.ravel_multi_index(tuple(points[:, a] for a in s), [sizes[a] for a in s])
        ms.append(GroupMeasurement(s, total * np.bincount(idx, weights=truth), 1.0))
    model = ScopeModel(dom, scopes)
    mle = fit(model, ms, total, iterations=20_000, tolerance=1e-14)
    wide = posterior_mode(model, ms, total, scale=1e4, iterations=5000, tolerance=1e-15)
    for k in range(len(scopes)):
        np.testing.assert_allclose(total * wide.marginals[model.offsets[k]: model.offsets[k + 1]],
                                   ms[k].y, atol=1e-3)
        np.testing.assert_allclose(wide.marginals[model.offsets[k]: model.offsets[k + 1]],
                                   mle.marginals[model.offsets[k]: model.offsets[k + 1]],
                                   atol=1e-5)


def test_a_narrower_prior_shrinks_the_interactions_more() -> None:
    """One noisy 2×2 marginal (a negative count): the posterior mode's interaction part grows
    with the scale, and a narrow prior cuts it to under a quarter of a wide one's."""
    model = ScopeModel(Domain.from_dict({"a": 2, "b": 2}), [(0, 1)])
    noisy = [GroupMeasurement((0, 1), np.array([60.0, -20.0, 10.0, 50.0]), 30.0)]
    strength = []
    for scale in (0.3, 1.0, 2.5, 100.0):
        post = posterior_mode(model, noisy, 100.0, scale=scale, iterations=2000,
                              tolerance=1e-14)
        strength.append(float(np.abs(interactions(model, post.theta)).sum()))
    assert strength == sorted(strength)
    assert strength[0] < strength[-1] / 4


def test_a_scale_that_is_not_a_positive_number_is_refused() -> None:
    model = ScopeModel(Domain.from_dict({"a": 2, "b": 2}), [(0, 1)])
    noisy = [GroupMeasurement((0, 1), np.ones(4), 1.0)]
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="scale"):
            posterior_mode(model, noisy, 4.0, scale=bad)


@pytest.mark.parametrize("passes", [30, 90, 300])
def test_the_engine_passes_are_capped(passes: int) -> None:
    """``passes`` bounds the engine passes of both trials and the rest (three an evaluation,
    one more for the result's marginals), and a larger cap never ends higher."""
    model, ms, total, _ = _problem(1)
    mle = fit(model, ms, total, iterations=500)
    free = posterior_mode(model, ms, total, likelihood=mle.theta)
    capped = posterior_mode(model, ms, total, likelihood=mle.theta, passes=passes)
    assert capped.oracle_calls <= passes + 1 < free.oracle_calls
    assert capped.loss >= free.loss - 1e-9
