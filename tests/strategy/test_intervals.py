"""One-attribute GLS (tessera.strategy.intervals) equals explicit GLS; tree levels partition."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.strategy.intervals import IntervalDesign, Spans, level_groups, tree_levels


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 12), st.integers(2, 4), st.data())
def test_tree_gls_equals_explicit(n, b, data):
    levels = tree_levels(n, b)
    groups = level_groups(levels, n)
    for g in groups:  # each level is a partition of the codes
        assert np.all(g >= 0)
    design = IntervalDesign(n, tuple(groups))
    u = np.array([data.draw(st.floats(0.1, 4.0)) for _ in levels])
    k = data.draw(st.integers(1, 6))
    lo, hi, owner = [], [], []
    for q in range(k):
        for _ in range(data.draw(st.integers(1, 2))):
            a = data.draw(st.integers(0, n - 1))
            e = data.draw(st.integers(a + 1, n))
            lo.append(a)
            hi.append(e)
            owner.append(q)
    spans = Spans(np.array(lo), np.array(hi), np.array(owner), k)
    # explicit: measurement matrix, GLS, query matrix (overlapping spans of a query add up)
    rows, prec = [], []
    for g, ul in zip(groups, u):
        for j in range(g.max() + 1):
            rows.append((g == j).astype(float))
            prec.append(ul)
    a_mat, d = np.array(rows), np.array(prec)
    cov = np.linalg.inv(a_mat.T @ (d[:, None] * a_mat))
    w_mat = np.zeros((k, n))
    for s, e, q in zip(lo, hi, owner):
        w_mat[q, s:e] += 1
    np.testing.assert_allclose(design.variances(u, spans), np.diag(w_mat @ cov @ w_mat.T),
                               rtol=1e-8)
    y = np.random.default_rng(0).normal(0, 5, len(rows))
    ys, start = [], 0
    for g in groups:
        ys.append(y[start:start + g.max() + 1])
        start += g.max() + 1
    np.testing.assert_allclose(design.reconstruct(ys, u, spans),
                               w_mat @ cov @ a_mat.T @ (d * y), rtol=1e-8, atol=1e-8)
