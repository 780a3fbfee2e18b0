"""Per-level tree costs (tessera.strategy.tree_allocation): the closed-form quadratic forms
equal xᵀMx with M built explicitly, the gradient equals finite differences, and the optimum is
never worse than the start and matches a derivative-free search on small trees."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from tessera.strategy.intervals import IntervalDesign, Spans, level_costs, level_groups, tree_levels
from tessera.strategy.tree_allocation import family_quadratic, gram_quadratic, optimal_level_costs


def _prefix_spans(n: int) -> Spans:
    return Spans.ranges(np.zeros(n, dtype=np.int64), np.arange(1, n + 1))


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 12), st.floats(0.1, 3.0), st.data())
def test_quadratic_forms_equal_the_gram(n, w, data):
    x = np.array([[data.draw(st.floats(-5, 5)) for _ in range(3)] for _ in range(n)])
    for spans, quad in ((Spans.all_ranges(n), family_quadratic("ranges", w)),
                        (_prefix_spans(n), family_quadratic("prefixes", w))):
        gram = spans.gram(n, np.full(spans.n_queries, w))
        np.testing.assert_allclose(quad(x), gram_quadratic(gram)(x), rtol=1e-9, atol=1e-9)
        s = np.zeros((n + 1, 3))
        np.cumsum(x, axis=0, out=s[1:])
        np.testing.assert_allclose(quad.from_prefix_sums(s), quad(x), rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("zcdp", [True, False])
@pytest.mark.parametrize("n, b, kind", [(9, 2, "ranges"), (12, 3, "ranges"), (10, 2, "prefixes")])
def test_optimum_matches_a_derivative_free_search(n, b, kind, zcdp):
    levels = tree_levels(n, b)
    design = IntervalDesign(n, tuple(level_groups(levels, n)))
    spans = Spans.all_ranges(n) if kind == "ranges" else _prefix_spans(n)
    gram = spans.gram(n, np.ones(spans.n_queries))
    quad = family_quadratic(kind, 1.0)
    total = 0.7
    start = level_costs(len(levels), total, 1.0)

    def f(costs: np.ndarray) -> float:
        u = 2 * costs if zcdp else 0.5 * costs * costs
        return design.total(u, gram)

    costs, value = optimal_level_costs(design, levels, start, total, zcdp, gram, quad)
    assert costs.sum() == pytest.approx(total) and np.all(costs > 0)
    assert value == pytest.approx(f(costs), rel=1e-9)
    assert value <= f(start)
    # Nelder–Mead over the softmax parameters (no gradient): no better point
    res = minimize(lambda t: f(total * np.exp(t) / np.exp(t).sum()), np.zeros(len(levels)),
                   method="Nelder-Mead", options={"maxiter": 4000, "xatol": 1e-8,
                                                  "fatol": 1e-12})
    assert value <= res.fun * (1 + 1e-4)


def test_gradient_equals_finite_differences():
    n, b = 11, 2
    levels = tree_levels(n, b)
    design = IntervalDesign(n, tuple(level_groups(levels, n)))
    spans = Spans.all_ranges(n)
    gram = spans.gram(n, np.ones(spans.n_queries))
    quad = family_quadratic("ranges", 1.0)
    u = np.linspace(0.3, 1.2, len(levels))
    cov = design.covariance(u)
    ccum = np.zeros((n, n + 1))
    np.cumsum(cov, axis=1, out=ccum[:, 1:])
    for lv, level in enumerate(levels):
        lo = np.array([s for s, _ in level])
        hi = np.array([e for _, e in level])
        analytic = -float(quad(ccum[:, hi] - ccum[:, lo]).sum())
        h = 1e-6
        up, dn = u.copy(), u.copy()
        up[lv] += h
        dn[lv] -= h
        numeric = (IntervalDesign(n, design.groups).total(up, gram)
                   - IntervalDesign(n, design.groups).total(dn, gram)) / (2 * h)
        assert analytic == pytest.approx(numeric, rel=1e-5)
