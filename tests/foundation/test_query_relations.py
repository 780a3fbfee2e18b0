"""Query evaluation and set relations against brute-force enumeration of 𝔻 (docs/theory.md §2)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tessera.schema.domain import Categorical, Domain, IntegerRange
from tessera.schema.intervals import IntervalSet
from tessera.workload.query import Query, disjoint, joint_coverage, jointly_overlap, witness
from tests.oracles.foundation import (
    FAST,
    HypDraw,
    RngDraw,
    SetQuery,
    coverage_brute,
    gen_domain,
    gen_interval_query,
    gen_set_query,
    points,
)


def _check_query(domain: Domain, sq: SetQuery) -> None:
    q = sq.to_query(domain)
    pts = list(points(domain))
    codes = np.asarray(pts, dtype=np.int64).reshape(len(pts), len(domain))
    want = [sq.contains(x) for x in pts]
    assert q.evaluate(domain, codes).tolist() == want
    assert [q(domain, x) for x in pts] == want
    assert q.coverage_size(domain) == sum(want)
    # normal form: tautologies omitted, domain order, coverages as given
    for a, s in zip(domain, sq.sets):
        full = s is None or s == frozenset(range(a.size))
        assert (q.predicate(a.name) is None) == full
        assert set(q.coverage_of(a)) == (set(range(a.size)) if s is None else set(s))
    assert list(q.scope) == [a.name for a in domain if a.name in q.scope]
    assert q.is_contradiction() == any(s is not None and not s for s in sq.sets)
    assert q.is_contradiction() == (sum(want) == 0)
    is_range = all(
        domain[n].ordered
        and (lambda c: not c or max(c) - min(c) + 1 == len(c))(set(q.coverage_of(domain[n])))
        for n in q.scope
    )
    assert q.is_range(domain) == is_range


@FAST
@given(st.data())
def test_evaluate_and_coverage_size_match_enumeration(data: st.DataObject) -> None:
    r = HypDraw(data)
    domain = gen_domain(r)
    for _ in range(3):
        _check_query(domain, gen_set_query(r, domain))


def _check_family(domain: Domain, sqs: list[SetQuery]) -> None:
    qs = [s.to_query(domain) for s in sqs]
    covs = [coverage_brute(domain, s) for s in sqs]
    for (i, a), (j, b) in itertools.combinations(enumerate(covs), 2):
        assert disjoint(qs[i], qs[j]) == (not (a & b)), (sqs[i], sqs[j])
        assert disjoint(qs[j], qs[i]) == (not (a & b))
    for k in range(1, len(qs) + 1):
        for idx in itertools.combinations(range(len(qs)), k):
            joint = set.intersection(*(covs[i] for i in idx))
            sub = [qs[i] for i in idx]
            assert jointly_overlap(domain, sub) == bool(joint)
            w = witness(domain, sub)
            if joint:
                assert w is not None and w in joint
            else:
                assert w is None
            jc = joint_coverage(domain, sub)
            # C_Q is the product of the per-attribute joint coverages
            product = {
                x for x in points(domain) if all(x[domain.index(n)] in c for n, c in jc.items())
            }
            assert product == joint
    assert jointly_overlap(domain, []) and witness(domain, []) == (0,) * len(domain)


@FAST
@given(st.data())
def test_disjoint_joint_overlap_witness_match_enumeration(data: st.DataObject) -> None:
    r = HypDraw(data)
    domain = gen_domain(r)
    _check_family(domain, [gen_set_query(r, domain) for _ in range(r.int(1, 4))])


@pytest.mark.parametrize("seed", range(4))
def test_relations_seeded_loop(seed: int) -> None:
    r = RngDraw(np.random.default_rng(seed))
    for _ in range(60):
        domain = gen_domain(r)
        _check_family(
            domain, [gen_set_query(r, domain, p_constrain=r.int(1, 3)) for _ in range(r.int(2, 4))]
        )


def test_set_predicates_pairwise_overlap_without_joint_overlap() -> None:
    """docs/theory.md §2: A={a,b,c}; coverages {a,b}, {b,c}, {a,c} overlap pairwise, not jointly."""
    d = Domain((Categorical(name="A", values=("a", "b", "c")),))
    qs = [Query.conjunction(d, {"A": IntervalSet.points(s)}) for s in ([0, 1], [1, 2], [0, 2])]
    for q1, q2 in itertools.combinations(qs, 2):
        assert not disjoint(q1, q2)
        assert jointly_overlap(d, [q1, q2])
        assert witness(d, [q1, q2]) is not None
    assert not jointly_overlap(d, qs)
    assert witness(d, qs) is None
    assert joint_coverage(d, qs) == {"A": IntervalSet.empty()}


@FAST
@given(st.data())
def test_helly_for_interval_families(data: st.DataObject) -> None:
    """Boxes of intervals: pairwise overlap ⇒ joint overlap (Helly, d=1 per axis)."""
    r = HypDraw(data)
    domain = gen_domain(r, kinds=("integer", "ordered", "binned"))
    sqs = [gen_interval_query(r, domain) for _ in range(r.int(2, 6))]
    qs = [s.to_query(domain) for s in sqs]
    assert all(q.is_range(domain) for q in qs)
    pairwise = all(not disjoint(a, b) for a, b in itertools.combinations(qs, 2))
    if pairwise:
        assert jointly_overlap(domain, qs)
        w = witness(domain, qs)
        assert w is not None and all(s.contains(w) for s in sqs)


@pytest.mark.parametrize("seed", range(3))
def test_helly_seeded_many_intervals(seed: int) -> None:
    rng = np.random.default_rng(seed)
    d = Domain((IntegerRange(name="x", lo=0, hi=19), IntegerRange(name="y", lo=0, hi=19)))
    hits = 0
    for _ in range(300):
        qs = []
        for _ in range(int(rng.integers(2, 8))):
            cov = {}
            for n in ("x", "y"):
                lo, hi = sorted(rng.integers(0, 20, size=2).tolist())
                cov[n] = IntervalSet.range(lo, hi + 1)
            qs.append(Query.conjunction(d, cov))
        if all(not disjoint(a, b) for a, b in itertools.combinations(qs, 2)):
            hits += 1
            assert jointly_overlap(d, qs)
    assert hits > 10  # the property was exercised, not vacuous


def test_contradiction_and_tautology() -> None:
    d = Domain((IntegerRange(name="x", lo=0, hi=3), IntegerRange(name="y", lo=0, hi=3)))
    empty = Query.conjunction(d, {"x": IntervalSet.empty()})
    full = Query.conjunction(d, {"x": IntervalSet.range(0, 4), "y": IntervalSet.range(-5, 50)})
    assert full == Query.tautology() and full.scope == ()
    assert empty.is_contradiction() and empty.coverage_size(d) == 0
    assert disjoint(empty, full) and disjoint(empty, empty)
    assert not jointly_overlap(d, [empty, full])
    assert full.coverage_size(d) == 16
    # coverages are clipped to the attribute
    assert Query.conjunction(d, {"x": IntervalSet.range(2, 10)}).predicate(
        "x"
    ) == IntervalSet.range(2, 4)
