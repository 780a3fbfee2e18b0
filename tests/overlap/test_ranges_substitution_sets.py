"""Range fast paths (γ = ω), substitution neighbours, maximal overlapping sets, anytime, scales."""

from __future__ import annotations

import math
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from tessera.calibration import per_query_scales
from tessera.overlap import (
    max_overlap,
    maximal_overlapping_sets,
    overlap_graph,
)
from tessera.overlap.result import OverlapResult, h
from tessera.schema.domain import Domain
from tests.oracles.overlap import (
    points_max_score,
    points_max_substitution,
    points_overlapping_sets,
)

from .cases import random_case, random_query


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def test_range_workloads_gamma_equals_clique_number() -> None:
    rng = np.random.default_rng(21)
    for _ in range(500):
        dom, queries, _ = random_case(rng, max_queries=9, kind="range")
        live = [q for q in queries if not q.is_contradiction()]
        gamma = max_overlap(live, domain=dom).bound
        graph = nx.from_numpy_array(overlap_graph(dom, live).astype(int))
        omega = max((len(c) for c in nx.find_cliques(graph)), default=0)
        assert gamma == omega == points_max_score(dom, live, np.ones(len(live)))[0]


@pytest.mark.parametrize("n_attrs", [1, 2])
def test_sweep_is_exact(n_attrs: int) -> None:
    rng = np.random.default_rng(30 + n_attrs)
    for _ in range(400):
        dom = Domain.from_dict({f"a{i}": int(rng.integers(1, 12)) for i in range(n_attrs)})
        t = int(rng.integers(0, 12))
        queries = [random_query(rng, dom, "range", p_constrain=0.8) for _ in range(t)]
        w = rng.random(t) * 2
        res = max_overlap(queries, w, domain=dom, method="sweep")
        ref, _ = points_max_score(dom, queries, w)
        assert res.exact and _close(res.bound, ref)
        assert _close(math.fsum(w[list(res.witness.queries)]), ref)


def test_substitution_exact_and_bound() -> None:
    rng = np.random.default_rng(41)
    for case in range(1500):
        dom, queries, w = random_case(rng, max_queries=7)
        comp = ("pure", "gdp", "zcdp")[case % 3]
        s = h(comp, w)
        ref, _, _ = points_max_substitution(dom, queries, s)
        exact = max_overlap(queries, w, domain=dom, comp=comp, neighbours="substitute")
        assert exact.exact and _close(exact.score_bound, ref)
        x, y = exact.witness.x, exact.witness.y
        diff = [i for i, q in enumerate(queries) if q(dom, x) != q(dom, y)]
        assert tuple(diff) == exact.witness.queries
        bound = max_overlap(
            queries, w, domain=dom, comp=comp, neighbours="substitute", method="branch-bound"
        )
        assert bound.score_bound >= ref * (1 - 1e-12)
        assert bound.score_achieved <= ref * (1 + 1e-12) + 1e-12


def test_partition_costs_two_under_substitution() -> None:
    dom = Domain.from_dict({"a": 5})
    from tessera.workload.parse import parse_query

    qs = [parse_query(f"a = {v}", dom) for v in range(5)]
    assert max_overlap(qs, domain=dom).bound == 1.0
    sub = max_overlap(qs, domain=dom, neighbours="substitute")
    assert sub.bound == 2.0 and sub.exact


def test_maximal_overlapping_sets() -> None:
    rng = np.random.default_rng(51)
    for _ in range(800):
        dom, queries, _ = random_case(rng)
        got = {frozenset(s) for s in maximal_overlapping_sets(queries, domain=dom)}
        assert got == points_overlapping_sets(dom, queries)


def test_anytime_on_a_hard_workload_returns_a_valid_bound(adult_domain_json: Path) -> None:
    from tessera.workload.builders import random_workload

    dom = Domain.load(adult_domain_json)
    wl = random_workload(dom, 60, attributes_per_query=(1, 4), seed=3)
    exact = max_overlap(wl)
    assert exact.exact
    for limit in (0.0, 1e-4, 1e-2):
        quick = max_overlap(wl, time_limit=limit)
        assert quick.bound >= exact.bound
        assert quick.achieved <= exact.bound
        assert quick.exact == (quick.bound == quick.achieved)


def test_per_query_scales_closed_forms_and_composition() -> None:
    dom = Domain.from_dict({"a": 4, "b": 3})
    rng = np.random.default_rng(61)
    queries = [random_query(rng, dom, "mixed", 0.9) for _ in range(8)]
    ones = np.ones(8)
    for comp, budget in (("pure", 1.0), ("gdp", 0.5), ("zcdp", 0.2)):
        res = max_overlap(queries, domain=dom, comp=comp)
        gamma = points_max_score(dom, queries, ones)[0]
        scales = per_query_scales(res, ones, budget)
        expected = {"pure": gamma / budget, "gdp": math.sqrt(gamma) / budget,
                    "zcdp": math.sqrt(gamma / (2 * budget))}[comp]
        assert np.allclose(scales, expected)
    # weighted: each row's touched set composes to at most the budget
    w = rng.random(8) + 0.1
    res = max_overlap(queries, w, domain=dom, comp="pure")
    eps_q = 1.0 / per_query_scales(res, w, 1.0)
    worst, _ = points_max_score(dom, queries, eps_q)
    assert worst <= 1.0 + 1e-12


def test_result_refuses_bound_below_witness() -> None:
    with pytest.raises(ValueError):
        OverlapResult("pure", "add-remove", 1.0, 2.0, False, "x", None, 3, 3.0)


def test_substitution_ignores_heavy_tautologies() -> None:
    """A tautology never separates two rows; a heavy one used to make the pair enumeration
    cancel (own(x) + own(y) − 2·common) into a crash or a loose 'exact' bound (found by review)."""
    from tessera.overlap import max_overlap
    from tessera.schema.domain import Domain
    from tessera.schema.intervals import IntervalSet
    from tessera.workload.query import Query

    dom = Domain.from_dict({"a0": 3})
    qs = [Query.tautology(), Query.conjunction(dom, {"a0": IntervalSet.points([0])})]
    for big in (1e6, 1e8, 1e12):
        res = max_overlap(qs, [big, 0.3], domain=dom, neighbours="substitute")
        assert res.exact and 0.3 <= res.bound <= 0.3 * (1 + 1e-9)
        assert res.achieved == 0.3
