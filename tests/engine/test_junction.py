"""The compiled junction tree (docs/theory.md §4.7) against brute-force enumeration and against the
engine's variable elimination (GibbsModel)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp

from tessera.engine import GibbsModel, JunctionTree, junction_tree
from tessera.engine.families import random_tree, tree_marginals
from tessera.errors import QueryError, ResourceError

SETTINGS = settings(max_examples=300, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
TOL = 1e-9


def brute(sizes: list[int], scopes: list[tuple[int, ...]],
          tables: list[np.ndarray]) -> tuple[float, list[np.ndarray]]:
    """log Z and every scope's marginal by enumerating all Π sizes points."""
    grid = np.indices(sizes).reshape(len(sizes), -1)
    score = np.zeros(grid.shape[1])
    for sc, t in zip(scopes, tables, strict=True):
        score += t[tuple(grid[v] for v in sc)] if sc else float(t)
    log_z = float(logsumexp(score))
    prob = np.exp(score - log_z) if math.isfinite(log_z) else np.zeros_like(score)
    margs = []
    for sc, t in zip(scopes, tables, strict=True):
        m = np.zeros(t.shape)
        if sc:
            np.add.at(m, tuple(grid[v] for v in sc), prob)
        else:
            m = np.array(prob.sum())
        margs.append(m)
    return log_z, margs


def variables_and_scopes(draw: st.DrawFn, least_size: int, scopes_drawn: tuple[int, int]
                         ) -> tuple[list[int], list[tuple[int, ...]]]:
    """d ≤ 12 variables of ``least_size``–4 values (≤ 4096 points: the largest shrunk until
    then) and ``scopes_drawn`` (least, most) scopes of ≤ 4 variables each (some empty)."""
    d = draw(st.integers(1, 12))
    sizes = [draw(st.integers(least_size, 4)) for _ in range(d)]
    while math.prod(sizes) > 4096:
        sizes[sizes.index(max(sizes))] -= 1
    n = draw(st.integers(*scopes_drawn))
    scopes = [tuple(draw(st.permutations(range(d)))[: draw(st.integers(0, min(d, 4)))])
              for _ in range(n)]
    return sizes, scopes


@st.composite
def instances(draw: st.DrawFn) -> tuple[list[int], list[tuple[int, ...]], list[np.ndarray]]:
    """d ≤ 12 variables (≤ 4096 points), up to 10 scopes of ≤ 4 variables, tables with
    N(0, 2) entries and some −∞."""
    sizes, scopes = variables_and_scopes(draw, 1, (0, 10))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)  # not-privacy-noise
    tables = []
    for sc in scopes:
        t = rng.normal(0, 2, size=tuple(sizes[v] for v in sc))
        if t.size > 1 and rng.random() < 0.3:
            t.flat[rng.integers(t.size)] = -np.inf
        tables.append(t)
    return sizes, scopes, tables


@SETTINGS
@given(instances())
def test_against_brute_force(inst: tuple[list[int], list[tuple[int, ...]], list[np.ndarray]]
                             ) -> None:
    sizes, scopes, tables = inst
    jt = junction_tree(sizes, scopes)
    log_z, margs = brute(sizes, scopes, tables)
    assert jt.log_partition(tables) == pytest.approx(log_z, abs=TOL) if math.isfinite(log_z) \
        else jt.log_partition(tables) == -math.inf
    if not math.isfinite(log_z):
        with pytest.raises(QueryError):
            jt.marginals(tables)
        return
    lz, flat = jt.infer(tables)
    assert lz == pytest.approx(log_z, abs=TOL)
    for s, (want, got) in enumerate(zip(margs, jt.marginals(tables), strict=True)):
        assert got.shape == jt.shapes[s]
        np.testing.assert_allclose(got, want, rtol=0, atol=TOL)
    # the flat vector in and out gives the same
    np.testing.assert_allclose(jt.infer(jt.flatten(tables))[1], flat, rtol=0, atol=0)
    # clique marginals are consistent with the brute force too
    grid = np.indices(sizes).reshape(len(sizes), -1)
    score = np.zeros(grid.shape[1])
    for sc, t in zip(scopes, tables, strict=True):
        score += t[tuple(grid[v] for v in sc)] if sc else float(t)
    prob = np.exp(score - log_z)
    for clique, p in jt.clique_marginals(tables):
        want = np.zeros(p.shape)
        np.add.at(want, tuple(grid[v] for v in clique), prob)
        np.testing.assert_allclose(p, want, rtol=0, atol=TOL)


def test_brute_force_oracle_can_fail() -> None:
    """The comparison above is sharp: a perturbed table changes log Z and the marginals."""
    sizes, scopes = [2, 3, 2], [(0, 1), (1, 2)]
    rng = np.random.default_rng(0)  # not-privacy-noise
    tables = [rng.normal(size=(2, 3)), rng.normal(size=(3, 2))]
    jt = junction_tree(sizes, scopes)
    bumped = [tables[0], tables[1] + np.array([[1e-6, 0.0], [0.0, 0.0], [0.0, 0.0]])]
    log_z, margs = brute(sizes, scopes, bumped)
    assert abs(jt.log_partition(tables) - log_z) > 10 * TOL
    assert np.abs(jt.marginals(tables)[1] - margs[1]).max() > 10 * TOL


def test_against_gibbs_model_on_a_tree_mrf() -> None:
    """The same tree-MRF (docs/theory.md §8) as the engine's variable elimination."""
    d = 40
    edges = random_tree(d, 3)
    fam = tree_marginals(d, edges=edges)
    theta = np.random.default_rng(3).normal(0, 1, size=len(fam.queries))  # not-privacy-noise
    model = GibbsModel(fam.domain, fam.queries, theta)
    scopes = [(i,) for i in range(d)] + [tuple(e) for e in edges]
    tables = [np.array([0.0, theta[i]]) for i in range(d)]
    tables += [theta[d + 4 * e: d + 4 * e + 4].reshape(2, 2) for e in range(len(edges))]
    jt = junction_tree([2] * d, scopes)
    assert jt.width == 1
    assert jt.log_partition(tables) == pytest.approx(model.log_partition(), abs=1e-9)
    margs = jt.marginals(tables)
    expect = np.array([m[1] for m in margs[:d]] + [x for m in margs[d:] for x in m.ravel()])
    np.testing.assert_allclose(expect, model.expectations(), rtol=0, atol=1e-12)


def test_repeated_calls_share_the_structure() -> None:
    """New log-potentials on the same compiled tree: each answer is that of a fresh compile."""
    sizes, scopes = [3, 2, 4, 2], [(0, 1), (1, 2), (2, 3), (3, 0), (2,)]
    jt = junction_tree(sizes, scopes)
    rng = np.random.default_rng(1)  # not-privacy-noise
    for _ in range(5):
        tables = [rng.normal(0, 3, size=sh) for sh in jt.shapes]
        log_z, margs = brute(sizes, scopes, tables)
        assert jt.log_partition(tables) == pytest.approx(log_z, abs=TOL)
        for want, got in zip(margs, jt.marginals(tables), strict=True):
            np.testing.assert_allclose(got, want, rtol=0, atol=TOL)


def test_free_variables_empty_scopes_and_extreme_values() -> None:
    """A variable in no scope multiplies Z by its size; an empty scope adds a constant; huge
    log-potentials neither overflow nor underflow the messages."""
    jt = junction_tree([2, 5, 3], [(), (2, 0)])
    t = np.array([[1000.0, -1000.0, 0.0], [500.0, 999.0, -np.inf]])
    log_z, margs = brute([2, 5, 3], [(), (2, 0)], [np.array(0.7), t.T])
    assert jt.log_partition([np.array(0.7), t.T]) == pytest.approx(log_z, rel=1e-15)
    got = jt.marginals([np.array(0.7), t.T])
    assert float(got[0]) == pytest.approx(1.0)
    np.testing.assert_allclose(got[1], margs[1], rtol=0, atol=TOL)
    assert isinstance(jt, JunctionTree) and jt.log_free == pytest.approx(math.log(5))


def test_bad_input_is_a_clear_error() -> None:
    with pytest.raises(QueryError, match="repeats"):
        junction_tree([2, 2], [(0, 0)])
    with pytest.raises(QueryError, match="variable 2"):
        junction_tree([2, 2], [(0, 2)])
    with pytest.raises(QueryError, match="≥ 1"):
        junction_tree([0, 2], [(0, 1)])
    jt = junction_tree([2, 3], [(0, 1)])
    with pytest.raises(QueryError, match="shape"):
        jt.marginals([np.zeros((3, 2))])
    with pytest.raises(QueryError, match="2 log-potential tables for 1 scopes"):
        jt.marginals([np.zeros((2, 3)), np.zeros((2, 3))])
    with pytest.raises(QueryError, match="NaN"):
        jt.marginals([np.full((2, 3), np.nan)])
    with pytest.raises(QueryError, match="probability 0"):
        jt.marginals([np.full((2, 3), -np.inf)])
    with pytest.raises(ResourceError):
        junction_tree([64] * 6, [tuple(range(6))], memory_limit=1 << 20)


def test_gibbs_model_expectations_match_the_variable_elimination_path() -> None:
    """GibbsModel's expectations and log Z (now from the junction tree over its compiled
    groups) equal the bucket program's up-and-down pass (chains, hard factors, multiplicities)."""
    from tessera.engine import bdd_manager, disjunction, parity
    from tessera.engine.semiring import LOG_SUM_PRODUCT
    from tessera.schema.domain import Domain
    from tessera.schema.intervals import IntervalSet
    from tessera.workload.query import Query

    domain = Domain.from_dict({"a": 5, "b": 2, "c": 2, "d": 2, "e": 3})
    mgr = bdd_manager(["b", "c", "d"])
    queries = [
        Query.conjunction(domain, {"a": IntervalSet.points([1, 3]), "e": IntervalSet.points([0])}),
        Query.conjunction(domain, {"a": IntervalSet.points([0, 1, 2])}),
        disjunction(mgr, ["b", "c", "d"]),
        parity(mgr, {"b": 1, "d": 0}),
    ]
    constraints = [disjunction(mgr, {"c": 1, "d": 1})]
    rng = np.random.default_rng(5)  # not-privacy-noise
    model = GibbsModel(domain, queries, rng.normal(0, 2, size=len(queries)),
                       constraints=constraints)
    s = model.structure
    theta = np.zeros(s.compiled.n_functions)
    theta[: len(queries)] = model.theta
    fwd = s.program.forward([g.log_table(theta, True) for g in s.compiled.groups],
                            LOG_SUM_PRODUCT)
    beliefs = s.program.beliefs(fwd)
    want = np.zeros(len(queries))
    for g, group in enumerate(s.compiled.groups):
        if len(group.functions):
            want[group.functions] = group.expectations(s.program.factor_marginal(beliefs, g)
                                                       .ravel())
    np.testing.assert_allclose(model.expectations(), want, rtol=0, atol=1e-12)
    assert model.log_partition() == pytest.approx(fwd.total, abs=1e-12)  # no empty scope
    assert s.junction.width == model.width


def test_a_given_elimination_order() -> None:
    sizes, scopes = [2, 3, 2, 2], [(0, 1), (1, 2), (2, 3)]
    rng = np.random.default_rng(2)  # not-privacy-noise
    tables = [rng.normal(size=(2, 3)), rng.normal(size=(3, 2)), rng.normal(size=(2, 2))]
    log_z, margs = brute(sizes, scopes, tables)
    for order in ([3, 2, 1, 0], [1, 0, 2, 3], [0, 3, 1, 2]):
        jt = junction_tree(sizes, scopes, order=order)
        assert jt.log_partition(tables) == pytest.approx(log_z, abs=TOL)
        for want, got in zip(margs, jt.marginals(tables), strict=True):
            np.testing.assert_allclose(got, want, rtol=0, atol=TOL)
    with pytest.raises(QueryError, match="elimination order"):
        junction_tree(sizes, scopes, order=[0, 1, 2])


def test_flat_marginals_are_the_gradient_of_log_z() -> None:
    """∂ log Z / ∂φ_s(x_s) = P(x_s): central differences agree to O(h²)."""
    sizes, scopes = [2, 3, 2], [(0, 1), (1, 2), (2,)]
    jt = junction_tree(sizes, scopes)
    rng = np.random.default_rng(4)  # not-privacy-noise
    flat = rng.normal(size=jt.n_entries)
    _, grad = jt.infer(flat)
    h = 1e-5
    for i in range(jt.n_entries):
        e = np.zeros(jt.n_entries)
        e[i] = h
        fd = (jt.log_partition(flat + e) - jt.log_partition(flat - e)) / (2 * h)
        assert fd == pytest.approx(grad[i], abs=1e-8)
