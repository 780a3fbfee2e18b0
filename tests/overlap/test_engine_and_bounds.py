"""New solver parts against brute force: the engine route (predicate and Boolean/BDD queries),
colouring bounds inside the branch and bound, first-fit colouring, uniform scales = allocation."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from tessera.calibration import per_query_scales
from tessera.engine import at_least, bdd_manager, conjunction, disjunction, parity
from tessera.errors import QueryError
from tessera.overlap import max_overlap, max_point
from tessera.overlap.colouring import first_fit
from tessera.overlap.engine_route import ENGINE_MAX_ENTRIES, estimate
from tessera.overlap.result import g, h
from tessera.overlap.routes import ENGINE_MIN_QUERIES
from tessera.schema.domain import Domain
from tests.oracles.overlap import is_proper, points_max_score, points_max_substitution

from .cases import random_case, random_query


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def test_engine_method_equals_brute_force() -> None:
    rng = np.random.default_rng(101)
    for case in range(300):
        dom, queries, w = random_case(rng)
        comp = ("pure", "gdp", "zcdp")[case % 3]
        ref, _ = points_max_score(dom, queries, h(comp, w))
        res = max_overlap(queries, w, domain=dom, comp=comp, method="engine")
        assert res.exact and res.method == "engine"
        assert res.bound >= g(comp, ref) * (1 - 1e-12) and _close(res.bound, g(comp, ref))
        assert _close(res.achieved, g(comp, ref))


def test_auto_routes_low_width_workloads_to_the_engine() -> None:
    rng = np.random.default_rng(5)
    dom = Domain.from_dict({"a": 9, "b": 7, "c": 5, "d": 3})
    t = ENGINE_MIN_QUERIES + 50
    # a path a - b - c - d of pairs: attribute-graph width 1
    queries = []
    for i in range(t):
        pair = ("a", "b", "c", "d")[i % 3 : i % 3 + 2]
        sub = Domain.from_dict({n: dom[n].size for n in pair})
        q = random_query(rng, sub, "mixed", p_constrain=0.9)
        from tessera.workload.query import Query

        queries.append(Query.conjunction(dom, {p.attribute: p.coverage for p in q.predicates}))
    w = rng.random(t)
    plan = estimate(dom, queries)
    assert plan.width <= 1 and plan.largest_entries <= ENGINE_MAX_ENTRIES
    res = max_overlap(queries, w, domain=dom)
    assert res.method == "engine" and res.exact
    ref, _ = points_max_score(dom, queries, w)
    assert _close(res.bound, ref) and res.bound >= ref
    bb = max_overlap(queries, w, domain=dom, method="branch-bound")
    assert _close(bb.bound, ref)


@pytest.mark.filterwarnings("ignore::tessera.errors.QueryWarning")  # generated names repeat
def test_dense_workload_is_not_sent_to_the_engine(adult_domain_json: Path) -> None:
    from tessera.workload.builders import random_workload

    dom = Domain.load(adult_domain_json)
    wl = random_workload(dom, 2000, attributes_per_query=(1, 4), seed=1)
    assert not estimate(dom, wl.queries).feasible


def _boolean_workload(rng: np.random.Generator, d: int, t: int):  # type: ignore[no-untyped-def]
    names = [f"x{i}" for i in range(d)]
    dom = Domain.from_dict({n: 2 for n in names})
    mgr = bdd_manager(names)
    out = []
    for _ in range(t):
        k = int(rng.integers(1, min(d, 4) + 1))
        chosen = [names[i] for i in rng.choice(d, size=k, replace=False)]
        kind = int(rng.integers(4))
        lits = {n: int(rng.integers(2)) for n in chosen}
        if kind == 0:
            out.append(disjunction(mgr, lits))
        elif kind == 1:
            out.append(conjunction(mgr, lits))
        elif kind == 2:
            out.append(parity(mgr, lits))
        else:
            out.append(at_least(mgr, lits, int(rng.integers(1, k + 1))))
    return dom, out


def test_boolean_queries_go_to_the_engine_and_match_brute_force() -> None:
    rng = np.random.default_rng(202)
    for case in range(120):
        d = int(rng.integers(1, 8))
        dom, queries = _boolean_workload(rng, d, int(rng.integers(1, 10)))
        t = len(queries)
        w = rng.integers(0, 4, size=t).astype(float) if case % 2 else rng.random(t)
        ref, _ = points_max_score(dom, queries, w)
        res = max_overlap(queries, w, domain=dom)
        assert res.method == "engine" and res.exact and _close(res.bound, ref), (case, res, ref)
        assert res.bound >= ref * (1 - 1e-12)
        hit = tuple(i for i, q in enumerate(queries) if q(dom, res.witness.x))
        assert hit == res.witness.queries
        sub = max_overlap(queries, w, domain=dom, neighbours="substitute")
        ref_sub, _, _ = points_max_substitution(dom, queries, w)
        assert sub.score_bound >= ref_sub * (1 - 1e-12) - 1e-12
        assert sub.score_achieved <= ref_sub * (1 + 1e-12) + 1e-12
        with pytest.raises(QueryError, match="Boolean"):
            max_overlap(queries, w, domain=dom, method="branch-bound")


def test_branch_and_bound_with_and_without_colouring_agree() -> None:
    rng = np.random.default_rng(303)
    for _ in range(400):
        dom, queries, w = random_case(rng, max_queries=12)
        ref, _ = points_max_score(dom, queries, w)
        for colouring in (True, False):
            sol = max_point(dom, queries, w, colouring=colouring)
            assert sol.exact and _close(sol.lower, ref) and sol.upper >= ref * (1 - 1e-12)
            stopped = max_point(dom, queries, w, colouring=colouring, time_limit=0.0)
            assert stopped.upper >= ref * (1 - 1e-12) and stopped.lower <= ref * (1 + 1e-12)


@pytest.mark.filterwarnings("ignore::tessera.errors.QueryWarning")  # generated names repeat
def test_anytime_bound_on_adult_is_valid_and_tighter_with_colouring(
    adult_domain_json: Path,
) -> None:
    from tessera.workload.builders import random_workload

    dom = Domain.load(adult_domain_json)
    wl = random_workload(dom, 80, attributes_per_query=(1, 4), seed=9)
    exact = max_point(dom, wl.queries, np.ones(80))
    assert exact.exact
    plain = max_point(dom, wl.queries, np.ones(80), colouring=False)
    assert plain.exact and plain.lower == exact.lower
    assert exact.nodes <= plain.nodes  # colour classes prune at least as much
    for limit in (0.0, 1e-3, 1e-2):
        quick = max_point(dom, wl.queries, np.ones(80), time_limit=limit)
        assert quick.lower <= exact.lower <= quick.upper


def test_first_fit_equals_vertex_by_vertex_greedy() -> None:
    rng = np.random.default_rng(404)
    for _ in range(300):
        n = int(rng.integers(1, 40))
        a = np.triu(rng.random((n, n)) < rng.random(), 1)
        a = a | a.T
        order = rng.permutation(n)
        colour = np.empty(n, dtype=np.int64)
        colour[order] = first_fit(a, order)
        ref = np.full(n, -1)
        for v in order:
            used = set(ref[a[v]].tolist())
            ref[v] = next(c for c in range(n + 1) if c not in used)
        assert (colour == ref).all() and is_proper(a, colour)
        # a subset of the vertices, coloured in place in the big graph
        sub = order[: n // 2]
        part = first_fit(a, sub)
        assert is_proper(a[np.ix_(sub, sub)], part)


@pytest.mark.parametrize("comp", ["pure", "gdp"])
def test_uniform_scales_come_from_the_allocation_module(comp: str) -> None:
    from tessera.accounting.guarantee import Guarantee
    from tessera.calibration import allocate

    rng = np.random.default_rng(505)
    dom = Domain.from_dict({"a": 6, "b": 4})
    queries = [random_query(rng, dom, "mixed", 0.9) for _ in range(10)]
    for c in (1.0, 0.3, 2.5):
        w = np.full(10, c)
        res = max_overlap(queries, w, domain=dom, comp=comp)
        gamma = points_max_score(dom, queries, np.ones(10))[0]
        scales = per_query_scales(res, w, 0.7)
        target = Guarantee.pure(0.7) if comp == "pure" else Guarantee.gdp(0.7)
        ref = allocate(10, target, overlap=gamma).noise_scales
        assert np.allclose(scales, ref, rtol=1e-9)
        closed = gamma / 0.7 if comp == "pure" else math.sqrt(gamma) / 0.7
        assert np.allclose(scales, closed, rtol=1e-9)
        # each row's queries compose to at most the budget
        p = 1.0 / scales
        worst = points_max_score(dom, queries, p if comp == "pure" else p**2)[0]
        assert worst <= (0.7 if comp == "pure" else 0.49) * (1 + 1e-9)
