"""The adaptive method's model view against brute force: the indexed searches that replaced
quadratic scans at d = 1,024 (maximal scopes, the smallest container of a scope, the smallest
clique holding it) return exactly what the scans returned (hypothesis, d ≤ 10)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.estimation.maxent import ScopeModel
from tessera.schema.domain import Domain
from tessera.synth.model_view import clique_index, from_cliques, maximal_scopes

Scope = tuple[int, ...]
scope_lists = st.lists(
    st.lists(st.integers(0, 9), min_size=1, max_size=4, unique=True).map(
        lambda s: tuple(sorted(s))), min_size=1, max_size=14, unique=True)


def _maximal_by_scan(scopes: list[Scope]) -> list[Scope]:
    return [s for s in scopes if not any(set(s) < set(t) for t in scopes)]


def _smallest_by_scan(sets: list[frozenset[int]], want: Scope) -> int | None:
    best = None
    for k, s in enumerate(sets):
        if set(want) <= s and (best is None or len(s) < len(sets[best])):
            best = k
    return best


@settings(max_examples=200, deadline=None)
@given(scope_lists)
def test_maximal_scopes_equal_the_scan(scopes: list[Scope]) -> None:
    assert maximal_scopes(scopes) == _maximal_by_scan(scopes)


@settings(max_examples=100, deadline=None)
@given(scope_lists, st.lists(st.integers(0, 9), min_size=1, max_size=3, unique=True))
def test_container_and_clique_equal_the_scan(scopes: list[Scope], want: list[int]) -> None:
    dom = Domain.from_dict({f"a{i}": 2 + i % 2 for i in range(10)})
    model = ScopeModel(dom, scopes)
    w = tuple(sorted(want))
    assert model.container(w) == _smallest_by_scan([frozenset(s) for s in scopes], w)
    rng = np.random.default_rng(len(scopes))  # not-privacy-noise: distinct tables per clique
    cliques = []
    for s in scopes:
        t = rng.random([dom.sizes[a] for a in s])
        cliques.append((tuple(s), t / t.sum()))
    fast = from_cliques(cliques, w, clique_index(cliques))
    slow = from_cliques(cliques, w)
    holding = [k for k, (v, _) in enumerate(cliques) if set(w) <= set(v)]
    k = min(holding, key=lambda j: cliques[j][1].size, default=None)  # smallest table, first
    if k is None:
        assert fast is None and slow is None
    else:
        assert fast is not None and slow is not None
        np.testing.assert_array_equal(fast, slow)
        variables, table = cliques[k]
        axes = tuple(i for i, v in enumerate(variables) if v not in w)
        np.testing.assert_allclose(fast, table.sum(axis=axes).ravel() if axes else table.ravel())


def test_sampled_rows_write_every_variable() -> None:
    """rows_from_cliques allocates without a fill: every variable's row must be written — the
    cliques' variables by the conditional draws, a variable in no clique uniformly. Repeated
    allocations (freed memory reused) must show no stale or uninitialised code."""
    from tessera.estimation.rows import rows_from_cliques

    sizes = [2, 3, 2, 4, 5]  # variable 4 is in no clique: uniform
    t01 = np.array([[0.1, 0.2, 0.1], [0.3, 0.2, 0.1]])
    t12 = np.array([[0.2, 0.1], [0.3, 0.1], [0.2, 0.1]])
    t3 = np.array([0.4, 0.3, 0.2, 0.1])
    cliques = [((0, 1), t01), ((1, 2), t12 / t12.sum()), ((3,), t3)]
    for seed in range(20):
        rng = np.random.default_rng(seed)  # not-privacy-noise: post-processing draws
        cols = rows_from_cliques(cliques, [-1, 0, -1], sizes, 4_000, rng, "iid", columns=True)
        assert cols.shape == (5, 4_000)
        for v, k in enumerate(sizes):
            assert cols[v].min() >= 0 and cols[v].max() < k, (seed, v)
        counts = np.bincount(cols[4], minlength=5) / 4_000  # uniform: sd ≈ 0.0063
        assert np.all(np.abs(counts - 0.2) < 0.035), counts
        counts = np.bincount(cols[3], minlength=4) / 4_000
        assert np.all(np.abs(counts - t3) < 0.035), counts
