"""Cutting-plane allocation (docs/theory.md §3) against brute force on tiny domains.

The reference enumerates every row x of the domain to get every I(x), then solves the same
convex problem  min c Σ w_q u_q^{−k}  s.t.  Σ_{q∈I(x)} u_q ≤ B ∀x,  0 < u_q ≤ B  with a generic
solver (SLSQP on the normalised objective, several starts, made feasible by rescaling). The
allocation uses the real separation oracle ``overlap_from_workload`` (``tessera.overlap``).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import optimize

from tessera.accounting import Guarantee
from tessera.calibration import (
    allocate,
    overlap_from_sets,
    overlap_from_workload,
    sequential_overlap,
    solve_master,
)
from tessera.errors import TesseraError
from tessera.overlap import max_overlap
from tessera.privacy import Neighbours
from tessera.schema.domain import Domain
from tessera.schema.intervals import IntervalSet
from tessera.workload.query import Query
from tessera.workload.workload import Workload

# (target, k, c, B, u = p² ?): Var_q = c u_q^{−k}
REGIMES = [
    (Guarantee.pure(1.0), 2, 2.0, 1.0, False),
    (Guarantee.gdp(0.7), 1, 1.0, 0.49, True),
    (Guarantee.zcdp(0.3), 1, 0.5, 0.3, False),
]


def random_workload(rng: np.random.Generator, max_queries: int = 8) -> Workload:
    """Up to 8 random conjunctions (ranges, sets, some contradictions) over ≤ 3 attributes of
    size 2–4 (≤ 64 rows)."""
    dom = Domain.from_dict({f"a{i}": int(rng.integers(2, 5)) for i in range(rng.integers(1, 4))})
    queries = []
    for _ in range(int(rng.integers(1, max_queries + 1))):
        cov = {}
        for attr in dom:
            if rng.random() < 0.6:
                k = attr.size
                if rng.random() < 0.5:
                    lo = int(rng.integers(0, k))
                    cov[attr.name] = IntervalSet.range(lo, int(rng.integers(lo, k + 1)))
                else:
                    values = np.flatnonzero(rng.random(k) < 0.5).tolist()  # may be empty
                    cov[attr.name] = IntervalSet.points(values)
        queries.append(Query.conjunction(dom, cov))
    # numbered: random conjunctions may repeat, and named by their SQL two would share a name
    return Workload.of(dom, queries, [f"q{i}" for i in range(len(queries))])


def every_row_set(wl: Workload) -> list[tuple[int, ...]]:
    """{I(x) : x ∈ 𝔻} by enumerating the domain (non-empty sets only)."""
    codes = np.array(list(itertools.product(*[range(s) for s in wl.domain.sizes])))
    hits = np.column_stack([q.evaluate(wl.domain, codes) for q in wl.queries])
    return sorted({tuple(int(i) for i in np.flatnonzero(r)) for r in hits if r.any()})


def enumerated_load(u: np.ndarray, sets: list[tuple[int, ...]]) -> float:
    """max_x Σ_{q∈I(x)} u_q by enumeration (exact summation)."""
    return max([math.fsum(u[list(s)].tolist()) for s in sets] + [0.0])


def brute_optimum(
    w: np.ndarray, k: int, c: float, budget: float, sets: list[tuple[int, ...]]
) -> float:
    """The least c Σ w u^{−k} over all constraints, by SLSQP from several starts; every
    returned point is rescaled to be feasible, so this is ≥ the true optimum."""
    t = w.size
    a = np.vstack([np.zeros((0, t))] + [np.isin(np.arange(t), s)[None, :] for s in sets])
    a = np.vstack([a, np.eye(t)]).astype(float)  # u_q ≤ B: the box of the model
    rng = np.random.default_rng(0)
    best = math.inf
    for start in range(3):
        u0 = w ** (1 / (k + 1)) if start == 0 else rng.uniform(0.2, 1.0, t)
        u0 = 0.9 * u0 * budget / np.max(a @ u0)
        norm = c * np.sum(w * u0 ** (-k))  # SLSQP needs an O(1) objective for 1e-15 accuracy

        def objective(u: np.ndarray, norm: float = norm) -> tuple[float, np.ndarray]:
            return c * np.sum(w * u ** (-k)) / norm, -k * c * w * u ** (-k - 1) / norm

        res = optimize.minimize(
            objective,
            u0,
            jac=True,
            method="SLSQP",
            bounds=[(1e-9 * budget, budget)] * t,
            constraints=[{"type": "ineq", "fun": lambda u: budget - a @ u, "jac": lambda u: -a}],
            options={"ftol": 1e-16, "maxiter": 1000},
        )
        u = res.x * budget / max(float(np.max(a @ res.x)), budget)
        best = min(best, c * float(np.sum(w * u ** (-k))))
    return best


def loads_of(a, squared: bool) -> np.ndarray:  # type: ignore[no-untyped-def]
    p = np.array(a.parameters)
    return p**2 if squared else p


@pytest.mark.parametrize("seed", range(4))
def test_matches_brute_force_and_meets_target_exactly(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    for _ in range(6):
        wl = random_workload(rng)
        t = len(wl.queries)
        sets = every_row_set(wl)
        w = rng.uniform(0.1, 10.0, t)
        for target, k, c, budget, squared in REGIMES:
            a = allocate(t, target, importance=w, overlap=overlap_from_workload(wl))
            u = loads_of(a, squared)
            # the target is met exactly: never above B, and the budget is used
            if sets:
                load = enumerated_load(u, sets)
                assert load <= budget
                assert load >= budget * (1 - 1e-12)
            ref = brute_optimum(w, k, c, budget, sets)
            assert a.error == pytest.approx(a.weighted_error(w), rel=1e-12)
            assert abs(a.error / ref - 1.0) <= 1e-6, (a.method, a.error, ref)
            # the certificate: lower bound ≤ optimum ≤ achieved, and tight
            assert a.lower_bound is not None
            assert a.lower_bound <= ref * (1 + 1e-9)
            assert a.lower_bound <= a.error
            assert a.optimality_gap is not None and a.optimality_gap <= 1e-6
            assert a.converged
            # every cut is a realised overlapping set I(x) (a genuine constraint)
            assert all(any(set(cut) <= set(s) for s in sets) for cut in a.cuts)


def test_explicit_sets_and_oracle_agree() -> None:
    """maximal_sets (all at once into the master) and the oracle (one cut per round) reach
    the same optimum."""
    rng = np.random.default_rng(7)
    for _ in range(8):
        wl = random_workload(rng)
        t = len(wl.queries)
        sets = every_row_set(wl)
        if not sets:
            continue
        w = rng.uniform(0.1, 10.0, t)
        by_oracle = allocate(t, Guarantee.gdp(1.0), importance=w, overlap=overlap_from_workload(wl))
        by_sets = allocate(t, Guarantee.gdp(1.0), importance=w, maximal_sets=sets)
        assert by_sets.error == pytest.approx(by_oracle.error, rel=1e-8)
        assert by_sets.rounds == 1  # all sets known: the first separation proves optimality


def test_homogeneous_weights_reproduce_eps_over_gamma() -> None:
    """On workloads where every query plays the same role the optimum is uniform: ε/γ, μ/√γ."""
    # two one-way marginals over equal-size attributes: every row meets 2 queries
    dom = Domain.from_dict({"a": 3, "b": 3})
    qs = [Query.conjunction(dom, {n: IntervalSet.points([i])}) for n in "ab" for i in range(3)]
    # all 2-way marginals of three binary attributes: every row meets 3 queries
    dom3 = Domain.from_dict({"x": 2, "y": 2, "z": 2})
    qs3 = [
        Query.conjunction(dom3, {p: IntervalSet.points([i]), r: IntervalSet.points([j])})
        for p, r in itertools.combinations("xyz", 2)
        for i in range(2)
        for j in range(2)
    ]
    for wl, gamma in [(Workload.of(dom, qs), 2), (Workload.of(dom3, qs3), 3)]:
        t = len(wl.queries)
        oracle = overlap_from_workload(wl)
        pure = allocate(t, Guarantee.pure(1.0), importance=[3.0] * t, overlap=oracle)
        assert np.allclose(pure.parameters, 1.0 / gamma, rtol=1e-9)
        gdp = allocate(t, Guarantee.gdp(0.5), importance=[1.0] * t, overlap=oracle)
        assert np.allclose(gdp.parameters, 0.5 / math.sqrt(gamma), rtol=1e-9)


def test_equal_weights_on_an_asymmetric_workload_beat_uniform() -> None:
    """One-way marginals of sizes 3 and 4: each row meets one query of each, so with equal
    weights min 3 f(x) + 4 f(y) s.t. x + y ≤ B: y/x = (4/3)^{1/(k+1)} — not uniform (ε/γ is
    only optimal when all queries play the same role)."""
    dom = Domain.from_dict({"a": 3, "b": 4})
    qs = [Query.conjunction(dom, {"a": IntervalSet.points([i])}) for i in range(3)]
    qs += [Query.conjunction(dom, {"b": IntervalSet.points([j])}) for j in range(4)]
    wl = Workload.of(dom, qs)
    for target, k, _, budget, squared in REGIMES:
        a = allocate(7, target, importance=[1.0] * 7, overlap=overlap_from_workload(wl))
        u = loads_of(a, squared)
        x = budget / (1 + (4 / 3) ** (1 / (k + 1)))
        assert np.allclose(u[:3], x, rtol=1e-9)
        assert np.allclose(u[3:], budget - x, rtol=1e-9)
        uniform = allocate(7, target, overlap=overlap_from_workload(wl))
        assert a.error < uniform.weighted_error() * (1 - 1e-3)


def test_weighted_never_worse_than_uniform() -> None:
    rng = np.random.default_rng(11)
    for _ in range(15):
        wl = random_workload(rng)
        t = len(wl.queries)
        w = np.exp(rng.normal(0.0, 1.5, t))
        oracle = overlap_from_workload(wl)
        for target, *_ in REGIMES:
            opt = allocate(t, target, importance=w, overlap=oracle)
            uni = allocate(t, target, overlap=oracle)
            shape = allocate(t, target, importance=w, overlap=oracle, refine=False)
            assert opt.error <= uni.weighted_error(w) * (1 + 1e-9)
            assert opt.error <= shape.weighted_error(w) * (1 + 1e-9)


def test_heavy_query_gets_more_budget() -> None:
    """Ranges [0,3), [1,4), [2,5) on a 5-value attribute (all three meet at 2) and two
    one-way marginals: weight 10 on query 1 raises its parameter. (In the marginals every
    a-query meets every b-query, so the a-queries rise together: only p_1 > p_1(even).)"""
    dom = Domain.from_dict({"a": 5})
    ranges = Workload.of(
        dom, [Query.conjunction(dom, {"a": IntervalSet.range(i, i + 3)}) for i in range(3)]
    )
    dom2 = Domain.from_dict({"a": 3, "b": 3})
    marg = Workload.of(
        dom2,
        [Query.conjunction(dom2, {n: IntervalSet.points([i])}) for n in "ab" for i in range(3)],
    )
    for wl, strict in [(ranges, True), (marg, False)]:
        t = len(wl.queries)
        w = np.ones(t)
        w[1] = 10.0
        for target, *_ in REGIMES:
            even = allocate(t, target, importance=np.ones(t), overlap=overlap_from_workload(wl))
            heavy = allocate(t, target, importance=w, overlap=overlap_from_workload(wl))
            p = np.array(heavy.parameters)
            assert p[1] > even.parameters[1] * 1.05
            if strict:
                assert p[1] > np.max(np.delete(p, 1)) * 1.05
            # its noise is smaller, and the weighted error is below the even split's
            assert heavy.noise_scales[1] < even.noise_scales[1]
            assert heavy.error < even.weighted_error(w)


def test_substitution_model() -> None:
    """Substitution: min(2 L, Σ) ≤ B; the lower bound is for that model, below the error."""
    rng = np.random.default_rng(5)
    for _ in range(8):
        wl = random_workload(rng)
        t = len(wl.queries)
        sets = every_row_set(wl)
        w = rng.uniform(0.1, 10.0, t)
        for target, k, c, budget, squared in REGIMES:
            sub = Guarantee(
                target.definition,
                Neighbours.SUBSTITUTE,
                target.epsilon,
                target.delta,
                target.mu,
                target.rho,
            )
            a = allocate(t, sub, importance=w, overlap=overlap_from_workload(wl))
            u = loads_of(a, squared)
            model = min(2 * enumerated_load(u, sets), math.fsum(u.tolist()))
            assert model <= budget
            # brute force of the model: the better of the halved-budget problem and Σ u ≤ B
            # (Σ u ≤ B has the closed form (Σ (c w)^{1/(k+1)})^{k+1} / B^k)
            seq = math.fsum(((c * w) ** (1 / (k + 1))).tolist()) ** (k + 1) / budget**k
            ref = min(brute_optimum(w, k, c, budget / 2, sets), seq)
            assert a.lower_bound is not None and a.lower_bound <= ref * (1 + 1e-9)
            assert abs(a.error / ref - 1.0) <= 1e-6


def test_early_stop_is_still_private_and_certified() -> None:
    """max_rounds=1: not converged, but the target holds exactly and the bound stays valid."""
    rng = np.random.default_rng(3)
    seen_unconverged = False
    for _ in range(10):
        wl = random_workload(rng)
        t = len(wl.queries)
        sets = every_row_set(wl)
        w = rng.uniform(0.1, 10.0, t)
        a = allocate(
            t, Guarantee.pure(1.0), importance=w, overlap=overlap_from_workload(wl), max_rounds=1
        )
        seen_unconverged |= a.converged is False
        if sets:
            assert enumerated_load(np.array(a.parameters), sets) <= 1.0
        ref = brute_optimum(w, 2, 2.0, 1.0, sets)
        assert a.lower_bound is not None and a.lower_bound <= ref * (1 + 1e-9) <= a.error * 2
        assert a.error >= ref * (1 - 1e-9)
    assert seen_unconverged


def test_oracle_answer_forms() -> None:
    """A separation oracle may return (bound, set) or an OverlapResult (comp="pure",
    add/remove); number-only oracles cannot cut and fall back to shape / uniform."""
    rng = np.random.default_rng(21)
    wl = random_workload(rng, 8)
    while len(every_row_set(wl)) < 3:
        wl = random_workload(rng, 8)
    t = len(wl.queries)
    w = rng.uniform(0.1, 10.0, t)
    ref = allocate(t, Guarantee.pure(1.0), importance=w, overlap=overlap_from_workload(wl))
    as_result = allocate(
        t, Guarantee.pure(1.0), importance=w, overlap=lambda y: max_overlap(wl, y, comp="pure")
    )
    assert as_result.error == pytest.approx(ref.error, rel=1e-9)
    with pytest.raises(TesseraError):
        allocate(
            t, Guarantee.pure(1.0), importance=w, overlap=lambda y: max_overlap(wl, y, comp="gdp")
        )
    with pytest.raises(TesseraError):
        allocate(t, Guarantee.pure(1.0), importance=w, overlap=lambda y: (1.0, [t + 3]))

    number_only = allocate(
        t,
        Guarantee.pure(1.0),
        importance=w,
        overlap=lambda y: max_overlap(wl, y, comp="pure").bound,
    )
    assert number_only.lower_bound is None and number_only.cuts == ()
    assert number_only.error >= ref.error * (1 - 1e-12)
    sets = every_row_set(wl)
    assert enumerated_load(np.array(number_only.parameters), sets) <= 1.0


def test_gamma_oracle_with_importance_is_uniform() -> None:
    """Under y ↦ γ·max y the uniform allocation is optimal; the old shape-only allocation
    (the heaviest query at ε/γ, the rest below) was worse."""
    w = np.array([1.0, 2.0, 8.0, 0.5])
    a = allocate(4, Guarantee.pure(1.0), importance=w, overlap=2)
    assert np.allclose(a.parameters, 0.5, rtol=1e-12)
    old = allocate(4, Guarantee.pure(1.0), importance=w, overlap=2, refine=False)
    assert a.error < old.error
    # sequential: the closed form is optimal and certified
    s = allocate(4, Guarantee.gdp(1.0), importance=w, overlap=sequential_overlap)
    assert s.lower_bound == pytest.approx(s.error, rel=1e-12)


def test_master_problem_large_and_certified() -> None:
    """Thousands of queries, hundreds of cuts: converges with a certified gap."""
    rng = np.random.default_rng(0)
    t, m = 600, 100
    w = rng.uniform(0.01, 1.0, t)
    sets = [
        tuple(sorted(rng.choice(t, int(rng.integers(2, 30)), replace=False).tolist()))
        for _ in range(m)
    ]
    for k in (1, 2):
        sol = solve_master(w, k, sets)
        assert sol.converged and sol.gap <= 1e-9
        a = np.zeros((m, t))
        for i, s in enumerate(sets):
            a[i, list(s)] = 1.0
        assert np.max(a @ sol.v) <= 1.0 + 1e-12 and np.max(sol.v) <= 1.0
        assert sol.lower_bound <= sol.value
        # KKT: every query is at its box or in a tight cut with a positive multiplier
        tight = (a @ sol.v >= 1.0 - 1e-9) & (sol.multipliers > 0)
        limited = (sol.v >= 1.0 - 1e-9) | (a[tight].sum(axis=0) > 0)
        assert limited.all()


def test_large_explicit_family_goes_through_separation() -> None:
    """More than 2000 explicit sets: cuts are generated from them, same optimum as the master
    over all of them."""
    rng = np.random.default_rng(2)
    t = 80
    sets = sorted({tuple(sorted(rng.choice(t, 4, replace=False).tolist())) for _ in range(2600)})
    assert len(sets) > 2000
    w = rng.uniform(0.1, 5.0, t)
    a = allocate(t, Guarantee.gdp(1.0), importance=w, maximal_sets=sets)
    assert a.converged and a.rounds > 1 and len(a.cuts) < len(sets)
    full = solve_master(w / w.max(), 1, sets)
    assert a.error == pytest.approx(w.max() * full.value, rel=1e-8)
    assert overlap_from_sets(t, sets)(np.array(a.parameters) ** 2) <= 1.0
