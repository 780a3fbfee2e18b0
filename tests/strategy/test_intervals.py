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


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 12), st.integers(2, 5), st.data())
def test_nested_inverse_equals_dense(n, b, data):
    """The O(n²) Sherman–Morrison recursion over a tree equals the dense inverse; levels that
    are not nested fall back (None); a planted error in the update is caught."""
    from tessera.strategy.intervals import nested_inverse

    groups = tuple(level_groups(tree_levels(n, b), n))
    u = np.array([data.draw(st.one_of(st.just(0.0), st.floats(0.1, 4.0))) for _ in groups])
    u[-1] = data.draw(st.floats(0.05, 4.0))
    design = IntervalDesign(n, groups)
    dense = np.linalg.inv(design.information(u))
    got = nested_inverse(groups, u)
    np.testing.assert_allclose(got, dense, rtol=1e-9, atol=1e-12)
    if n > 1 and len(groups) > 1 and u[0] > 0:
        wrong = nested_inverse(groups, np.r_[u[0] * 1.01, u[1:]])
        assert not np.allclose(wrong, dense, rtol=1e-9, atol=1e-12)
    if n >= 4:  # two interleaved groups: not intervals
        assert nested_inverse((np.arange(n) % 2, np.arange(n)), [1.0, 1.0]) is None


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 12), st.integers(2, 4), st.data())
def test_gram_total_equals_sum_of_variances(n, b, data):
    groups = tuple(level_groups(tree_levels(n, b), n))
    design = IntervalDesign(n, groups)
    u = np.array([data.draw(st.floats(0.1, 4.0)) for _ in groups])
    spans = Spans.all_ranges(n)
    w = np.array([data.draw(st.floats(0.0, 3.0)) for _ in range(spans.n_queries)])
    np.testing.assert_allclose(design.total(u, spans.gram(n, w)),
                               w @ design.variances(u, spans), rtol=1e-9)
