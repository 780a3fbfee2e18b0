"""The adaptive method's model view against brute force: the indexed searches that replaced
quadratic scans at d = 1,024 (maximal scopes, the smallest container of a scope, the smallest
clique holding it) return exactly what the scans returned (hypothesis, d ≤ 10); the candidates'
marginals from the clique tree equal the joint's (brute force, d ≤ 8), with a planted bug
caught."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.estimation.maxent import FitResult, ScopeModel
from tessera.schema.domain import Domain
from tessera.synth.candidates import Candidate
from tessera.synth.model_view import (
    ModelView,
    clique_index,
    from_cliques,
    joint_marginals,
    maximal_scopes,
)
from tessera.workload.workload import Workload

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


def _view_and_model(sizes: list[int], scopes: list[Scope], seed: int, exact_work: int
                    ) -> tuple[ModelView, ScopeModel, FitResult, list[Candidate], Domain]:
    """A model over ``scopes`` at a random θ, and a view of every 1-, 2- and 3-way marginal as
    a candidate; ``sample_size`` 1 keeps the whole-domain path off (the tree's or the
    sample's marginals are used)."""
    d = len(sizes)
    dom = Domain.from_dict({f"x{i}": n for i, n in enumerate(sizes)})
    model = ScopeModel(dom, scopes)
    theta = np.random.default_rng(seed).normal(0, 1.5, model.n_parameters)  # not-privacy-noise
    fitted = FitResult(theta, model.marginals(theta), 0.0, 1.0, 0, 0)
    cands = [Candidate(s, math.prod(sizes[a] for a in s), 1.0)
             for k in (1, 2, 3) for s in itertools.combinations(range(d), k)]
    workload = Workload.of(dom, [])
    view = ModelView(dom, cands, workload, 1, np.random.default_rng(seed), exact_work)
    return view, model, fitted, cands, dom


def _joint_marginals(model: ScopeModel, fitted: FitResult, cands: list[Candidate],
                     dom: Domain) -> list[np.ndarray]:
    joint = model.joint(fitted.theta, dom.size)
    assert joint is not None
    out = []
    for c in cands:
        rest = tuple(a for a in range(len(dom)) if a not in c.scope)
        out.append(joint.sum(axis=rest).ravel() if rest else joint.ravel())
    return out


@settings(max_examples=30, deadline=None)
@given(sizes=st.lists(st.integers(2, 3), min_size=3, max_size=8), data=st.data(),
       seed=st.integers(0, 10**6))
def test_candidate_marginals_are_exact(sizes: list[int], data: st.DataObject,
                                       seed: int) -> None:
    """With the work budget open, every candidate's N μ̂_r (a scope, a clique, or the clique
    tree: none sampled) equals N times the joint's marginal (brute force over the domain)."""
    d = len(sizes)
    pairs = list(itertools.combinations(range(d), 2))
    scopes = data.draw(st.lists(st.sampled_from(pairs), min_size=1, max_size=d, unique=True))
    view, model, fitted, cands, dom = _view_and_model(sizes, scopes, seed, 10**12)
    got = view.estimates(model, fitted, range(len(cands)), 50.0)
    for g, want, c in zip(got, _joint_marginals(model, fitted, cands, dom), cands, strict=True):
        np.testing.assert_allclose(g, 50.0 * want, rtol=1e-9, atol=1e-10, err_msg=str(c))


def test_candidate_marginals_planted_bug_and_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison can fail: a tree marginal that skips the division by the separators'
    marginals (every clique its own root) is caught; with no work budget the same candidates
    come from the model's sample (close to, not equal to, the exact ones)."""
    import tessera.synth.model_view as mv

    sizes = [2, 3, 2, 3, 2]
    scopes = [(0, 1), (1, 2), (2, 3), (3, 4)]  # a chain: (0, 4) crosses three separators
    view, model, fitted, cands, dom = _view_and_model(sizes, scopes, 7, 10**12)
    want = _joint_marginals(model, fitted, cands, dom)
    at = cands.index(next(c for c in cands if c.scope == (0, 4)))
    exact = view.estimates(model, fitted, [at], 1.0)[0]
    np.testing.assert_allclose(exact, want[at], rtol=1e-9)
    real = mv.tree_marginal

    def no_separators(cliques, parents, sizes, scope, holder=None):  # type: ignore[no-untyped-def]
        return real(cliques, [-1] * len(parents), sizes, scope, holder)

    monkeypatch.setattr(mv, "tree_marginal", no_separators)
    broken = view.estimates(model, fitted, [at], 1.0)[0]
    assert np.abs(broken - want[at]).sum() > 1e-5  # the exact test's tolerance is 1e-9
    monkeypatch.setattr(mv, "tree_marginal", real)
    sampled_view, *_ = _view_and_model(sizes, scopes, 7, 0)
    sampled_view.sample_size = 20_000
    sampled = sampled_view.estimates(model, fitted, [at], 1.0)[0]
    assert not np.array_equal(sampled, exact)
    assert np.abs(sampled - want[at]).sum() < 0.05  # 20,000 draws: L1 sd ≈ 0.01


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=7), st.data())
def test_joint_marginals_are_the_direct_sums(sizes: list[int], data: st.DataObject) -> None:
    """The shared partial sums equal one full sum per scope (any shapes, scopes in any
    number, the empty scope and the whole domain included)."""
    d = len(sizes)
    joint = np.random.default_rng(len(sizes)).random(tuple(sizes))
    scopes = data.draw(st.lists(st.lists(st.integers(0, d - 1), unique=True, max_size=d)
                                .map(lambda s: tuple(sorted(s))), max_size=12))
    got = joint_marginals(joint, scopes)
    for s in scopes:
        want = joint.sum(axis=tuple(a for a in range(d) if a not in s))
        assert got[s].shape == want.shape
        np.testing.assert_allclose(got[s], want, rtol=1e-12, atol=1e-12)
