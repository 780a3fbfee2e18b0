"""Residual contrasts (tessera.strategy.contrasts) against explicit matrices on small domains:
the exact L2 sensitivity, the GLS estimate and its per-cell variance, the closed-form optimum."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.strategy.contrasts import AttributeContrasts, ResidualContrasts, efficiency


def _marginal_matrix(sizes: dict[str, int], scope: tuple[str, ...]) -> np.ndarray:
    """Q_S over the full domain (attributes in dict order), rows row-major over S."""
    out = np.ones((1, 1))
    for a in sizes:
        out = np.kron(out, np.eye(sizes[a]) if a in scope else np.ones((1, sizes[a])))
    return out


def _contrast_matrix(rc: ResidualContrasts, scope: tuple[str, ...]) -> np.ndarray:
    """(⊗_{i∈A} G_i) Q_A over the full domain: the residual's rows, explicitly."""
    g = np.ones((1, 1))
    for f in rc.factors(scope):
        g = np.kron(g, f.rows.astype(np.float64))
    return g @ _marginal_matrix(dict(rc.sizes), scope)


@st.composite
def cases(draw: st.DrawFn) -> tuple[ResidualContrasts, np.ndarray]:
    d = draw(st.integers(1, 3))
    names = [f"a{i}" for i in range(d)]
    sizes = {a: draw(st.integers(2, 5)) for a in names}
    scopes = [c for k in range(1, d + 1) for c in itertools.combinations(names, k)]
    targets = tuple(draw(st.lists(st.sampled_from(scopes), min_size=1, max_size=3, unique=True)))
    rc = ResidualContrasts(sizes, targets)
    v = np.array([draw(st.floats(0.1, 10.0)) for _ in rc.scopes])
    return rc, v


@settings(max_examples=60, deadline=None)
@given(cases(), st.integers(0, 2**31 - 1))
def test_gls_and_variances_equal_explicit_gls(case, seed):
    rc, v = case
    sizes = dict(rc.sizes)
    k = np.vstack([_contrast_matrix(rc, s) for s in rc.scopes])
    # noise variance of residual A: v_A Δ_A² (as in a release, σ_A ∝ Δ_A: the whitened rows
    # then have comparable norms and the explicit side keeps its digits)
    v = np.array([x * rc.sensitivity2(s) for s, x in zip(rc.scopes, v)])
    var = np.concatenate([np.full(rc.n_contrasts(s), x) for s, x in zip(rc.scopes, v)])
    rng = np.random.default_rng(seed)
    # the estimator is linear: noise alone exercises its whole map and keeps the explicit
    # side's digits (k @ x reaches 10^13); the noiseless test below checks k @ x itself
    y = rng.normal(0, 1, k.shape[0]) * np.sqrt(var)
    # explicit GLS through the SVD of the whitened rows (the normal equations' condition
    # number, ~10^12 with multipliers ~10^4, would lose the digits compared here)
    a = k / np.sqrt(var)[:, None]
    u, sv, vt = np.linalg.svd(a, full_matrices=False)
    keep = sv > sv.max() * 1e-12
    u, sv, vt = u[:, keep], sv[keep], vt[keep]
    xhat = vt.T @ ((u.T @ (y / np.sqrt(var))) / sv)
    noisy, start = {}, 0
    for s in rc.scopes:
        noisy[s] = y[start:start + rc.n_contrasts(s)]
        start += rc.n_contrasts(s)
    got = rc.reconstruct(noisy)
    got_var = rc.variances(dict(zip(rc.scopes, v)))
    for t in rc.targets:
        q = _marginal_matrix(sizes, t)
        np.testing.assert_allclose(got[t].ravel(), q @ xhat, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(got_var[t].ravel(), (((vt @ q.T) / sv[:, None]) ** 2).sum(0),
                                   rtol=1e-9)


@settings(max_examples=40, deadline=None)
@given(cases())
def test_noiseless_contrasts_reconstruct_the_exact_marginals(case):
    rc, _ = case
    sizes = dict(rc.sizes)
    x = np.random.default_rng(0).integers(0, 50, math.prod(sizes.values()))
    noisy = {s: rc.contrasts(s, _marginal_matrix(sizes, s) @ x) for s in rc.scopes}
    for s in rc.scopes:  # the contrasts are the explicit integer rows applied to x
        np.testing.assert_array_equal(noisy[s], (_contrast_matrix(rc, s) @ x).astype(np.int64))
    got = rc.reconstruct(noisy)
    for t in rc.targets:
        np.testing.assert_allclose(got[t].ravel(), _marginal_matrix(sizes, t) @ x, atol=1e-8)


@settings(max_examples=60, deadline=None)
@given(cases())
def test_sensitivity_is_the_largest_column_norm(case):
    rc, _ = case
    sizes = dict(rc.sizes)
    for s in rc.scopes:  # exact: Python integers
        g = np.ones((1, 1), dtype=object)
        for f in rc.factors(s):
            g = np.kron(g, f.rows.astype(object))
        cols = (g.dot(_marginal_matrix(sizes, s).astype(int).astype(object)) ** 2).sum(axis=0)
        assert rc.sensitivity2(s) == max(cols)


def test_rows_are_orthogonal_integer_contrasts():
    for n in (2, 3, 7, 16, 42):
        a = AttributeContrasts(n)
        g = a.rows
        assert g.dtype == np.int64 and np.all(g.sum(axis=1) == 0)
        gram = g @ g.T
        assert np.count_nonzero(gram - np.diag(np.diag(gram))) == 0


def test_efficiency_is_near_residualplanner():
    assert efficiency(2) == 1.0
    assert all(efficiency(n) < 1.001 for n in (3, 5, 9, 16, 32, 42, 100))


def test_optimal_costs_reach_the_closed_form_and_beat_perturbations():
    rc = ResidualContrasts({"a": 2, "b": 5, "c": 9}, (("a", "b"), ("b", "c"), ("a", "c")))
    w = [1.0, 2.0, 0.5]
    rho = 0.3
    c = rc.optimal_costs(w, rho)
    assert math.isclose(c.sum(), rho)
    a = rc.error_weights(w)
    d2 = np.array([rc.sensitivity2(s) for s in rc.scopes], dtype=float)

    def total(costs):  # Σ_A a_A S_A², S_A² = Δ_A²/(2 ρ_A)
        return float(a @ (d2 / (2 * costs)))

    closed = float((np.sqrt(a * d2)).sum() ** 2 / (2 * rho))
    assert math.isclose(total(c), closed, rel_tol=1e-12)
    rng = np.random.default_rng(1)
    for _ in range(50):
        p = c * np.exp(rng.normal(0, 0.2, c.size))
        assert total(p / p.sum() * rho) >= closed * (1 - 1e-12)


def test_more_rows_than_the_contrasts_fit_are_refused_before_the_charge():
    import pytest

    from tessera.errors import ResourceError
    from tessera.strategy.contrasts import MAX_ABS_CONTRAST, MAX_ROWS

    rc = ResidualContrasts({"a": 42, "b": 32, "c": 32}, (("a", "b", "c"),))
    for s in rc.scopes:  # every scope's contrasts fit 64 bits at MAX_ROWS rows
        bound = MAX_ROWS * math.prod(f.max_abs for f in rc.factors(s))
        assert bound <= MAX_ABS_CONTRAST
    rc.check_rows(MAX_ROWS)
    with pytest.raises(ResourceError, match="--strategy identity"):
        rc.check_rows(MAX_ROWS + 1)


@pytest.mark.filterwarnings("ignore:delta_grad == 0.0:UserWarning")  # scipy's BFGS note
def test_minimax_costs_lower_the_worst_cell_to_the_optimum():
    """``--objective max``: the SLSQP split's worst weighted cell variance is below the
    total-optimal split's and matches an independent solver (trust-constr) on the same convex
    program; the bound K/ρ is the worst cell of the exact variances."""
    from scipy.optimize import minimize

    rc = ResidualContrasts({"a": 2, "b": 5, "c": 9}, (("a", "b"), ("b", "c"), ("a", "c")))
    w = [1.0, 2.0, 0.5]
    rho = 0.3
    k = rc.worst_cell_weights(w)
    mm = rc.minimax_costs(w, rho)
    tot = rc.optimal_costs(w, rho)
    assert math.isclose(mm.sum(), rho)
    worst = float(np.max(k @ (1 / mm)))
    assert worst < float(np.max(k @ (1 / tot))) * (1 - 1e-3)
    # K/ρ is the worst cell: the exact per-cell variances at σ_A² = Δ_A²/(2ρ_A)
    var = rc.variances({s: rc.sensitivity2(s) / (2 * r) for s, r in zip(rc.scopes, mm)})
    exact = max(wt * float(var[t].max()) for t, wt in zip(rc.targets, w))
    assert math.isclose(exact, worst, rel_tol=1e-9)
    # an independent solver on the epigraph form
    n = len(rc.scopes)
    res = minimize(lambda x: x[-1], np.r_[np.full(n, rho / n), 10 * worst], method="trust-constr",
                   constraints=[{"type": "ineq", "fun": lambda x: x[-1] - k @ (1 / x[:-1])},
                                {"type": "eq", "fun": lambda x: x[:-1].sum() - rho}],
                   bounds=[(1e-9, rho)] * n + [(0, None)], options={"maxiter": 3000})
    assert worst <= float(np.max(k @ (1 / res.x[:-1]))) * (1 + 1e-4)
