"""Boolean clauses in the overlap solvers and the engine, against brute force over the whole
domain (docs/theory.md §2–§4): γ and γ_w of mixtures of clauses and predicate queries under every
composition and both neighbour relations; the engine's log Z, maximum and expectations."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp

from tessera.engine import GibbsModel, log_partition, maximize
from tessera.engine.model import treewidth_report
from tessera.overlap import max_overlap, maximal_overlapping_sets
from tessera.overlap.result import g, h
from tessera.privacy import Definition, Neighbours
from tessera.schema.domain import Boolean, Categorical, Domain, IntegerRange
from tessera.schema.intervals import IntervalSet
from tessera.workload.clause import And, BooleanClause, Not, Or, clause_or_query
from tessera.workload.families import Partition
from tessera.workload.query import Predicate, Query
from tessera.workload.workload import Workload

COMPS = (Definition.PURE, Definition.GDP, Definition.ZCDP)
BOTH = (Neighbours.ADD_REMOVE, Neighbours.SUBSTITUTE)


# -- random workloads and an independent oracle ---------------------------------------------------


def random_domain(rng: np.random.Generator) -> Domain:
    if rng.random() < 0.4:  # binary, up to 12 attributes
        return Domain(tuple(Boolean(name=f"x{i}") for i in range(int(rng.integers(2, 13)))))
    attrs: list[Any] = []
    for i in range(int(rng.integers(2, 5))):
        kind = int(rng.integers(3))
        missing = bool(rng.random() < 0.4)
        if kind == 0:
            attrs.append(IntegerRange(name=f"n{i}", lo=0, hi=int(rng.integers(1, 5)),
                                      missing=missing))
        elif kind == 1:
            k = int(rng.integers(1, 4))
            attrs.append(Categorical(name=f"c{i}", values=tuple("pqr"[:k]), missing=missing))
        else:
            attrs.append(Boolean(name=f"b{i}", missing=missing))
    return Domain(tuple(attrs))


def random_predicate(rng: np.random.Generator, dom: Domain) -> Predicate:
    """Mostly a proper subset of the codes (sometimes empty or full)."""
    a = dom.attributes[int(rng.integers(len(dom)))]
    codes = np.flatnonzero(rng.random(a.size) < 0.5)
    if a.size > 1 and rng.random() < 0.8 and len(codes) in (0, a.size):
        codes = rng.permutation(a.size)[: int(rng.integers(1, a.size))]
    return Predicate(a.name, IntervalSet.points(codes.tolist()))


def random_formula(rng: np.random.Generator, dom: Domain, depth: int = 3) -> Any:
    if depth == 0 or rng.random() < 0.3:
        return random_predicate(rng, dom)
    form = int(rng.integers(5))
    if form == 0:
        return Not(random_formula(rng, dom, depth - 1))
    kids = tuple(random_formula(rng, dom, depth - 1) for _ in range(int(rng.integers(2, 4))))
    return And(kids) if form < 3 else Or(kids)


def truth(f: Any, dom: Domain, x: tuple[int, ...]) -> bool:
    """The formula itself (NOT included), evaluated directly: independent of the library."""
    if isinstance(f, Predicate):
        return x[dom.index(f.attribute)] in f.coverage
    if isinstance(f, Query):
        return all(truth(p, dom, x) for p in f.predicates)
    if isinstance(f, Not):
        return not truth(f.child, dom, x)
    if isinstance(f, And):
        return all(truth(c, dom, x) for c in f.children)
    return any(truth(c, dom, x) for c in f.children)


def random_mixture(rng: np.random.Generator, dom: Domain, t: int) -> tuple[list[Any], list[Any]]:
    """(queries, formulas): about half Boolean clauses, the rest predicate conjunctions."""
    queries, formulas = [], []
    while len(queries) < t:
        if rng.random() < 0.55:
            for _ in range(10):  # a formula that really is a Boolean clause, most of the time
                f = random_formula(rng, dom)
                q = clause_or_query(dom, f)
                if isinstance(q, BooleanClause):
                    break
        else:
            preds = [random_predicate(rng, dom) for _ in range(int(rng.integers(1, 3)))]
            f = And(tuple(preds))
            q = clause_or_query(dom, f)
        queries.append(q)
        formulas.append(f)
    return queries, formulas


def points(dom: Domain) -> list[tuple[int, ...]]:
    return list(itertools.product(*(range(k) for k in dom.sizes)))


def oracle(dom: Domain, formulas: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    pts = points(dom)
    F = np.array([[truth(f, dom, x) for f in formulas] for x in pts], dtype=bool)
    return np.array(pts, dtype=np.int64), F.reshape(len(pts), len(formulas))


def brute_scores(F: np.ndarray, s: np.ndarray) -> tuple[float, float]:
    """(max_x Σ_{I(x)} s, max_{x,y} Σ_{I(x)ΔI(y)} s) by enumeration."""
    add = float((F @ s).max())
    rows = np.unique(F, axis=0).astype(np.float64)
    own = rows @ s
    sub = float((own[:, None] + own[None, :] - 2.0 * (rows * s) @ rows.T).max())
    return add, max(sub, 0.0)


def check(res: Any, want: float, *, exact_expected: bool) -> None:
    tol = 1e-9 * max(1.0, abs(want))
    assert res.score_bound >= want - tol, (res, want)
    assert res.score_achieved <= want + tol, (res, want)
    if res.exact:
        assert abs(res.score_bound - want) <= tol, (res, want)
    if exact_expected:
        assert res.exact, res
    assert math.isclose(res.bound, g(res.comp, res.score_bound))


def _gamma_case(rng: np.random.Generator) -> None:
    dom = random_domain(rng)
    queries, formulas = random_mixture(rng, dom, int(rng.integers(1, 9)))
    _, F = oracle(dom, formulas)
    for q, col in zip(queries, F.T):  # the parsed form means the formula
        assert q.evaluate(dom, np.array(points(dom))).tolist() == col.tolist()
    style = int(rng.integers(3))  # γ (unit weights), then γ_w with integral and real weights
    w = (np.ones(len(queries)) if style == 0 else
         rng.integers(0, 4, size=len(queries)).astype(float) if style == 1 else
         rng.random(len(queries)) * 3)
    for comp in COMPS:
        s = h(comp, w)
        add, sub = brute_scores(F, s)
        for nb, want in zip(BOTH, (add, sub)):
            res = max_overlap(queries, w, domain=dom, comp=comp, neighbours=nb)
            check(res, want, exact_expected=True)
            # the witness's queries are the oracle's I(x) (I(x) Δ I(y))
            wit = res.witness
            assert wit is not None
            ix = np.array([truth(f, dom, wit.x) for f in formulas], dtype=bool)
            if nb is Neighbours.SUBSTITUTE:
                assert wit.y is not None
                ix ^= np.array([truth(f, dom, wit.y) for f in formulas], dtype=bool)
            assert tuple(np.flatnonzero(ix).tolist()) == wit.queries


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_gamma_of_mixtures_is_exact(seed: int) -> None:
    """γ_w (every comp, both neighbour relations) of clauses mixed with predicate queries equals
    brute force over the whole domain, and ``auto`` proves it exact."""
    _gamma_case(np.random.default_rng(seed))


@pytest.mark.parametrize("seed", range(3))
def test_gamma_of_mixtures_is_exact_seeded(seed: int) -> None:
    rng = np.random.default_rng(9_000 + seed)
    for _ in range(8):
        _gamma_case(rng)


@pytest.mark.parametrize("method", ["engine", "branch-bound", "enumerate", "mini-bucket",
                                    "colouring", "split"])
def test_every_method_takes_clauses(method: str) -> None:
    """Each method answers clause workloads: exact ones exactly (add/remove: the clauses' terms
    are the same objective), bounds valid; substitution always a valid bound."""
    rng = np.random.default_rng(hash(method) % 2**32)
    for _ in range(6):
        dom = random_domain(rng)
        queries, formulas = random_mixture(rng, dom, int(rng.integers(2, 8)))
        _, F = oracle(dom, formulas)
        w = rng.integers(1, 4, size=len(queries)).astype(float)
        add, sub = brute_scores(F, w)
        exact = method in ("engine", "branch-bound", "enumerate", "mini-bucket")
        check(max_overlap(queries, w, domain=dom, method=method), add, exact_expected=exact)
        res = max_overlap(queries, w, domain=dom, method=method, neighbours="substitute")
        check(res, sub, exact_expected=method == "enumerate")


def test_relaxed_clauses_give_valid_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the engine out of reach and clauses too large to expand, every clause becomes a few
    boxes containing it (at worst TRUE: it touches every row): still a proven upper bound, exact
    only when the re-checked witness attains it."""
    import tessera.overlap.clauses as oc
    import tessera.overlap.engine_route as er

    monkeypatch.setattr(er, "ENGINE_MAX_ENTRIES", 0)
    rng = np.random.default_rng(77)
    seen_inexact = False
    for cap in (1, 2, 3):
        monkeypatch.setattr(oc, "CLAUSE_MAX_TERMS", cap)
        monkeypatch.setattr(oc, "CLAUSE_MIN_TERMS", cap)
        for _ in range(8):
            dom = random_domain(rng)
            queries, formulas = random_mixture(rng, dom, int(rng.integers(2, 8)))
            _, F = oracle(dom, formulas)
            w = rng.integers(1, 4, size=len(queries)).astype(float)
            add, sub = brute_scores(F, w)
            for nb, want in zip(BOTH, (add, sub)):
                res = max_overlap(queries, w, domain=dom, neighbours=nb)
                check(res, want, exact_expected=False)
                seen_inexact |= not res.exact
                if any(isinstance(q, BooleanClause) for q in queries):
                    assert any("disjoint predicate terms" in n or "2·S" in n for n in res.notes)
    assert seen_inexact  # the relaxation does lose something somewhere


def test_disjoint_terms_sum_to_the_clause() -> None:
    rng = np.random.default_rng(5)
    n = 0
    while n < 40:
        dom = random_domain(rng)
        f = random_formula(rng, dom, depth=4)
        c = clause_or_query(dom, f)
        if not isinstance(c, BooleanClause):
            continue
        n += 1
        pts = np.array(points(dom))
        want = c.evaluate(dom, pts)
        terms, exact = c.disjoint_terms()
        total = sum((t.evaluate(dom, pts).astype(int) for t in terms), np.zeros(len(pts), int))
        assert exact and (total == want).all()
        loose, exact = c.disjoint_terms(max_terms=1)
        total = sum((t.evaluate(dom, pts).astype(int) for t in loose), np.zeros(len(pts), int))
        assert total.max() <= 1 and (total >= want).all()  # disjoint, and containing c
        if exact:
            assert (total == want).all()


def test_maximal_overlapping_sets_with_clauses() -> None:
    rng = np.random.default_rng(11)
    for _ in range(15):
        dom = random_domain(rng)
        queries, formulas = random_mixture(rng, dom, int(rng.integers(1, 7)))
        _, F = oracle(dom, formulas)
        sets = {frozenset(np.flatnonzero(r).tolist()) for r in np.unique(F, axis=0)}
        want = {a for a in sets if not any(a < b for b in sets)}
        got = maximal_overlapping_sets(queries, domain=dom)
        assert {frozenset(s) for s in got} == want


def test_structured_workload_with_clauses() -> None:
    """A marginal family beside clauses: the partition bound route, then the expanded one."""
    rng = np.random.default_rng(21)
    for _ in range(6):
        dom = random_domain(rng)
        queries, formulas = random_mixture(rng, dom, int(rng.integers(1, 5)))
        fam = Partition.marginal(dom, list(dom.names[:2]), 2.0)
        wl = Workload.of(dom, queries, partitions=[fam])
        expanded = wl.expanded()
        pts = np.array(points(dom))
        F = np.stack([q.evaluate(dom, pts) for q in expanded.queries], axis=1)
        s = np.asarray(expanded.weights, dtype=float)
        add, sub = brute_scores(F, s)
        for nb, want in zip(BOTH, (add, sub)):
            check(max_overlap(wl, neighbours=nb), want, exact_expected=False)


# -- the engine -----------------------------------------------------------------------------------


def _engine_case(rng: np.random.Generator, dense_limit: int) -> None:
    dom = random_domain(rng)
    queries, formulas = random_mixture(rng, dom, int(rng.integers(1, 7)))
    if len(dom) >= 6 and dom.size <= 1 << 10:  # one wide clause, compiled as a chain
        wide = Or(tuple(Predicate(a.name, IntervalSet.points([1])) for a in dom))
        wide = And((wide, Not(And(tuple(Predicate(a.name, IntervalSet.points([0]))
                                         for a in list(dom)[:3])))))
        queries.append(clause_or_query(dom, wide))
        formulas.append(wide)
    pts, F = oracle(dom, formulas)
    theta = rng.normal(size=len(queries)) * 1.5
    sc = F.astype(float) @ theta
    log_z = float(logsumexp(sc))
    model = GibbsModel(dom, queries, theta, dense_limit=dense_limit)
    assert math.isclose(model.log_partition(), log_z, rel_tol=1e-9, abs_tol=1e-9)
    value, x = model.max_assignment()
    assert math.isclose(value, float(sc.max()), rel_tol=1e-9, abs_tol=1e-9)
    assert math.isclose(float(sc[points(dom).index(tuple(int(c) for c in x))]), value,
                        rel_tol=1e-9, abs_tol=1e-9)
    p = np.exp(sc - log_z)
    assert np.allclose(model.expectations(), p @ F, atol=1e-9)
    assert math.isclose(log_partition(dom, queries, theta), log_z, rel_tol=1e-9, abs_tol=1e-9)
    assert math.isclose(maximize(dom, queries, theta)[0], float(sc.max()), rel_tol=1e-9,
                        abs_tol=1e-9)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([1, 64]))
def test_engine_with_clauses_matches_brute_force(seed: int, dense_limit: int) -> None:
    """log Z, max and E[f] of the Gibbs model over clauses and predicate queries, with dense
    factors and with chains (dense_limit=1), equal brute force."""
    _engine_case(np.random.default_rng(seed), dense_limit)


@pytest.mark.parametrize("seed", range(2))
def test_engine_with_clauses_seeded(seed: int) -> None:
    rng = np.random.default_rng(4_000 + seed)
    for dense_limit in (1, 64):
        for _ in range(6):
            _engine_case(rng, dense_limit)


def test_engine_samples_and_treewidth_with_clauses() -> None:
    dom = Domain(tuple(Boolean(name=f"x{i}") for i in range(9)))
    one = IntervalSet.points([1])
    formulas = [Or(tuple(Predicate(f"x{i}", one) for i in range(9))),
                Not(And((Predicate("x0", one), Predicate("x8", one)))),
                And((Predicate("x3", one), Predicate("x4", one)))]
    wide, mixed, cell = (clause_or_query(dom, f) for f in formulas)
    assert isinstance(wide, BooleanClause) and isinstance(mixed, BooleanClause)
    wl = Workload.of(dom, [wide, mixed, cell])
    report = treewidth_report(wl)
    assert report.incidence.width >= 1
    model = GibbsModel.from_workload(wl, [1.0, -0.5, 2.0])
    xs = model.sample(4000, np.random.default_rng(0))
    pts, F = oracle(dom, formulas)
    sc = F.astype(float) @ np.array([1.0, -0.5, 2.0])
    p = np.exp(sc - logsumexp(sc))
    emp = np.stack([q.evaluate(dom, xs) for q in (wide, mixed, cell)], axis=1).mean(axis=0)
    assert np.allclose(emp, p @ F, atol=0.04)
    # the structured-free γ of this workload: a row in all three
    res = max_overlap(wl)
    assert res.exact and res.score_bound == 3.0
