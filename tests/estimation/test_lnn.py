"""GReM-LNN (tessera.estimation.lnn) against brute force on tiny domains, and its properties."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from tessera.estimation.lnn import MarginalMeasurement, estimate_marginals


def _query_matrix(sizes: dict[str, int], scope: tuple[str, ...]) -> np.ndarray:
    """Q_S over the full domain (attributes in dict order), rows in row-major cell order."""
    out = np.ones((1, 1))
    for a in sizes:
        out = np.kron(out, np.eye(sizes[a]) if a in scope else np.ones((1, sizes[a])))
    return out


@st.composite
def problems(draw: st.DrawFn, max_d: int = 3
             ) -> tuple[dict[str, int], list[MarginalMeasurement], list[tuple[str, ...]]]:
    """A random domain (d ≤ max_d, sizes 2–3), measured scopes covering random targets, and
    noisy measurements of a sparse histogram (noise large enough to make negatives)."""
    d = draw(st.integers(1, max_d))
    names = [f"a{i}" for i in range(d)]
    sizes = {a: draw(st.integers(2, 3)) for a in names}
    scopes = [c for k in range(1, d + 1) for c in itertools.combinations(names, k)]
    targets = draw(st.lists(st.sampled_from(scopes), min_size=1, max_size=4, unique=True))
    measured = list(dict.fromkeys(
        [t for t in targets if draw(st.booleans())]
        + draw(st.lists(st.sampled_from(scopes + [()]), max_size=2, unique=True))
        + [max((a for a in scopes if set(t) <= set(a)), key=len) for t in targets]))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    n = math.prod(sizes.values())
    x = rng.integers(0, 4, n) * (rng.random(n) < 0.4)
    ms = []
    for a in measured:
        v = float(rng.uniform(0.5, 6.0))
        y = _query_matrix(sizes, a) @ x + rng.normal(0, math.sqrt(v), math.prod(
            sizes[i] for i in a))
        ms.append(MarginalMeasurement(a, y, v))
    return sizes, ms, targets


def _brute_force(sizes: dict[str, int], ms: list[MarginalMeasurement],
                 targets: list[tuple[str, ...]]) -> tuple[dict[tuple[str, ...], np.ndarray], float]:
    """min_x ½ Σ_A u_A ‖Q_A x − y_A‖² s.t. Q_S x ≥ 0, x over the full joint (SLSQP)."""
    qa = [(_query_matrix(sizes, m.scope), np.asarray(m.values), 1 / m.variance) for m in ms]
    qs = np.vstack([_query_matrix(sizes, t) for t in targets])
    n = qs.shape[1]

    def f(x: np.ndarray) -> tuple[float, np.ndarray]:
        val, grad = 0.0, np.zeros(n)
        for q, y, u in qa:
            r = q @ x - y
            val += 0.5 * u * float(r @ r)
            grad += u * (q.T @ r)
        return val, grad

    cons = [{"type": "ineq", "fun": lambda x: qs @ x, "jac": lambda x: qs}]
    res = minimize(f, np.zeros(n), jac=True, method="SLSQP", constraints=cons,
                   options={"maxiter": 2000, "ftol": 1e-14})
    if not res.success:  # SLSQP's line search can stall at the optimum ("positive
        # directional derivative"): restart it from where it stopped, then an interior method
        res = minimize(f, res.x, jac=True, method="SLSQP", constraints=cons,
                       options={"maxiter": 2000, "ftol": 1e-12})
    if not res.success:
        from scipy.optimize import LinearConstraint

        res = minimize(f, res.x, jac=True, method="trust-constr",
                       constraints=[LinearConstraint(qs, 0, np.inf)],
                       options={"maxiter": 20_000, "gtol": 1e-12, "xtol": 1e-14})
    assert res.success, res.message
    out = {t: _query_matrix(sizes, t) @ res.x for t in targets}
    return out, float(res.fun)


def _objective(sizes: dict[str, int], ms: list[MarginalMeasurement],
               est: dict[tuple[str, ...], np.ndarray]) -> float:
    """The objective at the estimate, through a joint x reproducing the estimated targets
    (least-norm solution of Q_S x = μ_S; exists because the targets are consistent)."""
    targets = list(est)
    qs = np.vstack([_query_matrix(sizes, t) for t in targets])
    mu = np.concatenate([est[t].ravel() for t in targets])
    x, *_ = np.linalg.lstsq(qs, mu, rcond=None)
    assert np.allclose(qs @ x, mu, atol=1e-6)  # consistent: realisable by one x
    # the measured scopes' fitted values: GLS directions unconstrained by the targets are free,
    # so minimise over x + null(Q_S)
    null = np.linalg.svd(qs)[2][np.linalg.matrix_rank(qs):].T
    qa = [(_query_matrix(sizes, m.scope), np.asarray(m.values), 1 / m.variance) for m in ms]
    if null.shape[1]:
        a = np.vstack([math.sqrt(u) * q @ null for q, _, u in qa])
        b = np.concatenate([math.sqrt(u) * (y - q @ x) for q, y, u in qa])
        x = x + null @ np.linalg.lstsq(a, b, rcond=None)[0]
    return sum(0.5 * u * float(np.sum((q @ x - y) ** 2)) for q, y, u in qa)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_equals_brute_force_optimum(problem) -> None:  # type: ignore[no-untyped-def]
    sizes, ms, targets = problem
    est = estimate_marginals(sizes, ms, targets, tol=1e-9)
    want, fmin = _brute_force(sizes, ms, targets)
    got = _objective(sizes, ms, est.marginals)
    assert got <= fmin + 1e-6 * max(1.0, abs(fmin))
    for t in targets:
        np.testing.assert_allclose(est.marginals[t].ravel(), want[t], atol=2e-3)


@settings(max_examples=60, deadline=None)
@given(problems(max_d=4))
def test_nonnegative_consistent_total(problem) -> None:  # type: ignore[no-untyped-def]
    sizes, ms, targets = problem
    est = estimate_marginals(sizes, ms, targets)
    totals = [float(est.marginals[t].sum()) for t in targets]
    for t in targets:
        assert np.all(est.marginals[t] >= 0)
        assert est.marginals[t].shape == tuple(sizes[a] for a in t)
    assert np.allclose(totals, totals[0], atol=1e-8 * max(1.0, abs(totals[0])))
    assert math.isclose(est.total, totals[0], rel_tol=1e-9, abs_tol=1e-9) or est.alpha > 0
    for s, t in itertools.combinations(targets, 2):
        shared = [a for a in s if a in t]
        ms_ = est.marginals[s].sum(axis=tuple(k for k, a in enumerate(s) if a not in shared))
        mt_ = est.marginals[t].sum(axis=tuple(k for k, a in enumerate(t) if a not in shared))
        np.testing.assert_allclose(ms_, mt_, atol=1e-8 * max(1.0, totals[0]))


def test_gls_kept_when_already_nonnegative() -> None:
    sizes = {"a": 2, "b": 3}
    x = np.array([10.0, 20.0, 5.0, 7.0, 9.0, 30.0])
    ms = [MarginalMeasurement(("a", "b"), x + 0.5, 1.0),
          MarginalMeasurement(("a",), np.array([35.0, 46.0]), 2.0)]
    est = estimate_marginals(sizes, ms, [("a", "b"), ("b",)])
    assert est.iterations == 0 and est.alpha == 0.0
    for t in (("a", "b"), ("b",)):
        np.testing.assert_array_equal(est.marginals[t], est.gls[t])


def test_zero_cells_of_a_noisy_sparse_table() -> None:
    """A true table with structural zeros: the negative noisy cells end at 0 and the
    estimate is closer to the truth than GLS (fixed seed)."""
    rng = np.random.default_rng(7)
    sizes = {"a": 8, "b": 8}
    x = np.zeros((8, 8))
    x[np.arange(8), np.arange(8)] = 50.0
    y = x.ravel() + rng.normal(0, 5.0, 64)
    est = estimate_marginals(sizes, [MarginalMeasurement(("a", "b"), y, 25.0)], [("a", "b")])
    err = np.abs(est.marginals[("a", "b")] - x).mean()
    assert est.deficit < 1e-4
    assert err < np.abs(y.reshape(8, 8) - x).mean()


@pytest.mark.parametrize(("ms", "targets", "match"), [
    ([MarginalMeasurement(("a",), np.zeros(3), 1.0)], [("a",)], "has 3 values, expected 2"),
    ([MarginalMeasurement(("a",), np.zeros(2), 0.0)], [("a",)], "variance 0.0"),
    ([MarginalMeasurement(("z",), np.zeros(2), 1.0)], [("a",)], "unknown attribute 'z'"),
    ([MarginalMeasurement(("a",), np.zeros(2), 1.0)], [("a", "b")], "lies in no measured"),
    ([], [("a",)], "no measurements"),
])
def test_bad_input(ms: list[MarginalMeasurement], targets: list[tuple[str, ...]],
                   match: str) -> None:
    with pytest.raises(ValueError, match=match):
        estimate_marginals({"a": 2, "b": 2}, ms, targets)
