"""The ToulBar2 route (tessera.overlap.wcsp) equals brute force; its costs round up exactly."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.errors import QueryError
from tessera.overlap import max_overlap, routes, wcsp
from tessera.overlap import solve as solve_mod
from tessera.overlap.result import h
from tests.oracles.overlap import points_max_score, points_max_substitution

from .cases import random_domain, random_query, random_weights

pytest.importorskip("pytoulbar2")


def _in_process(model, seconds, wait):  # type: ignore[no-untyped-def]
    """The solver without the child process: fast enough for hundreds of cases."""
    return wcsp.solve_model(model, seconds)


def _case(rng: np.random.Generator):  # type: ignore[no-untyped-def]
    dom = random_domain(rng, max_attrs=5, max_size=5)
    queries = [random_query(rng, dom, ("range", "set", "mixed")[int(rng.integers(3))], 0.5)
               for _ in range(int(rng.integers(0, 16)))]
    return dom, queries, random_weights(rng, len(queries))


@pytest.mark.parametrize("chunk", range(3))
def test_toulbar2_equals_brute_force(chunk: int) -> None:
    rng = np.random.default_rng(900 + chunk)
    for case in range(120):
        dom, queries, w = _case(rng)
        s = h(("pure", "gdp", "zcdp")[case % 3], w)
        ref, ref_x = points_max_score(dom, queries, s)
        # without an incumbent, with a poor one, and with the optimum itself
        for inc in (None, (0.0, (0,) * len(dom)), (ref, ref_x)):
            if inc is not None:
                inc = (float(s[[i for i, q in enumerate(queries) if q(dom, inc[1])]].sum()),
                       inc[1])
            sol = wcsp.wcsp_point(dom, queries, s, incumbent=inc, runner=_in_process)
            assert sol is not None and sol.exact
            assert math.isclose(sol.lower, ref, rel_tol=1e-9, abs_tol=1e-9)
            # the bound is never below the maximum, and only rounding above it
            assert sol.upper >= ref - 1e-12
            assert sol.upper <= ref + 1e-6 * max(1.0, float(s.sum()))
            hit = [i for i, q in enumerate(queries) if q(dom, sol.x)]
            assert math.isclose(math.fsum(s[hit]), sol.lower, rel_tol=1e-9, abs_tol=1e-9)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(min_value=0.0, max_value=1e12, allow_nan=False), min_size=1,
                max_size=20))
def test_integer_costs_round_up_exactly(scores: list[float]) -> None:
    s = np.asarray(scores)
    c, e = wcsp.integer_costs(s)
    assert int(c.sum()) < 2**50
    for cq, sq in zip(c.tolist(), scores):
        assert Fraction(cq) >= Fraction(sq) * Fraction(2) ** e


def test_max_overlap_routes_to_toulbar2_in_a_child_process() -> None:
    """End to end: the real subprocess, through max_overlap's method and auto portfolio."""
    rng = np.random.default_rng(4)
    for _ in range(3):
        dom, queries, w = _case(rng)
        ref, _ = points_max_score(dom, queries, w)
        res = max_overlap(queries, w, domain=dom, method="toulbar2", time_limit=20)
        assert res.exact and math.isclose(res.achieved, ref, rel_tol=1e-9, abs_tol=1e-9)
        assert res.bound >= ref - 1e-12
    dom, queries, w = _case(rng)
    sol = wcsp.wcsp_point(dom, queries, w, time_limit=20)
    assert sol is not None and sol.exact


def test_under_a_second_left_it_declines() -> None:
    rng = np.random.default_rng(5)
    dom, queries, w = _case(rng)
    while not queries:
        dom, queries, w = _case(rng)
    assert wcsp.wcsp_point(dom, queries, w, time_limit=0.5) is None


def test_without_toulbar2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(solve_mod, "wcsp_available", lambda: False)  # the dispatcher's check
    monkeypatch.setattr(routes, "wcsp_available", lambda: False)  # the routes' portfolio
    rng = np.random.default_rng(6)
    dom, queries, w = _case(rng)
    with pytest.raises(QueryError, match="ToulBar2") as err:
        max_overlap(queries, w, domain=dom, method="toulbar2")
    assert "tessera-dp[exact]" in str(err.value.hint)
    ref, _ = points_max_score(dom, queries, w)
    res = max_overlap(queries, w, domain=dom)  # auto carries on with its own search
    assert res.exact and math.isclose(res.achieved, ref, rel_tol=1e-9, abs_tol=1e-9)


def test_a_failing_child_is_ignored_not_trusted() -> None:
    """A runner that fails, or reports a bound contradicting the verified incumbent, gives None:
    the caller keeps its own bounds."""
    rng = np.random.default_rng(7)
    dom, queries, w = _case(rng)
    while not queries:
        dom, queries, w = _case(rng)
    assert wcsp.wcsp_point(dom, queries, w, runner=lambda m, s, t: None) is None
    # a lower bound on the cost above what the incumbent (all-zero row) costs is impossible
    assert wcsp.wcsp_point(dom, queries, w, runner=lambda m, s, t: (None, None, m.top + 5)) is None


def test_when_toulbar2_does_not_answer_the_search_gets_the_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Portfolio fallback: warm-up stopped early, ToulBar2 gives nothing → our search runs again
    with the rest of the limit and its answer (here exact) is what max_overlap returns."""
    rng = np.random.default_rng(8)
    dom, queries, w = _case(rng)
    while len(queries) < 5:
        dom, queries, w = _case(rng)
    real = routes.max_point
    calls: list[float | None] = []

    def stopped_then_real(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(kwargs.get("time_limit"))
        if len(calls) == 1:  # the warm-up "ran out of time" at once
            return real(*args, **{**kwargs, "time_limit": 0.0})
        return real(*args, **kwargs)

    monkeypatch.setattr(routes, "max_point", stopped_then_real)
    monkeypatch.setattr(routes, "wcsp_point", lambda *a, **k: None)
    ref, _ = points_max_score(dom, queries, w)
    res = max_overlap(queries, w, domain=dom, time_limit=10)
    assert len(calls) == 2 and calls[1] is not None and calls[1] > 5
    assert res.exact and math.isclose(res.achieved, ref, rel_tol=1e-9, abs_tol=1e-9)


@pytest.mark.parametrize("chunk", range(2))
def test_toulbar2_substitution_equals_brute_force(chunk: int) -> None:
    """max_{x,y} Σ s_q [q(x) ≠ q(y)], incl. tautologies (never separate), contradictions and
    one-attribute queries (the (x_a, y_a) tables)."""
    rng = np.random.default_rng(950 + chunk)
    for case in range(120):
        dom, queries, w = _case(rng)
        s = h(("pure", "gdp", "zcdp")[case % 3], w)
        ref, rx, ry = points_max_substitution(dom, queries, s)
        for inc in (None, (rx, ry)):
            sol = wcsp.wcsp_substitution(dom, queries, s, incumbent=inc, runner=_in_process)
            assert sol is not None and sol.exact
            assert math.isclose(sol.lower, ref, rel_tol=1e-9, abs_tol=1e-9)
            assert ref - 1e-12 <= sol.upper <= ref + 1e-6 * max(1.0, float(s.sum()))
            differ = [i for i, q in enumerate(queries) if q(dom, sol.x) != q(dom, sol.y)]
            assert math.isclose(math.fsum(s[differ]), sol.lower, rel_tol=1e-9, abs_tol=1e-9)


def test_max_overlap_substitution_through_toulbar2() -> None:
    """End to end (child process): substitution neighbours with method toulbar2 equal brute
    force, where session 1 could only give min(2·S, Σ h(w)) beyond 6,000 overlap patterns."""
    rng = np.random.default_rng(11)
    for _ in range(3):
        dom, queries, w = _case(rng)
        ref, _, _ = points_max_substitution(dom, queries, w)
        res = max_overlap(queries, w, domain=dom, neighbours="substitute", method="toulbar2",
                          time_limit=20)
        assert res.exact and math.isclose(res.achieved, ref, rel_tol=1e-9, abs_tol=1e-9)
        assert ref - 1e-12 <= res.bound <= ref + 1e-6 * max(1.0, float(w.sum()))


def test_review_edge_cases() -> None:
    """Found by the fuzz review: overflowing h(w) is a clear error; subnormal scores are not
    called exact when the rounding margin dwarfs them; substitution declines ToulBar2 on
    attributes with more value classes than MAX_PAIR_CLASSES (|classes|² tables)."""
    from tessera.schema.domain import Domain
    from tessera.schema.intervals import IntervalSet
    from tessera.workload.query import Query

    dom = Domain.from_dict({"a0": 3, "a1": 3})
    qs = [Query.conjunction(dom, {"a0": IntervalSet.points([0, 2]), "a1": IntervalSet.points([1])}),
          Query.conjunction(dom, {"a1": IntervalSet.points([0])})]
    with pytest.raises(QueryError, match="overflows under gdp"):
        max_overlap(qs, [1e200, 1.0], domain=dom, comp="gdp")
    tiny = max_overlap(qs, [1e-323, 5e-324], domain=dom)
    assert tiny.bound >= 1e-323
    # 'exact' must mean tight (session 1 said exact with a bound of 5e-315 here)
    assert not tiny.exact or tiny.bound <= tiny.achieved * (1 + 1e-9)
    big = Domain.from_dict({"a0": 10**6, "a1": 4})
    many = [Query.conjunction(big, {"a0": IntervalSet.range(10 * i, 10 * i + 5)})
            for i in range(wcsp.MAX_PAIR_CLASSES)]
    many.append(Query.conjunction(big, {"a1": IntervalSet.points([2])}))
    assert wcsp.wcsp_substitution(big, many, np.ones(len(many)), runner=_in_process) is None
