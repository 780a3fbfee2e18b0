"""The residual-basis GLS (tessera.strategy.marginals) equals explicit GLS on small domains."""

from __future__ import annotations

import itertools
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.strategy.marginals import MarginalDesign, downward_closure, optimal_precisions


def _query_matrix(sizes: dict[str, int], scope: tuple[str, ...]) -> np.ndarray:
    """Q_S over the full domain (attributes in dict order), rows in row-major cell order."""
    names = list(sizes)
    mats = [np.eye(sizes[a]) if a in scope else np.ones((1, sizes[a])) for a in names]
    out = np.ones((1, 1))
    for m in mats:
        out = np.kron(out, m)
    return out


@st.composite
def designs(draw: st.DrawFn) -> tuple[MarginalDesign, np.ndarray]:
    d = draw(st.integers(1, 4))
    names = [f"a{i}" for i in range(d)]
    sizes = {a: draw(st.integers(2, 4)) for a in names}
    all_scopes = [c for k in range(d + 1) for c in itertools.combinations(names, k)]
    targets = tuple(draw(st.lists(st.sampled_from(all_scopes), min_size=1, max_size=4,
                                  unique=True)))
    extra = tuple(draw(st.lists(st.sampled_from(all_scopes), max_size=3, unique=True)))
    measured = tuple(dict.fromkeys(
        [t for t in targets if draw(st.booleans())] + list(extra)
        + [max((a for a in all_scopes if set(t) <= set(a)), key=len) for t in targets]))
    prec = np.array([draw(st.floats(0.05, 5.0)) for _ in measured])
    return MarginalDesign(sizes, measured, targets), prec


@settings(max_examples=60, deadline=None)
@given(designs(), st.integers(0, 2**31 - 1))
def test_residual_gls_equals_explicit_gls(case, seed):
    design, prec = case
    sizes = dict(design.sizes)
    a = np.vstack([_query_matrix(sizes, s) for s in design.measured])
    dvec = np.concatenate([np.full(design.cells(s), u) for s, u in zip(design.measured, prec)])
    info_pinv = np.linalg.pinv(a.T @ (dvec[:, None] * a))
    rng = np.random.default_rng(seed)
    y = rng.normal(0, 10, a.shape[0])
    xhat = info_pinv @ (a.T @ (dvec * y))
    answers, start = {}, 0
    for s in design.measured:
        answers[s] = y[start:start + design.cells(s)]
        start += design.cells(s)
    got = design.reconstruct(answers, dict(zip(design.measured, prec)))
    var = design.variances(prec)
    for s, v in zip(design.targets, var):
        q = _query_matrix(sizes, s)
        np.testing.assert_allclose(got[s].ravel(), q @ xhat, rtol=1e-7, atol=1e-7)
        np.testing.assert_allclose(np.full(q.shape[0], v), np.diag(q @ info_pinv @ q.T),
                                   rtol=1e-7, atol=1e-10)


def test_closure_and_allocation_beats_uniform():
    sizes = {"a": 2, "b": 8, "c": 3}
    targets = (("a", "b"), ("b", "c"), ("a", "c"))
    design = MarginalDesign(sizes, downward_closure(targets), targets)
    w = np.ones(len(targets))
    cost = optimal_precisions(design, w, zcdp=True, total=1.0)
    assert math.isclose(cost.sum(), 1.0)
    cells = np.array([design.cells(s) for s in targets])
    best = float(cells @ design.variances(2 * cost))
    uniform = float(cells @ design.variances(2 * np.full(len(cost), 1 / len(cost))))
    assert best < uniform
