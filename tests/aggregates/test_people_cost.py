"""What one person costs aggregate statements that count people (docs/theory.md §3.14,
"Aggregates counting people"), against brute force: every multiset of at most K records (and,
under substitution, every pair of them) evaluated with the person-level semantics — a group's
count moves by 1 when the person has a row in it, a sum by clamp(T, lo, hi) of the person's
total T there — on a small domain with a signed summed attribute. The calibrated cost is
never below the true maximum, equals it when labelled exact, and its achieved lower end is a
real person's."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.privacy import Definition, Neighbours, PrivacyUnit
from tessera.release.aggregate_plan import aggregate_plan
from tessera.release.budget import Budget
from tessera.release.linear_costs import linear_cost_bound
from tessera.schema.domain import Domain
from tessera.workload.aggregates import AggregateWorkload
from tessera.workload.select import parse_statement

DOMAIN = Domain.from_dict({"attributes": {
    "a": {"type": "categorical", "values": ["x", "y"]},
    "v": {"type": "integer", "min": -2, "max": 3, "missing": True},
    "b": {"type": "boolean"},
}})
POINTS = np.array(list(itertools.product(*(range(s) for s in DOMAIN.sizes))), dtype=np.int64)

where = st.sampled_from(["", " WHERE a = 'x'", " WHERE v >= 0", " WHERE b",
                         " WHERE a = 'y' OR b", " WHERE NOT b AND v BETWEEN -2 AND 1"])
aggregate = st.sampled_from(["COUNT(*)", "COUNT(v)", "SUM(v)", "AVG(v)", "SUM(CLAMP(v, 0, 2))",
                             "SUM(CLAMP(v, -1, 1))", "AVG(CLAMP(v, 1, 3))",
                             "SUM(CLAMP(v, 4, 7))"])
group = st.sampled_from(["", " GROUP BY a", " GROUP BY b", " GROUP BY a, b", " GROUP BY v"])
statement = st.builds(lambda ags, w, g: f"SELECT {', '.join(ags)} FROM t{w}{g}",
                      st.lists(aggregate, min_size=1, max_size=2), where, group)


def workload_of(texts: list[str]) -> AggregateWorkload:
    return AggregateWorkload(DOMAIN, tuple(parse_statement(t, DOMAIN)[0] for t in texts))


def multisets(k: int) -> np.ndarray:
    """Every multiset of 0..k records as rows of k point indices, -1 padding (no record)."""
    out = []
    for size in range(k + 1):
        for combo in itertools.combinations_with_replacement(range(len(POINTS)), size):
            out.append(list(combo) + [-1] * (k - size))
    return np.array(out, dtype=np.int64)


def terms(w: AggregateWorkload, sets: np.ndarray) -> np.ndarray:
    """t_q(R) of every multiset R (rows) and linear query q (columns), evaluated directly: 0
    without a record in q; else 1 (a count) or clamp(Σ value over the records in q, lo, hi)."""
    v_code = POINTS[:, DOMAIN.index("v")]
    attr = DOMAIN["v"]
    value = np.where(v_code == attr.missing_code, 0, attr.lo + v_code)
    value = np.append(value, 0)  # the padding record
    out = np.zeros((len(sets), len(w.linear)), dtype=np.int64)
    for j, lq in enumerate(w.linear):
        member = np.append(lq.query.evaluate(DOMAIN, POINTS).astype(bool), False)[sets]
        inside = member.any(axis=1)
        if lq.role == "count":
            out[:, j] = inside
            continue
        total = (member * value[sets]).sum(axis=1)
        out[:, j] = np.where(inside, np.clip(total, lq.lo, lq.hi), 0)
    return out


def true_cost(t: np.ndarray, costs: np.ndarray, p: int, substitute: bool) -> float:
    """max Σ_q c_q |Δ_q|^p over one person added or removed (R against ∅), or substituted
    (every pair of multisets)."""
    if not substitute:
        return float(np.max(np.abs(t).astype(np.float64) ** p @ costs))
    tf = t.astype(np.float64)
    best = 0.0
    for start in range(0, len(tf), 64):
        d = np.abs(tf[start:start + 64, None, :] - tf[None, :, :]) ** p
        best = max(best, float(np.max(d @ costs)))
    return best


@settings(max_examples=25, deadline=None)
@given(st.lists(statement, min_size=1, max_size=3), st.sampled_from(["pure", "zcdp"]),
       st.integers(1, 3), st.sampled_from(["add-remove", "substitute"]),
       st.integers(0, 2**32 - 1))
def test_person_cost_bounds_brute_force(texts, definition, k, neighbours, seed):
    substitute = neighbours == "substitute"
    if substitute and k == 3:
        k = 2  # (every pair of 3-multisets: too many for a quick test)
    w = workload_of(texts)
    costs = np.random.default_rng(seed).uniform(0.05, 1.0, len(w.linear)).round(6)
    p = 1 if definition == "pure" else 2
    cb = linear_cost_bound(w.cost_domain, w.linear, costs, definition=definition,
                           neighbours=neighbours, unit=PrivacyUnit("id", k, "people"),
                           time_limit=None)
    truth = true_cost(terms(w, multisets(k)), costs, p, substitute)
    if cb is None:
        assert truth == 0
        return
    assert truth <= float(cb.value) * (1 + 1e-9)
    assert float(cb.achieved_value) <= truth * (1 + 1e-9)  # a real person's
    if cb.exact:
        assert truth >= float(cb.value) * (1 - 1e-9)
    # never above the sum of every query's score (the coverage's trivial bound)
    bound = [lq.person_bound(substitute) for lq in w.linear]
    assert float(cb.value) <= float(np.sum(costs * np.array(bound, dtype=float) ** p)) * (
        1 + 1e-9)


@pytest.mark.parametrize("which", ["epsilon", "rho"])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_plan_spends_its_budget_for_a_person(which, k):
    """The plan's costs, applied to every multiset of ≤ K records, never exceed the budget;
    the disjoint yearly sums of the benchmark's shape meet it exactly (each of K records in a
    different statement, at the clamp's top)."""
    texts = ["SELECT SUM(CLAMP(v, 0, 2)) FROM t WHERE a = 'x' GROUP BY b",
             "SELECT COUNT(*), AVG(CLAMP(v, -1, 3)) FROM t WHERE a = 'y' GROUP BY b"]
    w = workload_of(texts)
    budget = Budget.of(**{which: 0.7})
    plan = aggregate_plan(w, budget, unit=PrivacyUnit("id", k, "people"), time_limit=None)
    p = 1 if which == "epsilon" else 2
    truth = true_cost(terms(w, multisets(k)), plan.costs, p, False)
    assert truth <= 0.7 * (1 + 1e-12)
    assert plan.spent.exact and truth >= 0.7 * (1 - 1e-9)
    assert plan.bounds.tolist() == [2, 2, 1, 3, 1, 1, 3, 1]


def test_exact_only_when_a_person_attains_it():
    """SUM(CLAMP(v, 4, 7)) with v ≤ 3: a person of one row moves it by 4 at most (clamp(3)),
    of two rows by 6, not by D = 7 — labelled upper bounds, with those real lower ends; with
    K = 3 rows of v = 3 the total 9 clamps to 7: attained, exact."""
    w = workload_of(["SELECT SUM(CLAMP(v, 4, 7)) FROM t"])
    for k, exact, achieved in ((1, False, 4), (2, False, 6), (3, True, 7)):
        cb = linear_cost_bound(w.cost_domain, w.linear, [1.0], definition=Definition.PURE,
                               neighbours=Neighbours.ADD_REMOVE,
                               unit=PrivacyUnit("id", k, "people"), time_limit=None)
        assert cb is not None and cb.value == 7
        assert cb.exact is exact
        assert cb.achieved_value == achieved


@pytest.mark.parametrize("definition", ["pure", "zcdp"])
@pytest.mark.parametrize("neighbours", ["add-remove", "substitute"])
def test_disjoint_groups_are_exact_under_both_relations(definition, neighbours):
    """Disjoint groups with a one-signed clamp (the yearly sums' shape): K records in K
    different groups at the clamp's top attain the coverage, and under substitution a pair of
    persons in 2K different groups attains that of 2K records — both labelled exact, both
    equal to brute force."""
    w = workload_of(["SELECT SUM(CLAMP(v, 0, 3)) FROM t WHERE a = 'x' GROUP BY b",
                     "SELECT SUM(CLAMP(v, 0, 3)) FROM t WHERE a = 'y' GROUP BY b"])
    costs = np.array([0.5, 0.25, 1.0, 0.125])
    substitute = neighbours == "substitute"
    p = 1 if definition == "pure" else 2
    for k in (1, 2):
        cb = linear_cost_bound(w.cost_domain, w.linear, costs, definition=definition,
                               neighbours=neighbours, unit=PrivacyUnit("id", k, "people"),
                               time_limit=None)
        assert cb is not None and cb.exact
        truth = true_cost(terms(w, multisets(k)), costs, p, substitute)
        assert float(cb.value) == pytest.approx(truth, rel=1e-12)
        top = sorted(costs * 3.0**p, reverse=True)
        assert truth == pytest.approx(sum(top[:2 * k if substitute else k]), rel=1e-12)
