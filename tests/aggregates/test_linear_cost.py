"""The cost of counts and clamped sums equals brute force (docs/theory.md §3.15).

Small domains with a signed integer attribute; random workloads of counts and sums (random
WHERE conjunctions, random clamps, random GROUP BY) with random integer costs. For every record
x (add/remove), every pair (substitute) and every multiset of K ≤ 3 records (a person), the
change of every linear query is computed by evaluating the query directly, and

* the levels' weighted overlap (:func:`tessera.overlap.max_overlap` on the level weights
  c_q·1 or c_q·(2t − 1)) equals max_x Σ_q c_q |f_q(x)|^p exactly, its witness attains it;
* :func:`tessera.release.linear_costs.linear_cost_bound` (exact rationals, per person) lies
  within rounding of the brute-force maximum: a person's exactly K (ε) or K² (ρ) times a row's,
  attained by K copies of the worst record; under substitution it is exact in pure ε (the
  levels' pairs) and, under ρ-zCDP, exact by the pair program
  (:mod:`tessera.overlap.linear_pairs`), whose witness pair attains it; beyond the program's
  state limit it falls back to the levels' upper bound, labelled not exact, with the true
  score of its witness pair as the achieved value.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.overlap import max_overlap
from tessera.overlap.linear import attaining, pieces, power
from tessera.privacy import Definition, Neighbours, PrivacyUnit
from tessera.release.linear_costs import linear_cost_bound
from tessera.workload.aggregates import AggregateWorkload

from .cases import DOMAIN, POINTS, multisets, statement, values, workload_of


def brute(w: AggregateWorkload, costs: np.ndarray, p: int, k: int, neighbours: Neighbours) -> int:
    v = values(w)
    deltas = multisets(v, k)
    if neighbours is Neighbours.ADD_REMOVE:
        return int(np.max(np.abs(deltas) ** p @ costs))
    best = 0
    for d in deltas:  # substitute: one multiset replaced by another
        best = max(best, int(np.max(np.abs(deltas - d) ** p @ costs)))
    return best


def draw_costs(data, w):  # noqa: ANN001, ANN201
    """Per-linear-query costs c_q ∈ {1..5}, drawn."""
    return np.array(data.draw(st.lists(st.integers(1, 5), min_size=len(w.linear),
                                       max_size=len(w.linear))), dtype=np.int64)


def assert_pieces_give_brute_force(w, cut, costs, p):  # noqa: ANN001, ANN201
    """The pieces' weighted overlap is exact and equals the add/remove brute force over every
    record; returns the overlap result (``None`` when there are no pieces: the cost is 0)."""
    expected = brute(w, costs, p, 1, Neighbours.ADD_REMOVE)
    if not cut.queries:
        assert expected == 0
        return None
    res = max_overlap(list(cut.queries), costs[cut.owner] * cut.factor, domain=DOMAIN,
                      comp="pure")
    assert res.exact and res.bound == expected
    return res


@settings(max_examples=40, deadline=None)
@given(st.lists(statement, min_size=1, max_size=3), st.sampled_from(["pure", "zcdp"]),
       st.data())
def test_pieces_equal_brute_force_per_record(texts, definition, data):
    """Add/remove: the cells; the levels are checked through the substitution tests."""
    w = workload_of(texts)
    p = power(definition)
    costs = draw_costs(data, w)
    cut = pieces(DOMAIN, w.linear, definition)
    res = assert_pieces_give_brute_force(w, cut, costs, p)
    if res is None:
        return
    expected = res.bound
    # the witness's cell stands for the record at its largest |value|, which attains it: that
    # record's true cost, evaluated directly
    x = np.array([attaining(DOMAIN, w.linear, res.witness.x)])
    row = values(w)[[int(np.flatnonzero((POINTS == x).all(axis=1))[0])]]
    assert int(np.abs(row[0]) ** p @ costs) == expected
    # and the release's cost carries that record as its witness
    wit = linear_cost_bound(DOMAIN, w.linear, costs, definition=definition).overlap.witness
    row = values(w)[[int(np.flatnonzero((POINTS == np.array([wit.x])).all(axis=1))[0])]]
    assert int(np.abs(row[0]) ** p @ costs) == expected


@settings(max_examples=25, deadline=None)
@given(st.lists(statement, min_size=1, max_size=2), st.sampled_from(["pure", "zcdp"]),
       st.integers(1, 3), st.sampled_from(list(Neighbours)), st.data())
def test_person_cost_equals_brute_force(texts, definition, k, neighbours, data):
    """A person of K records: the exact cost equals the brute force over every multiset (every
    pair of multisets under substitution, K ≤ 2 there) up to the costs' rounding up of the
    pieces (under ρ-zCDP substitution the pair program has no rounding at all: equal). Costs
    are multiples of 1/4: the brute force is exact in floats."""
    if neighbours is Neighbours.SUBSTITUTE:
        k = min(k, 2)
    w = workload_of(texts)
    p = power(definition)
    costs = np.array(data.draw(st.lists(st.integers(1, 8), min_size=len(w.linear),
                                        max_size=len(w.linear)))) / 4.0
    unit = PrivacyUnit.of("id", k) if k > 1 else PrivacyUnit.of()
    cb = linear_cost_bound(DOMAIN, w.linear, costs, definition=definition,
                           neighbours=neighbours, unit=unit, time_limit=None)
    deltas = multisets(values(w), k).astype(np.float64)
    if k == 1 and neighbours is Neighbours.SUBSTITUTE:
        deltas = deltas[1:]  # a row is replaced by a row (a person's 0..K rows by 0..K rows)
    if neighbours is Neighbours.SUBSTITUTE:
        truth = max(float(np.max(np.abs(deltas - d) ** p @ costs)) for d in deltas)
    else:
        truth = float(np.max(np.abs(deltas) ** p @ costs))
    if cb is None:
        assert truth == 0
        return
    assert cb.value >= Fraction(truth)
    assert cb.value - Fraction(truth) <= Fraction(1, 10**9) * max(Fraction(truth), 1)
    assert cb.exact
    if neighbours is Neighbours.SUBSTITUTE and p == 2 and k == 1:  # the pair program:
        assert cb.value == Fraction(truth) == cb.achieved_value  # no rounding up
    if neighbours is Neighbours.ADD_REMOVE:
        # K copies of the worst record attain it: a person costs K (ε) or K² (ρ) × a row
        row = linear_cost_bound(DOMAIN, w.linear, costs, definition=definition,
                                time_limit=None)
        assert row is not None and cb.value == unit.factor(definition) * row.value


def test_signed_sum_under_zcdp_substitution_is_doubled():
    """(g − g')² ≤ g² + g'² fails for g = −3, g' = 4 (49 > 25): a sum whose values take both
    signs weighs twice in the levels under ρ-zCDP substitution, which bound the worst pair
    (2·(16 + 9) = 50 here); the pair program gives 49 exactly, attained by v = −3 → 4."""
    w = workload_of(["SELECT SUM(v) FROM t"])
    cb = linear_cost_bound(DOMAIN, w.linear, [1.0], definition="zcdp",
                           neighbours="substitute", time_limit=None)
    assert cb is not None and cb.value == 49 == cb.achieved_value and cb.exact
    wit = cb.overlap.witness
    assert wit is not None and wit.y is not None and wit.queries == (0,)
    v = DOMAIN.index("v")
    assert {wit.x[v], wit.y[v]} == {0, 7}  # the codes of −3 and 4
    bound = linear_cost_bound(DOMAIN, w.linear, [1.0], definition="zcdp",
                              neighbours="substitute", time_limit=None, max_vectors=1)
    assert bound is not None and bound.value >= 49 and not bound.exact
    assert bound.achieved_value <= 49
    plain = pieces(DOMAIN, w.linear, "zcdp", "add-remove")
    assert int(plain.factor.max()) == 16  # add/remove: cells, the largest g² = 4², exact
    doubled = pieces(DOMAIN, w.linear, "zcdp", "substitute")
    # merged levels: thresholds 1, 3, 4 (factors 1, 8, 7) and −1, −2, −3 (1, 3, 5), doubled
    assert int(doubled.factor.sum()) == 2 * (16 + 9)


def test_group_by_pays_once_per_aggregate():
    """A record is in one group: a GROUP BY of 3 groups costs what one group costs."""
    one = workload_of(["SELECT COUNT(*), SUM(v) FROM t"])
    grouped = workload_of(["SELECT COUNT(*), SUM(v) FROM t GROUP BY a"])
    for w in (one, grouped):
        cb = linear_cost_bound(DOMAIN, w.linear, np.ones(len(w.linear)), definition="pure",
                               time_limit=None)
        # the count, and the largest |v| (piece costs are rounded up by an ulp: never below)
        assert cb is not None and 5 <= cb.value <= 5 * (1 + Fraction(1, 10**12))


@pytest.mark.parametrize("definition,factor", [("pure", 3), ("zcdp", 9)])
def test_person_factor(definition, factor):
    w = workload_of(["SELECT SUM(CLAMP(v, 0, 2)) FROM t GROUP BY b"])
    row = linear_cost_bound(DOMAIN, w.linear, [1.0, 1.0], definition=definition,
                            time_limit=None)
    person = linear_cost_bound(DOMAIN, w.linear, [1.0, 1.0], definition=definition,
                               unit=PrivacyUnit.of("id", 3), time_limit=None)
    assert row is not None and person is not None
    assert person.value == factor * row.value
    top = 2 if definition == "pure" else 4
    assert top <= row.value <= top * (1 + Fraction(1, 10**12))


def test_definition_not_costed():
    with pytest.raises(Exception, match="pure ε or ρ-zCDP"):
        power(Definition.GDP)


def test_substitution_is_exact_in_pure_epsilon():
    """SUM(CLAMP(v, 0, 4)): one record replaced moves the sum by at most 4 (4 → 0). Per-value
    pieces would score 4 + 3 (4 → 3, both counted); the levels score |4 − 3| = 1 there, and the
    maximum is exactly 4."""
    w = workload_of(["SELECT SUM(CLAMP(v, 0, 4)) FROM t"])
    cb = linear_cost_bound(DOMAIN, w.linear, [1.0], definition="pure",
                           neighbours="substitute", time_limit=None)
    assert cb is not None and 4 <= cb.value <= 4 * (1 + Fraction(1, 10**12))


@settings(max_examples=30, deadline=None)
@given(st.lists(statement, min_size=1, max_size=3), st.sampled_from(["pure", "zcdp"]),
       st.data())
def test_levels_equal_brute_force_per_record(texts, definition, data):
    """The levels (what substitution uses) have the add/remove maximum too, exactly."""
    from tessera.overlap.linear import Pieces

    w = workload_of(texts)
    p = power(definition)
    costs = draw_costs(data, w)
    queries, owner, factor = [], [], []
    for i, lq in enumerate(w.linear):
        for q, before, t in lq.levels(DOMAIN):
            assert before == t - 1
            queries.append(q)
            owner.append(i)
            factor.append(1 if p == 1 else 2 * t - 1)
    cut = Pieces(tuple(queries), np.array(owner, dtype=np.int64), np.array(factor))
    assert_pieces_give_brute_force(w, cut, costs, p)


def pair_brute(w: AggregateWorkload, costs: np.ndarray) -> int:
    """max over every pair of records x, y of Σ_q c_q (a_q(x) − a_q(y))² (no empty row)."""
    v = values(w)
    return max(int(np.max((v - d) ** 2 @ costs)) for d in v)


def row_of(w, x) -> np.ndarray:  # noqa: ANN001
    """The brute force's contributions of the record x (a row of ``values``)."""
    return values(w)[int(np.flatnonzero((POINTS == np.array([x])).all(axis=1))[0])]


@settings(max_examples=40, deadline=None)
@given(st.lists(statement, min_size=1, max_size=3), st.data())
def test_zcdp_substitution_pair_program_equals_brute_force(texts, data):
    """One row replaced under ρ-zCDP: the spend is exactly max over every pair of records of
    Σ_q c_q (a_q(x) − a_q(y))², its witness pair attains it, and a person of K = 2, 3 rows
    pays exactly K² times the row's largest cost over add/remove and substitution (K copies
    of the worst pair, or of the worst record, attain it)."""
    from tessera.overlap import linear_pairs

    w = workload_of(texts)
    costs = draw_costs(data, w)
    truth = pair_brute(w, costs)
    # small blocks too: the vectors made and deduplicated in chunks, the pairs a row at a time
    block, linear_pairs.BLOCK = linear_pairs.BLOCK, data.draw(st.sampled_from([1, 7, 2**19]))
    try:
        cb = linear_cost_bound(DOMAIN, w.linear, costs, definition="zcdp",
                               neighbours="substitute", time_limit=None)
    finally:
        linear_pairs.BLOCK = block
    if cb is None:
        assert truth == 0
        return
    assert cb.exact and cb.value == truth == cb.achieved_value
    wit = cb.overlap.witness
    assert wit is not None and wit.y is not None
    delta = row_of(w, wit.x) - row_of(w, wit.y)
    assert int(delta**2 @ costs) == truth
    assert wit.queries == tuple(int(j) for j in np.flatnonzero(delta))
    added = brute(w, costs, 2, 1, Neighbours.ADD_REMOVE)
    for k in (2, 3):
        person = linear_cost_bound(DOMAIN, w.linear, costs, definition="zcdp",
                                   neighbours="substitute", unit=PrivacyUnit.of("id", k),
                                   time_limit=None)
        assert person is not None and person.value >= k * k * max(truth, added)
        # (the add/remove cells' costs are rounded up by an ulp; the pair program's are not)
        assert person.value <= k * k * max(truth, added) * (1 + Fraction(1, 10**12))
        if truth > added:
            assert person.value == k * k * truth


@settings(max_examples=30, deadline=None)
@given(st.lists(statement, min_size=1, max_size=3), st.data())
def test_zcdp_substitution_fallback_is_a_labelled_bound(texts, data):
    """Beyond the pair program's state limit (forced: one vector) the levels' bound: never
    below the brute force, exact only when its witness pair attains it, and its achieved value
    the true score of that pair (never above the brute force)."""
    w = workload_of(texts)
    costs = draw_costs(data, w)
    truth = pair_brute(w, costs)
    cb = linear_cost_bound(DOMAIN, w.linear, costs, definition="zcdp",
                           neighbours="substitute", time_limit=None, max_vectors=1)
    if cb is None:
        assert truth == 0
        return
    assert cb.value >= truth >= cb.achieved_value
    assert cb.exact == (cb.value <= cb.achieved_value)
    wit = cb.overlap.witness
    if wit is not None and wit.y is not None:
        delta = row_of(w, wit.x) - row_of(w, wit.y)
        assert cb.achieved_value == Fraction(int(delta**2 @ costs))
    if any(lq.role == "sum" and min(g for _, g in lq.values(DOMAIN)) < 0 < max(
            g for _, g in lq.values(DOMAIN)) for lq in w.linear) and cb.value > truth:
        assert not cb.exact


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 7), st.integers(1, 4), st.integers(0, 22), st.data())
def test_pair_maximum_is_exact_for_any_weights(n, m, magnitude, data):
    """The limbs of :func:`tessera.overlap.linear_pairs.pair_maximum`: integer weights of up to
    200 bits and contributions up to 2^22 (few bits per limb, many carries), in float64 limbs
    and in int64 ones, give the same maximum as Python integers, attained by the pair
    returned."""
    top = 2**magnitude
    v = np.array(data.draw(st.lists(st.lists(st.integers(-top, top), min_size=m, max_size=m),
                                    min_size=n, max_size=n)), dtype=np.int64)
    w = data.draw(st.lists(st.integers(0, 2**200), min_size=m, max_size=m))
    rows = v.tolist()

    def score(a: list[int], b: list[int]) -> int:
        return sum(x * (s - t) ** 2 for x, s, t in zip(w, a, b))

    from tessera.overlap import linear_pairs

    block, linear_pairs.BLOCK = linear_pairs.BLOCK, data.draw(st.sampled_from([1, 5, 2**19]))
    limit = linear_pairs.FLOAT_LIMIT  # 1: no float64 limb fits, the int64 limbs are used
    linear_pairs.FLOAT_LIMIT = data.draw(st.sampled_from([limit, 1]))
    try:  # (small blocks: a row or two at a time)
        value, i, j = linear_pairs.pair_maximum(v, w)
    finally:
        linear_pairs.BLOCK, linear_pairs.FLOAT_LIMIT = block, limit
    assert value == max(score(a, b) for a in rows for b in rows) == score(rows[i], rows[j])


#: Where the worst pair needs each end of a cell: v = 2 is the upper end of the cell {1, 2} of
#: v < 3 (25 = (2 + 3)²), v = −2 the lower end of {−2, −1} under BETWEEN (9 = (1 + 2)²); a
#: NULL beside a clamp that excludes 0 ((0 − 5)² = 25, 0 being no value of the clamp); v = 2
#: against v = −3 in two sums (2² + (2 + 3)² = 29).
CELL_CASES = [
    (["SELECT SUM(v) FROM t WHERE a <> 'z' AND v < 3"], 25),
    (["SELECT SUM(v) FROM t WHERE NOT b AND v BETWEEN -2 AND 1"], 9),
    (["SELECT SUM(CLAMP(v, 5, 9)) FROM t"], 25),
    (["SELECT SUM(v) FROM t WHERE v >= 0", "SELECT SUM(v) FROM t WHERE v < 3"], 29),
]


@pytest.mark.parametrize(("texts", "expected"), CELL_CASES)
def test_zcdp_substitution_needs_both_cell_ends(texts, expected):
    w = workload_of(texts)
    costs = np.ones(len(w.linear), dtype=np.int64)
    assert pair_brute(w, costs) == expected
    cb = linear_cost_bound(DOMAIN, w.linear, costs, definition="zcdp",
                           neighbours="substitute", time_limit=None)
    assert cb is not None and cb.exact and cb.value == expected == cb.achieved_value


def test_linear_pairs_docstring_example():
    import doctest

    from tessera.overlap import linear_pairs

    result = doctest.testmod(linear_pairs)
    assert result.attempted > 0 and result.failed == 0
