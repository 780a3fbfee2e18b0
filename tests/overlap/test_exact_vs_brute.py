"""Exact solvers equal brute force; every bound is ≥ the exact value; witnesses re-checked."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tessera.overlap import colouring_bound, max_overlap, max_point, split_bound
from tessera.overlap.result import g, h
from tests.oracles.overlap import points_max_score, subsets_max_score

from .cases import random_case

N_CHUNKS = 10
PER_CHUNK = 1000  # 10 × 1000 = 10,000 random workloads


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


@pytest.mark.parametrize("chunk", range(N_CHUNKS))
def test_random_workloads_exact_and_bounds(chunk: int) -> None:
    rng = np.random.default_rng(1000 + chunk)
    for case in range(PER_CHUNK):
        dom, queries, w = random_case(rng)
        comp = ("pure", "gdp", "zcdp")[case % 3]
        s = h(comp, w)
        ref, _ = points_max_score(dom, queries, s)
        res = max_overlap(queries, w, domain=dom, comp=comp)
        assert res.exact, (dom, queries, w)
        assert _close(res.bound, g(comp, ref)), (res, ref, queries, w)
        assert res.bound >= g(comp, ref) - 1e-12
        # witness: evaluate every query on x; its score is the maximum
        x = res.witness.x
        assert all(0 <= c < k for c, k in zip(x, dom.sizes))
        hit = [i for i, q in enumerate(queries) if q(dom, x)]
        assert tuple(hit) == res.witness.queries
        assert _close(math.fsum(s[hit]), ref)
        # anytime with no time at all still returns a valid upper bound
        stopped = max_point(dom, queries, s, time_limit=0.0)
        assert stopped.upper >= ref - 1e-12 and stopped.lower <= ref + 1e-12
        # every bound is ≥ the exact value
        assert colouring_bound(dom, queries, s)[0] >= ref - 1e-12
        assert split_bound(dom, queries, s, iterations=15) >= ref * (1 - 1e-12)


def test_subset_enumeration_agrees_with_points() -> None:
    rng = np.random.default_rng(7)
    for _ in range(400):
        dom, queries, w = random_case(rng, max_queries=7)
        a, best_set = subsets_max_score(dom, queries, w)
        b, _ = points_max_score(dom, queries, w)
        assert _close(a, b)
        assert _close(math.fsum(w[list(best_set)]), a)


def test_set_predicates_pairwise_not_joint() -> None:
    """A = {a,b,c}; {a,b}, {b,c}, {a,c}: every pair overlaps, the triple does not (docs/theory.md
    §2)."""
    from tessera.schema.domain import Domain
    from tessera.workload.parse import parse_query

    dom = Domain.from_dict(
        {"attributes": {"c": {"type": "categorical", "values": ["a", "b", "c"]}}})
    qs = [parse_query(t, dom) for t in ("c IN ('a','b')", "c IN ('b','c')", "c IN ('a','c')")]
    res = max_overlap(qs, domain=dom)
    assert res.exact and res.bound == 2.0
    assert subsets_max_score(dom, qs, np.ones(3))[0] == 2.0
    ub, colours = colouring_bound(dom, qs, np.ones(3))
    assert colours == 3 and ub == 3.0  # the graph is a triangle: ω = 3 > γ = 2
    assert len(res.witness.queries) == 2


def test_method_bounds_never_below_exact() -> None:
    rng = np.random.default_rng(11)
    for _ in range(300):
        dom, queries, w = random_case(rng)
        exact = max_overlap(queries, w, domain=dom, comp="gdp")
        for method in ("colouring", "split", "enumerate"):
            other = max_overlap(queries, w, domain=dom, comp="gdp", method=method)
            assert other.bound >= exact.bound - 1e-12
            if other.exact:
                assert _close(other.bound, exact.bound)
