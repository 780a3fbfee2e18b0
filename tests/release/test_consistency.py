"""Least-squares consistency (tessera.release.consistency) against theory and brute force.

* exact answers are a fixed point; hierarchies and overlapping marginals come out consistent;
* the map is a W-orthogonal projection: linear, idempotent, W-self-adjoint;
* Monte Carlo (2,000 Gaussian draws): E‖a* − a‖²_W = dim 𝒮 and E‖â − a‖²_W = t within five
  standard errors; planted bugs (wrong weights, no cross-scope constraints) fail that check;
* brute force over the whole domain: a* is the generalised least-squares projection onto
  {Qx : x ∈ ℝ^𝔻} and dim 𝒮 = rank Q, on chains, cycles and random workloads, through each of
  the solver's paths (dense, sparse LDLᵀ, row Gram matrix, peeling);
* unreleased queries, refusals, input errors, round_nonnegative.
"""

from __future__ import annotations

import itertools
import json
import math
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

import tessera.release.consistency as consistency
from tessera.errors import QueryWarning
from tessera.release.consistency import consistent_answers, round_nonnegative
from tessera.schema.domain import Domain
from tessera.schema.intervals import IntervalSet
from tessera.workload.builders import marginals, random_workload
from tessera.workload.query import Query
from tessera.workload.workload import Workload

#: The random builder names queries by their SQL: a repeated draw is renamed with a
#: QueryWarning, which the tests marked with this do not check.
BUILDER_NAMES = pytest.mark.filterwarnings("ignore::tessera.errors.QueryWarning")

MIXED = Domain.from_dict({"attributes": {
    "age": {"type": "integer", "min": 0, "max": 6},
    "colour": {"type": "categorical", "values": ["r", "g", "b", "y"], "missing": True},
    "size": {"type": "categorical", "values": ["s", "m", "l"], "ordered": True},
    "flag": {"type": "boolean"},
}})


# -- oracles ------------------------------------------------------------------------------------


def full_matrix(workload: Workload) -> np.ndarray:
    """Q over every point of the (small) domain: Q[q, x] = q(x)."""
    domain = workload.domain
    points = np.array(list(itertools.product(*(range(s) for s in domain.sizes))))
    return np.stack([q.evaluate(domain, points) for q in workload.queries]).astype(float)


def gls(q: np.ndarray, v: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The W-orthogonal projection of y onto range Q (W = diag(1/v)), by dense lstsq."""
    root = 1.0 / np.sqrt(v)
    rhs = y * (root if y.ndim == 1 else root[:, None])
    coef, *_ = np.linalg.lstsq(q * root[:, None], rhs, rcond=None)
    return q @ coef


def weighted_error(estimate: np.ndarray, truth: np.ndarray, v: np.ndarray) -> np.ndarray:
    """‖estimate − truth‖²_W per column."""
    diff = estimate - (truth[:, None] if estimate.ndim == 2 else truth)
    return ((diff**2) / (v[:, None] if diff.ndim == 2 else v)).sum(axis=0)


def tree_queries(domain: Domain, name: str, n: int) -> list[Query]:
    """A binary tree of ranges over codes 0..n−1 of ``name``, root first (node i has children
    2i+1 and 2i+2)."""
    queries = []
    width = n
    while width >= 1:
        queries += [Query.conjunction(domain, {name: IntervalSet.range(lo, lo + width)})
                    for lo in range(0, n, width)]
        width //= 2
    return queries


def hierarchy(n: int = 16) -> Workload:
    """The tree over an n-value integer attribute (its root is the total count)."""
    domain = Domain.from_dict({"x": n})
    return Workload.of(domain, tree_queries(domain, "x", n))


def tree_levels(n: int = 16) -> np.ndarray:
    return np.concatenate([np.full(2**k, k) for k in range(int(math.log2(n)) + 1)])


def marginal_union(domain: Domain, scopes: Sequence[Sequence[str]]) -> tuple[Workload, list[int]]:
    """The full marginals on ``scopes``, concatenated; also the scope number of each query."""
    queries: list[Query] = []
    which: list[int] = []
    for k, scope in enumerate(scopes):
        part = marginals(domain, len(scope), list(scope)).queries if scope else (Query(),)
        queries += part
        which += [k] * len(part)
    return Workload.of(domain, queries), which


def free_dimension(domain: Domain, scopes: Sequence[Sequence[str]]) -> int:
    """Σ_{U ∈ down-closure} ∏_{a∈U} (n_a − 1): dim 𝒮 for full marginals (module docs)."""
    closure = {u for s in scopes for k in range(len(s) + 1) for u in itertools.combinations(s, k)}
    return sum(math.prod(domain[a].size - 1 for a in u) for u in closure)


def random_data(workload: Workload, rng: np.random.Generator, n: int = 400) -> np.ndarray:
    q = full_matrix(workload)
    histogram = rng.multinomial(n, rng.dirichlet(np.ones(q.shape[1])))
    return q @ histogram


# -- 1. exact answers are a fixed point; the output is consistent ------------------------------


def _fixed_point_cases() -> list[tuple[str, Workload]]:
    with warnings.catch_warnings():  # at collection, where BUILDER_NAMES cannot reach
        warnings.simplefilter("ignore", QueryWarning)
        cases = [(f"random-{seed}", random_workload(MIXED, 40, seed=seed)) for seed in range(4)]
    wl, _ = marginal_union(MIXED, list(itertools.combinations(MIXED.names, 2)))
    cases.append(("2-way marginals", wl))
    cases.append(("hierarchy", hierarchy(16)))
    return cases


@pytest.mark.parametrize("name, workload", _fixed_point_cases(), ids=lambda x: str(x)[:20])
def test_truth_is_a_fixed_point(name: str, workload: Workload) -> None:
    rng = np.random.default_rng(1)
    truth = random_data(workload, rng)
    v = rng.uniform(0.5, 20.0, len(workload))
    result = consistent_answers(workload, truth, v)
    assert result.applied, result.note
    np.testing.assert_allclose(result.answers, truth, rtol=0, atol=1e-8)
    assert 0 < result.dimension <= result.n_released == len(workload)


def test_hierarchy_output_adds_up() -> None:
    """a* of a noisy tree: every parent is the sum of its two children."""
    workload = hierarchy(16)
    rng = np.random.default_rng(2)
    v = 4.0 ** tree_levels(16)
    noisy = random_data(workload, rng) + rng.normal(size=len(workload)) * np.sqrt(v)
    result = consistent_answers(workload, noisy, v)
    a = result.answers
    children = a[1:].reshape(-1, 2).sum(axis=1)  # nodes 2i+1, 2i+2 are the children of node i
    np.testing.assert_allclose(a[: len(children)], children, rtol=0, atol=1e-8)
    assert not np.allclose(noisy[:15], noisy[1:].reshape(-1, 2).sum(axis=1))
    assert result.dimension == 16 and result.n_released == 31


def test_overlapping_marginals_agree() -> None:
    """a* of noisy marginals AB, BC, AC: the B marginals of AB and BC agree, totals agree."""
    domain = Domain.from_dict({"A": 3, "B": 4, "C": 2})
    scopes = [("A", "B"), ("B", "C"), ("A", "C")]
    workload, which = marginal_union(domain, scopes)
    rng = np.random.default_rng(3)
    v = np.array([1.0, 5.0, 25.0])[which]
    noisy = random_data(workload, rng) + rng.normal(size=len(workload)) * np.sqrt(v)
    a = consistent_answers(workload, noisy, v).answers
    ab, bc, ac = (a[np.asarray(which) == k] for k in range(3))
    ab, bc, ac = ab.reshape(3, 4), bc.reshape(4, 2), ac.reshape(3, 2)
    np.testing.assert_allclose(ab.sum(axis=0), bc.sum(axis=1), atol=1e-8)  # B
    np.testing.assert_allclose(ab.sum(axis=1), ac.sum(axis=1), atol=1e-8)  # A
    np.testing.assert_allclose(bc.sum(axis=0), ac.sum(axis=0), atol=1e-8)  # C


# -- 2. a W-orthogonal projection --------------------------------------------------------------


@BUILDER_NAMES
def test_projection_is_idempotent_linear_and_self_adjoint() -> None:
    workload = random_workload(MIXED, 60, seed=7)
    rng = np.random.default_rng(4)
    v = rng.uniform(0.5, 10.0, len(workload))
    x = rng.normal(size=(len(workload), 3)) * 30
    px = consistent_answers(workload, x, v).answers
    ppx = consistent_answers(workload, px, v).answers
    np.testing.assert_allclose(ppx, px, rtol=0, atol=1e-9)  # P² = P
    assert np.abs(px - x).max() > 1.0  # and P ≠ I here
    combo = consistent_answers(workload, 2 * x[:, 0] - 3 * x[:, 1], v).answers
    np.testing.assert_allclose(combo, 2 * px[:, 0] - 3 * px[:, 1], rtol=0, atol=1e-9)
    w = 1.0 / v  # ⟨Px, y⟩_W = ⟨x, Py⟩_W: orthogonal, not oblique
    assert (px[:, 0] * x[:, 1] * w).sum() == pytest.approx((x[:, 0] * px[:, 1] * w).sum(),
                                                           rel=1e-10)
    single = consistent_answers(workload, x[:, 2], v).answers  # columns are independent
    np.testing.assert_allclose(single, px[:, 2], rtol=0, atol=1e-9)


# -- 3. Monte Carlo: E‖a* − a‖²_W = dim 𝒮 --------------------------------------------------------

TRIALS = 2000


def monte_carlo(
    workload: Workload,
    v: np.ndarray,
    project: Callable[[np.ndarray], np.ndarray],
    dimension: int,
    seed: int,
) -> tuple[bool, dict[str, float]]:
    """Whether the mean weighted error of ``project`` matches ``dimension`` (and the raw one
    matches t) within 5 standard errors, with the statistics."""
    rng = np.random.default_rng(seed)
    truth = random_data(workload, rng, n=1000)
    noisy = truth[:, None] + rng.normal(size=(len(workload), TRIALS)) * np.sqrt(v)[:, None]
    raw = weighted_error(noisy, truth, v)
    projected = weighted_error(project(noisy), truth, v)
    se = projected.std(ddof=1) / math.sqrt(TRIALS)
    se_raw = raw.std(ddof=1) / math.sqrt(TRIALS)
    stats = {"mean": projected.mean(), "se": se, "raw": raw.mean(), "se_raw": se_raw,
             "dimension": dimension, "t": len(workload)}
    ok = (abs(projected.mean() - dimension) <= 5 * se
          and abs(raw.mean() - len(workload)) <= 5 * se_raw)
    return ok, stats


def test_monte_carlo_hierarchy_and_planted_bug() -> None:
    workload = hierarchy(16)
    v = 4.0 ** tree_levels(16)  # variances from 1 (root) to 256 (leaves)
    result = consistent_answers(workload, np.zeros(len(workload)), v)
    assert result.dimension == 16 and result.error_factor == pytest.approx(16 / 31)

    def project(noisy: np.ndarray) -> np.ndarray:
        return consistent_answers(workload, noisy, v).answers

    ok, stats = monte_carlo(workload, v, project, result.dimension, seed=11)
    assert ok, stats
    assert stats["mean"] + 5 * stats["se"] < stats["raw"]  # strictly better than raw
    # ratio of the two means against dim/t, within 5 SE of the ratio (delta method, bounded)
    ratio_se = stats["mean"] / stats["raw"] * (stats["se"] / stats["mean"]
                                               + stats["se_raw"] / stats["raw"])
    assert abs(stats["mean"] / stats["raw"] - 16 / 31) <= 5 * ratio_se

    def wrong_weights(noisy: np.ndarray) -> np.ndarray:  # ordinary least squares
        return consistent_answers(workload, noisy, np.ones(len(workload))).answers

    bad, bad_stats = monte_carlo(workload, v, wrong_weights, result.dimension, seed=11)
    assert not bad, bad_stats  # theory: 33.5 (worse than no projection at all), not 16
    assert bad_stats["mean"] > bad_stats["raw"]


def test_monte_carlo_overlapping_marginals_and_planted_bugs() -> None:
    domain = Domain.from_dict({"A": 3, "B": 4, "C": 2, "D": 3})
    scopes = [("A", "B"), ("B", "C"), ("C", "D"), ("A", "D"), ("A", "C")]
    workload, which = marginal_union(domain, scopes)
    v = np.array([1.0, 4.0, 16.0, 2.0, 8.0])[which]
    result = consistent_answers(workload, np.zeros(len(workload)), v)
    assert result.dimension == free_dimension(domain, scopes) == 26
    assert result.n_cells - result.n_constraints == 26 and result.n_released == 41

    def project(noisy: np.ndarray) -> np.ndarray:
        return consistent_answers(workload, noisy, v).answers

    ok, stats = monte_carlo(workload, v, project, 26, seed=12)
    assert ok, stats
    assert stats["mean"] + 5 * stats["se"] < stats["raw"]

    def wrong_weights(noisy: np.ndarray) -> np.ndarray:
        return consistent_answers(workload, noisy, np.ones(len(workload))).answers

    bad, bad_stats = monte_carlo(workload, v, wrong_weights, 26, seed=12)
    assert not bad, bad_stats  # theory: 34.2

    groups = workload.scopes()

    def per_scope(noisy: np.ndarray) -> np.ndarray:  # drops every cross-scope constraint
        out = np.empty_like(noisy)
        for idx in groups.values():
            part = Workload.of(domain, [workload.queries[i] for i in idx])
            out[idx] = consistent_answers(part, noisy[idx], v[idx]).answers
        return out

    bad, bad_stats = monte_carlo(workload, v, per_scope, 26, seed=12)
    assert not bad, bad_stats


def test_variance_of_each_answer_does_not_grow() -> None:
    """Cov a* = PV ⪯ V: every query's empirical variance ≤ v_q (5 SE), and a* is unbiased."""
    domain = Domain.from_dict({"A": 3, "B": 4, "C": 2})
    workload, which = marginal_union(domain, [("A", "B"), ("B", "C"), ("A",), ()])
    v = np.array([9.0, 1.0, 30.0, 100.0])[which]
    rng = np.random.default_rng(13)
    truth = random_data(workload, rng)
    noisy = truth[:, None] + rng.normal(size=(len(workload), TRIALS)) * np.sqrt(v)[:, None]
    a = consistent_answers(workload, noisy, v).answers
    variance = a.var(axis=1, ddof=1)
    assert (variance <= v * (1 + 5 * math.sqrt(2 / TRIALS))).all()
    bias_se = np.sqrt(variance / TRIALS)
    assert (np.abs(a.mean(axis=1) - truth) <= 5 * bias_se + 1e-9).all()
    assert variance[np.asarray(which) == 3][0] < 0.5 * 100  # the total gains the most


# -- 4. brute force over the whole domain -----------------------------------------------------


def binary(d: int) -> Domain:
    return Domain.from_dict({chr(ord("A") + i): 2 for i in range(d)})


@pytest.mark.parametrize("shape", ["chain", "cycle"])
def test_local_consistency_is_global_consistency(shape: str) -> None:
    """Chain AB, BC and cycle AB, BC, CA of binary marginals: a* = the projection onto
    {Qx : x ∈ ℝ^(2^d)}, so global ≤ local ≤ raw holds (with global = local) draw by draw."""
    domain = binary(3)
    scopes = [("A", "B"), ("B", "C")] + ([("A", "C")] if shape == "cycle" else [])
    workload, which = marginal_union(domain, scopes)
    q = full_matrix(workload)
    rng = np.random.default_rng(5)
    v = rng.uniform(0.5, 4.0, len(scopes))[which]
    truth = random_data(workload, rng)
    noisy = truth[:, None] + rng.normal(size=(len(workload), 50)) * np.sqrt(v)[:, None]
    result = consistent_answers(workload, noisy, v)
    glob = gls(q, v, noisy)
    np.testing.assert_allclose(result.answers, glob, rtol=0, atol=1e-9)
    assert result.dimension == np.linalg.matrix_rank(q) == free_dimension(domain, scopes)
    e_global = weighted_error(glob, truth, v)
    e_local = weighted_error(result.answers, truth, v)
    e_raw = weighted_error(noisy, truth, v)
    assert (e_global <= e_local + 1e-9).all() and (e_local <= e_raw + 1e-9).all()
    assert (e_local < e_raw).mean() > 0.9


@BUILDER_NAMES
@pytest.mark.parametrize("seed", range(6))
def test_random_binary_workloads_match_brute_force(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    d = int(rng.integers(4, 9))
    workload = random_workload(binary(d), int(rng.integers(10, 80)), seed=seed,
                               attributes_per_query=(1, min(4, d)))
    _assert_matches_brute_force(workload, rng)


@BUILDER_NAMES
@pytest.mark.parametrize("seed", range(4))
def test_random_mixed_workloads_match_brute_force(seed: int) -> None:
    """Ranges, sets, a missing code; plus duplicates, a contradiction and the tautology."""
    rng = np.random.default_rng(200 + seed)
    base = random_workload(MIXED, 50, seed=seed, kind="mixed")
    never = Query.conjunction(MIXED, {"age": IntervalSet.empty(),
                                      "flag": IntervalSet.points([1])})
    extra = [base.queries[0], base.queries[3], Query.tautology(), never]
    queries = list(base.queries) + extra  # repeats on purpose: numbered, not named by SQL
    workload = Workload.of(MIXED, queries, [f"q{i}" for i in range(len(queries))])
    _assert_matches_brute_force(workload, rng)


def _assert_matches_brute_force(workload: Workload, rng: np.random.Generator) -> None:
    q = full_matrix(workload)
    v = rng.uniform(0.2, 30.0, len(workload))
    truth = random_data(workload, rng)
    noisy = truth[:, None] + rng.normal(size=(len(workload), 4)) * np.sqrt(v)[:, None]
    result = consistent_answers(workload, noisy, v)
    assert result.applied, result.note
    np.testing.assert_allclose(result.answers, gls(q, v, noisy), rtol=0, atol=1e-8)
    assert result.dimension == np.linalg.matrix_rank(q)
    assert result.n_unknowns <= result.n_cells - result.n_constraints


def _spy(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    calls: list[int] = []
    original = getattr(consistency, name)

    def wrapped(*args: object) -> object:
        calls.append(1)
        return original(*args)

    monkeypatch.setattr(consistency, name, wrapped)
    return calls


def test_sparse_ldl_path_matches_brute_force(monkeypatch: pytest.MonkeyPatch) -> None:
    """> 400 unknowns, a sparse Gram matrix: the sparse LDLᵀ and inertia path."""
    domain = Domain.from_dict({"x": 25, "y": 20})
    queries = [*marginals(domain, 2), *marginals(domain, 1, ["x"]),
               *tree_queries(domain, "x", 16)]  # the tree's leaves repeat x's marginal
    workload = Workload.of(domain, queries, [f"q{i}" for i in range(len(queries))])
    calls = _spy(monkeypatch, "_sparse_rank")
    rng = np.random.default_rng(6)
    _assert_matches_brute_force(workload, rng)
    assert calls


def test_row_gram_path_matches_brute_force(monkeypatch: pytest.MonkeyPatch) -> None:
    """Long set predicates split three ways (q = q' + q''): few rows, many shared unknowns."""
    domain = Domain.from_dict({"A": 10, "B": 10, "C": 10})
    rng = np.random.default_rng(7)
    queries = []
    for _ in range(6):
        a = IntervalSet.points(rng.choice(10, 5, replace=False).tolist())
        b = IntervalSet.points(rng.choice(10, 5, replace=False).tolist())
        cut = int(rng.integers(1, 10))
        queries += [Query.conjunction(domain, {"A": a, "B": b}),
                    Query.conjunction(domain, {"A": a, "B": b, "C": IntervalSet.range(0, cut)}),
                    Query.conjunction(domain, {"A": a, "B": b, "C": IntervalSet.range(cut, 10)})]
    workload = Workload.of(domain, queries)
    calls = _spy(monkeypatch, "_row_projection")
    _assert_matches_brute_force(workload, rng)
    assert calls
    assert consistent_answers(workload, np.zeros(18), np.ones(18)).dimension == 12


def test_peeled_queries_keep_their_answers() -> None:
    """Prefixes: each has a span end no other query has, so 𝒮 = ℝᵗ and a* = â."""
    domain = Domain.from_dict({"x": 12})
    workload = Workload.of(domain, [Query.conjunction(domain, {"x": IntervalSet.range(0, h)})
                                    for h in range(1, 12)])
    noisy = np.random.default_rng(8).normal(size=11)
    result = consistent_answers(workload, noisy, np.full(11, 3.0))
    np.testing.assert_allclose(result.answers, noisy, rtol=1e-15, atol=0)
    assert result.dimension == 11 and result.error_factor == 1.0


# -- released / refused / invalid ----------------------------------------------------------------


def test_unreleased_queries_are_nan_and_left_out() -> None:
    workload = hierarchy(8)
    rng = np.random.default_rng(9)
    v = rng.uniform(1.0, 3.0, len(workload))
    v[[0, 4]] = np.inf  # the root and one node were not released
    noisy = rng.normal(size=len(workload)) * 5 + 50
    result = consistent_answers(workload, noisy, v)
    assert np.isnan(result.answers[[0, 4]]).all() and result.n_released == 13
    kept = np.flatnonzero(np.isfinite(v))
    sub = Workload.of(workload.domain, [workload.queries[i] for i in kept])
    np.testing.assert_allclose(result.answers[kept],
                               consistent_answers(sub, noisy[kept], v[kept]).answers, atol=1e-10)
    nothing = consistent_answers(workload, noisy, np.full(len(workload), np.inf))
    assert nothing.applied and np.isnan(nothing.answers).all() and nothing.dimension == 0


def test_duplicates_are_pooled_and_contradictions_are_zero() -> None:
    domain = Domain.from_dict({"x": 5})
    q = Query.conjunction(domain, {"x": IntervalSet.range(1, 3)})
    never = Query.conjunction(domain, {"x": IntervalSet.empty()})
    workload = Workload.of(domain, [q, q, never], ["q", "q again", "never"])
    result = consistent_answers(workload, np.array([10.0, 16.0, 3.0]), np.array([1.0, 2.0, 9.0]))
    pooled = (10.0 / 1 + 16.0 / 2) / (1 / 1 + 1 / 2)
    np.testing.assert_allclose(result.answers, [pooled, pooled, 0.0])
    assert result.dimension == 1 and result.n_released == 3


def test_counts_of_cells_constraints_and_dimension() -> None:
    """1-way marginals on A (3 values) and B (4): 7 cells, 1 constraint (the totals), dim 6."""
    domain = Domain.from_dict({"A": 3, "B": 4})
    workload, _ = marginal_union(domain, [("A",), ("B",)])
    result = consistent_answers(workload, np.zeros(7), np.ones(7))
    assert (result.n_cells, result.n_constraints, result.dimension) == (7, 1, 6)


@pytest.mark.parametrize("limit, expected", [
    ({"max_cells": 20}, "unknowns (limit 20)"),
    ({"max_scope_cells": 20}, "scope (x, y) alone has"),
    ({"max_nonzeros": 100}, "from scope (x, y)"),
])
def test_refusal_returns_the_input_and_names_the_scope(limit: dict[str, int], expected: str
                                                       ) -> None:
    domain = Domain.from_dict({"x": 6, "y": 5})
    workload = marginals(domain, 2)
    noisy = np.arange(30, dtype=float)
    result = consistent_answers(workload, noisy, np.ones(30), **limit)
    assert not result.applied and expected in result.note
    assert result.note.startswith("consistency not applied")
    np.testing.assert_array_equal(result.answers, noisy)
    assert result.dimension == result.n_released == 30


def test_input_errors() -> None:
    workload = hierarchy(4)
    t = len(workload)
    with pytest.raises(ValueError, match="shape"):
        consistent_answers(workload, np.zeros(t + 1), np.ones(t))
    with pytest.raises(ValueError, match="shape"):
        consistent_answers(workload, np.zeros(t), np.ones(t - 1))
    with pytest.raises(ValueError, match="> 0"):
        consistent_answers(workload, np.zeros(t), np.zeros(t))
    with pytest.raises(ValueError, match="> 0"):
        consistent_answers(workload, np.zeros(t), np.full(t, np.nan))
    bad = np.zeros(t)
    bad[2] = np.nan
    with pytest.raises(ValueError, match="finite"):
        consistent_answers(workload, bad, np.ones(t))
    v = np.ones(t)
    v[2] = np.inf  # a NaN where nothing was released is fine
    assert np.isnan(consistent_answers(workload, bad, v).answers[2])


def test_round_nonnegative() -> None:
    out = round_nonnegative([-3.2, -0.4, 0.4, 2.5, 3.5, 7.6, np.nan])
    np.testing.assert_array_equal(out, [0, 0, 0, 2, 4, 8, np.nan])
    assert out.dtype == np.float64
    # biased: the clipped answers of a zero count average well above zero
    z = np.random.default_rng(10).normal(size=20000) * 3
    assert round_nonnegative(z).mean() > 1.0


# -- the Adult-shaped benchmark ------------------------------------------------------------------


@pytest.mark.slow
def test_adult_all_two_way_marginals(adult_domain_json: Path) -> None:
    domain = Domain.from_dict(json.loads(adult_domain_json.read_text()))
    workload = marginals(domain, 2)
    rng = np.random.default_rng(14)
    rows = np.stack([rng.integers(0, s, 5000) for s in domain.sizes], axis=1)
    truth = np.concatenate([  # the builder lists each marginal's cells in row-major order
        np.bincount(rows[:, i] * domain.sizes[j] + rows[:, j],
                    minlength=domain.sizes[i] * domain.sizes[j])
        for i, j in itertools.combinations(range(len(domain)), 2)]).astype(float)
    some = rng.choice(len(workload), 50, replace=False)
    assert all(workload.queries[k].evaluate(domain, rows).sum() == truth[k] for k in some)
    v = rng.uniform(1.0, 20.0, len(workload))
    start = time.perf_counter()
    result = consistent_answers(workload, truth, v)
    elapsed = time.perf_counter() - start
    scopes = list(itertools.combinations(domain.names, 2))
    assert result.dimension == free_dimension(domain, scopes) == 31741
    assert result.n_cells == len(workload) == 35290
    np.testing.assert_allclose(result.answers, truth, rtol=0, atol=1e-7)
    assert elapsed < 60, elapsed
