"""Maximum weighted coverage of at most K records equals brute force (docs/theory.md §3.14).

On small domains (≤ 4 attributes, ≤ 16 points, K ≤ 3) every set of at most K points is
enumerated and its weighted coverage Σ_q s_q [some point in q] computed directly. The exact
search must equal it, its witness must attain it, the greedy must reach (1 − 1/e) of it, and
every upper bound — those of the stopped search and those without enumeration — must be ≥ it.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.overlap.coverage import (
    covered_by,
    dual_bound,
    exact_sum,
    greedy,
    max_coverage,
    maximal_patterns,
)
from tessera.overlap.substitution import realisable_sets
from tessera.schema.domain import Domain
from tessera.workload.parse import parse_query

from .cases import small_workload


def coverage_brute_force(dom: Domain, queries: list, scores: np.ndarray, k: int) -> Fraction:
    """max over every set R of at most k points of Σ_q s_q [R ∩ q ≠ ∅], in rationals."""
    points = list(itertools.product(*(range(s) for s in dom.sizes)))
    inc = np.array([[q(dom, x) for q in queries] for x in points], dtype=bool)
    inc = inc.reshape(len(points), len(queries))
    best = Fraction(0)
    for size in range(1, k + 1):
        for r in itertools.combinations(range(len(points)), min(size, len(points))):
            best = max(best, exact_sum(scores, inc[list(r)].any(axis=0)))
    return best


@st.composite
def cases(draw: st.DrawFn) -> tuple[Domain, list, np.ndarray]:
    dom, sizes, queries = small_workload(draw, 7)
    m = len(sizes)
    if draw(st.booleans()):
        queries.append(parse_query("TRUE", dom))
    if m >= 2 and draw(st.booleans()):  # a Boolean clause (OR across attributes)
        queries.append(parse_query(f"a0 = 0 OR a{m - 1} = {sizes[-1] - 1}", dom))
    integral = draw(st.booleans())
    scores = np.array([draw(st.integers(0, 3)) if integral
                       else draw(st.floats(0, 3, allow_subnormal=False)) for _ in queries],
                      dtype=np.float64)
    return dom, queries, scores


@settings(max_examples=150, deadline=None, derandomize=True)
@given(case=cases(), k=st.integers(1, 3))
def test_exact_coverage_equals_brute_force(case: tuple, k: int) -> None:
    dom, queries, s = case
    want = coverage_brute_force(dom, queries, s, k)
    got = max_coverage(dom, queries, s, k)
    assert got.exact and got.value == want == got.achieved
    # the witness: at most K records, and they cover what is claimed
    assert len(got.witness) <= k
    cov = covered_by(dom, queries, got.witness)
    assert tuple(np.flatnonzero(cov)) == got.covered
    assert exact_sum(s, cov) == want
    # every proven upper bound is one
    for name, b in got.bounds:
        assert b >= want, name


@settings(max_examples=150, deadline=None, derandomize=True)
@given(case=cases(), k=st.integers(1, 3))
def test_stopped_search_and_bounds_without_enumeration_are_upper_bounds(case: tuple,
                                                                        k: int) -> None:
    dom, queries, s = case
    want = coverage_brute_force(dom, queries, s, k)
    row = max_coverage(dom, queries, s, 1)  # S = C_1 (exact)
    # the branch and bound stopped at once: the open node's bound, the LP dual, K largest sets
    stopped = max_coverage(dom, queries, s, k, max_work=0, row_bound=row.bound)
    assert stopped.value >= want >= stopped.achieved
    assert all(b >= want for _, b in stopped.bounds)
    assert stopped.value <= min(k * row.value, max(b for n, b in stopped.bounds if "Σ" in n))
    # no enumeration (one state allowed): Σ s, K·S, colouring; the greedy witness by points
    def point(left: np.ndarray) -> tuple[tuple[int, ...] | None, float]:
        r = max_coverage(dom, queries, left, 1)
        return (r.witness[0] if r.witness else None), r.bound
    bounded = max_coverage(dom, queries, s, k, max_states=0, point=point)
    assert bounded.exact or "overlap patterns" in bounded.notes[0]
    assert bounded.value >= want >= bounded.achieved
    assert all(b >= want for _, b in bounded.bounds)
    # the greedy is a (1 − 1/e) approximation
    assert float(bounded.achieved) >= (1 - 1 / math.e) * float(want) - 1e-9


@settings(max_examples=100, deadline=None, derandomize=True)
@given(case=cases(), k=st.integers(1, 3), data=st.data())
def test_dual_bound_holds_for_every_pi(case: tuple, k: int, data: st.DataObject) -> None:
    """C_K ≤ Σ (s − π) + K·max_x π(I(x)) for any 0 ≤ π ≤ s, not only the LP's."""
    dom, queries, s = case
    want = coverage_brute_force(dom, queries, s, k)
    frac = np.array([data.draw(st.floats(0, 1)) for _ in queries])
    pi = np.minimum(s * frac, s)
    inc, _ = maximal_patterns(dom, queries)
    assert dual_bound(inc, s, pi, k) >= want


def test_greedy_is_not_exact_but_the_search_is() -> None:
    """The classic instance where the largest set first loses: rows a=0, 1, 2 meet
    A = {q1..q4}, B = {q1, q2, q5}, C = {q3, q4, q6}; with K = 2 the greedy takes A then B (5),
    the optimum B and C (6). A search whose node bound is not the sum of the r largest gains
    (a planted bug: the largest gain only) prunes the optimum and returns 5."""
    dom = Domain.from_dict({"a": 3})
    texts = ["a IN (0, 1)", "a IN (0, 1)", "a IN (0, 2)", "a IN (0, 2)", "a = 1", "a = 2"]
    queries = [parse_query(t, dom) for t in texts]
    s = np.ones(6)
    sets = realisable_sets(dom, queries)
    first = greedy(sets.incidence, s, 2)
    assert exact_sum(s, sets.incidence[first].any(axis=0)) == 5
    got = max_coverage(dom, queries, s, 2)
    assert got.exact and got.value == 6 == coverage_brute_force(dom, queries, s, 2)
    assert sorted(got.witness) == [(1,), (2,)]
    # stopped at once: a proven bound ≥ 6 (here Σ s = 6), the greedy's 5 as witness
    stopped = max_coverage(dom, queries, s, 2, max_work=0)
    assert stopped.value >= 6 and stopped.achieved >= 5


def test_distinct_cost_is_below_k_times_gamma_for_a_partition() -> None:
    """A partition: a person covers at most K cells, K·γ = K; but with K ≥ the number of
    cells the coverage is every cell."""
    dom = Domain.from_dict({"a": 3})
    queries = [parse_query(f"a = {i}", dom) for i in range(3)]
    s = np.ones(3)
    assert max_coverage(dom, queries, s, 2).value == 2
    assert max_coverage(dom, queries, s, 5).value == 3  # min(K·γ, Σ s): Σ s = 3 < 5
    # nested queries: K·γ = 3K, but every record covers the same chain: the coverage is 3
    chain = [parse_query(t, dom) for t in ("a <= 0", "a <= 1", "a <= 2")]
    assert max_coverage(dom, chain, s, 3).value == 3


def distinct_person_brute_force(dom: Domain, queries: list, costs: np.ndarray, k: int,
                                substitute: bool) -> Fraction:
    """max over one person's change of Σ_q c_q |Δ_q| for distinct counts (Δ_q = [R' covers q]
    − [R covers q] ∈ {−1, 0, 1}, so the squared change is the same sum): add/remove — a set R
    of 1..k rows against none; substitute — any two sets of 0..k rows."""
    points = list(itertools.product(*(range(s) for s in dom.sizes)))
    inc = np.array([[q(dom, x) for q in queries] for x in points], dtype=bool)
    inc = inc.reshape(len(points), len(queries))
    covers = [np.zeros(len(queries), dtype=bool)]
    for size in range(1, k + 1):
        for r in itertools.combinations(range(len(points)), min(size, len(points))):
            covers.append(inc[list(r)].any(axis=0))
    pairs = (itertools.product(covers, covers) if substitute
             else ((c, covers[0]) for c in covers))
    return max(exact_sum(costs, a ^ b) for a, b in pairs)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(case=cases(), k=st.integers(1, 3), substitute=st.booleans(),
       definition=st.sampled_from(["pure", "zcdp"]))
def test_person_counted_once_costs_the_coverage(case: tuple, k: int, substitute: bool,
                                                definition: str) -> None:
    """The calibration's γ (max_overlap with a people unit: scores h(w), w under ε, w² under
    ρ) and the accounting's cost (cost_bound: the costs themselves) against brute force."""
    from tessera.overlap import max_overlap
    from tessera.overlap.result import h
    from tessera.privacy import Neighbours, PrivacyUnit
    from tessera.release.exact_costs import cost_bound

    dom, queries, w = case
    w = np.round(w)  # integer weights: exact scores
    unit = PrivacyUnit("pid", k, "people")
    rel = Neighbours.SUBSTITUTE if substitute else Neighbours.ADD_REMOVE
    want = distinct_person_brute_force(dom, queries, h(definition, w), k, substitute)
    got = max_overlap(queries, w, domain=dom, comp=definition, neighbours=rel, unit=unit)
    assert Fraction(got.score_bound) >= want >= Fraction(got.score_achieved)
    assert not got.exact or Fraction(got.score_bound) == want
    if not substitute:
        assert got.exact
    acc = cost_bound(dom, queries, w, neighbours=rel, unit=unit, definition=definition)
    want_acc = distinct_person_brute_force(dom, queries, w, k, substitute)
    assert acc.value >= want_acc >= acc.achieved_value
    if not substitute:
        assert acc.exact and acc.value == want_acc


def test_substituting_a_person_can_cost_more_than_the_coverage_of_k() -> None:
    """Replacing a person's K rows by K others changes the queries either set covers: on a
    partition into 2K cells that is 2K, twice C_K (a planted bound of C_K fails here)."""
    from tessera.overlap import max_overlap
    from tessera.privacy import Neighbours, PrivacyUnit

    dom = Domain.from_dict({"a": 4})
    queries = [parse_query(f"a = {i}", dom) for i in range(4)]
    for k in (1, 2):
        cells = queries[: 2 * k]
        want = distinct_person_brute_force(dom, cells, np.ones(2 * k), k, True)
        assert want == 2 * k == 2 * max_coverage(dom, cells, np.ones(2 * k), k).value
        got = max_overlap(cells, domain=dom, neighbours=Neighbours.SUBSTITUTE,
                          unit=PrivacyUnit("pid", k, "people"))
        assert got.score_bound >= want
