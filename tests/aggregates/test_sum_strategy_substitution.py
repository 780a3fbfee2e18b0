"""Strategies for sums under substitute neighbours (docs/theory.md §3.15, "Strategies for sums",
the theorem "under substitution").

* the bound: for counting queries A with costs c and add/remove cost γ_A, every substitution
  (c, v) → (c', v') of clamped values has Σ_a c_a |v a(c) − v' a(c')|^p ≤ T γ_A, and so has the
  levels' ρ-zCDP pair score — checked by enumeration on random small strategies (hypothesis),
  and shown tight on the identity, where the bound without 2^p, or without M, is caught;
* the plan's spend equals the brute-force maximum over every pair of records — values beyond the
  clamps and NULLs included, and every pair of multisets of at most 2 rows for a person — in
  pure ε (the levels) and in ρ-zCDP (the exact pair program), and is within the budget; before
  the joint re-check the families cost at most their shares, so the re-check only lowers the
  noise;
* ``auto`` picks a strategy on the 1- and 2-way GROUP BY sums of 4 columns, and the
  reconstructed answers are unbiased with the stated variances (seeded χ²).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.overlap.linear import power
from tessera.privacy import Neighbours, PrivacyUnit
from tessera.release.linear_costs import linear_cost_bound
from tessera.release.sum_strategy import SumStrategyPlan, sum_strategy_plan
from tessera.schema.domain import Domain
from tessera.strategy.sums import SumFamily, substitution_factor

from .cases import DOMAIN, POINTS, multisets
from .test_sum_strategy import (
    ATTRS,
    BUDGETS,
    FOUR,
    GRID,
    MARGINAL_SUMS,
    SIGNED,
    chi2_limit,
    contributions,
    counting_cost,
    grid_answers,
    marginal_sums,
    workload_of,
    z_scores,
)

SUB = Neighbours.SUBSTITUTE


def pair_cost(a: np.ndarray, b: np.ndarray, costs: np.ndarray, p: int) -> float:
    """max over every row x of ``a`` and y of ``b`` of Σ_q c_q |Δ_q(x) − Δ_q(y)|^p (in blocks
    of rows of ``a``)."""
    best = 0.0
    w = np.asarray(costs, dtype=np.float64)
    for i in range(len(a)):
        best = max(best, float(np.max(np.abs(b - a[i]).astype(np.float64) ** p @ w)))
    return best


def family(lo: int, hi: int, m: int) -> SumFamily:
    return SumFamily("sum", "v", lo, hi, None, (0,), m, lo < 0 < hi)


# -- the bound --------------------------------------------------------------------------------
def records(cells: int, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """(cell, clamped value) of every record: every cell with every value of [lo, hi] and 0 (a
    NULL, or a value the clamp maps to 0 when 0 ∈ [lo, hi])."""
    vals = sorted({*range(lo, hi + 1), 0})
    pairs = list(itertools.product(range(cells), vals))
    return (np.array([c for c, _ in pairs], dtype=np.int64),
            np.array([v for _, v in pairs], dtype=np.int64))


def true_pair_cost(a: np.ndarray, c: np.ndarray, lo: int, hi: int, p: int) -> float:
    """max over pairs of records of Σ_a c_a |v a(c) − v' a(c')|^p, A the 0/1 matrix ``a``
    (queries × cells)."""
    cell, v = records(a.shape[1], lo, hi)
    delta = (a[:, cell] * v).T  # records × queries
    return pair_cost(delta, delta, c, p)


def levels_pair_cost(a: np.ndarray, c: np.ndarray, lo: int, hi: int) -> float:
    """The levels' ρ-zCDP pair score of the queries SUM(u) WHERE a (docs/theory.md §3.15):
    Σ_a c_a w (|a⁺(x)² − a⁺(y)²| + |a⁻(x)² − a⁻(y)²|), w = 2 for a two-signed clamp."""
    cell, v = records(a.shape[1], lo, hi)
    delta = (a[:, cell] * v).T
    pos, neg = np.maximum(delta, 0) ** 2, np.maximum(-delta, 0) ** 2
    w = np.asarray(c, dtype=np.float64) * (2 if lo < 0 < hi else 1)
    best = 0.0
    for i in range(len(delta)):
        s = (np.abs(pos - pos[i]) + np.abs(neg - neg[i])).astype(np.float64) @ w
        best = max(best, float(s.max()))
    return best


def check_bound(true: float, bound: float) -> None:
    assert true <= bound * (1 + 1e-12), f"the pair cost {true} exceeds the bound {bound}"


@st.composite
def strategy_cases(draw):
    """A random counting strategy on the cells of d ≤ 4 small attributes (any 0/1 queries: every
    predicate, marginal or range is one), random costs and a clamp."""
    sizes = draw(st.lists(st.integers(1, 3), min_size=1, max_size=4))
    cells = int(np.prod(sizes))
    k = draw(st.integers(1, 6))
    bits = draw(st.lists(st.lists(st.booleans(), min_size=cells, max_size=cells),
                         min_size=k, max_size=k))
    costs = draw(st.lists(st.floats(0.0, 3.0, allow_nan=False), min_size=k, max_size=k))
    lo = draw(st.integers(-4, 3))
    hi = draw(st.integers(lo, 4))
    return np.array(bits, dtype=np.int64), np.array(costs), lo, hi


@settings(max_examples=150, deadline=None)
@given(strategy_cases(), st.sampled_from([1, 2]))
def test_substitution_bound_on_random_strategies(case, p):
    a, c, lo, hi = case
    m = max(abs(lo), abs(hi))
    if m == 0:
        return
    gamma = counting_cost(a.T, c)  # max_c Σ_a c_a [a ∋ c]
    t = substitution_factor(family(lo, hi, m), p)
    check_bound(true_pair_cost(a, c, lo, hi, p), t * gamma)
    if p == 2:  # what the joint re-check computes is below the same bound
        check_bound(levels_pair_cost(a, c, lo, hi), t * gamma)


@pytest.mark.parametrize(("lo", "hi", "p", "t"), [(0, 3, 1, 6), (-3, 3, 1, 6), (0, 3, 2, 18),
                                                  (-1, 3, 2, 36), (-3, 3, 2, 36)])
def test_substitution_bound_is_tight_and_planted_bounds_are_caught(lo, hi, p, t):
    """The identity on 3 cells (costs 1, γ = 1) attains T: a row moved between cells with
    |v| = M (p = 1; p = 2 one-signed), the levels of a two-signed clamp with |v| = |v'| = M
    in two cells (and, for [−M, M], the true change M → −M in one cell: (2M)²)."""
    a, c = np.eye(3, dtype=np.int64), np.ones(3)
    m = max(abs(lo), abs(hi))
    assert substitution_factor(family(lo, hi, m), p) == t
    true = (true_pair_cost(a, c, lo, hi, p) if p == 1 or lo >= 0
            else levels_pair_cost(a, c, lo, hi))
    assert true == pytest.approx(t)
    if lo == -hi and p == 2:
        assert true_pair_cost(a, c, lo, hi, p) == pytest.approx(t)
    # planted: the add/remove factor M^p (no 2^p), and 2^p without M
    for planted in (m ** p, 2 ** p):
        with pytest.raises(AssertionError, match="exceeds the bound"):
            check_bound(true, planted * 1.0)


# -- the plan's spend, by brute force over pairs ----------------------------------------------
ONE_SIGNED = [s.replace("CLAMP(v, -1, 2)", "CLAMP(v, 0, 3)") for s in SIGNED]


def pre_fit_checks(plan: SumStrategyPlan, delta: np.ndarray, p: int) -> None:
    """Before the joint re-check: each strategy family at its chooser's costs costs at most
    T × its counting cost (a sum) or its counting substitution cost (the counts) ≤ B_f, all
    families together (the levels' exact re-check) at most B, and the final costs are not below
    the chooser's: the re-check only lowered the noise."""
    off = plan.offsets()
    pre = np.concatenate([f.u for f in plan.families])
    for k, f in enumerate(plan.families):
        sl = slice(off[k], off[k + 1])
        fam = pair_cost(delta[:, sl], delta[:, sl], f.u, p)
        if f.strategy is not None and f.family.role == "sum":
            bound = substitution_factor(f.family, p) * counting_cost(delta[:, sl], f.u)
            check_bound(fam, bound)
            assert bound <= f.budget * (1 + 1e-9)
        assert fam <= f.budget * (1 + 1e-9)
    total = float(plan.budget.total)
    joint = linear_cost_bound(plan.workload.cost_domain, plan.measured, pre,
                              definition=plan.budget.calibration, neighbours=SUB,
                              unit=plan.unit)
    assert joint is not None and float(joint.value) <= total * (1 + 1e-9)
    assert np.all(plan.costs >= pre * (1 - 1e-8))


def assert_spend(plan: SumStrategyPlan, records: np.ndarray, budget) -> None:  # noqa: ANN001
    """The stated spend against brute force over every pair of ``records`` (rows: Δ of the
    measured queries): the true maximum (the levels under pure ε, the exact pair program under
    ρ-zCDP), labelled exact, and within the budget."""
    p = power(budget.calibration)
    brute = pair_cost(records, records, plan.costs, p)
    stated = float(plan.spent.value)
    assert stated >= brute * (1 - 1e-9), f"stated {stated} below the true cost {brute}"
    assert stated <= brute * (1 + 1e-9), f"stated {stated} above the true cost {brute}"
    assert plan.spent.exact
    assert stated <= float(budget.total) * (1 + 1e-12)


@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("texts", [SIGNED, ONE_SIGNED], ids=["two-signed", "one-signed"])
@pytest.mark.parametrize("strategy", ["identity", "residual"])
def test_substitution_spend_by_brute_force(budget, texts, strategy):
    w = workload_of(DOMAIN, texts)
    plan = sum_strategy_plan(w, budget, neighbours=SUB, strategy=strategy)
    assert plan is not None and all(f.strategy is not None for f in plan.families)
    assert plan.neighbours is SUB
    p = power(budget.calibration)
    delta = contributions(plan.measured, DOMAIN, POINTS)  # every cell, NULL, beyond the clamp
    assert_spend(plan, delta, budget)
    pre_fit_checks(plan, delta, p)


RANGES = [f"SELECT SUM(CLAMP(v, -1, 2)) FROM t WHERE v BETWEEN {lo} AND {hi}"
          for lo, hi in itertools.combinations(range(-3, 5), 2)]


@pytest.mark.parametrize("budget", BUDGETS)
def test_hierarchical_ranges_under_substitution(budget):
    """Range sums of the summed attribute itself: a tree strategy, every pair of records."""
    w = workload_of(DOMAIN, RANGES)
    plan = sum_strategy_plan(w, budget, neighbours=SUB, strategy="hierarchical")
    assert plan is not None and plan.families[0].name.startswith("hierarchical")
    p = power(budget.calibration)
    delta = contributions(plan.measured, DOMAIN, POINTS)
    assert_spend(plan, delta, budget)
    pre_fit_checks(plan, delta, p)


@pytest.mark.parametrize("budget", BUDGETS)
def test_person_substitution_by_brute_force(budget):
    """A person of at most 2 rows replaced by another of at most 2 (rows added and removed
    too): every pair of multisets of 0..2 records. The stated K·max(S_add/remove,
    S_substitute) (ε) or K²·max (ρ) is attained (two copies of the worst pair or row)."""
    w = workload_of(DOMAIN, SIGNED[:3])
    unit = PrivacyUnit.of("pid", 2)
    plan = sum_strategy_plan(w, budget, neighbours=SUB, strategy="residual", unit=unit)
    assert plan is not None
    assert_spend(plan, multisets(contributions(plan.measured, DOMAIN, POINTS), 2), budget)


@pytest.mark.parametrize("budget", BUDGETS)
def test_measure_substitution_every_cell_and_value(budget):
    """A measure's value is free in every cell: every pair of (cell, value), values far beyond
    the clamp included."""
    dom = Domain.from_dict({"attributes": {"a": {"type": "categorical", "values": ["x", "y"]},
                                           "b": {"type": "boolean"}}})
    w = workload_of(dom, ["SELECT a, SUM(CLAMP(m, -2, 3)) FROM t GROUP BY a",
                          "SELECT a, b, SUM(CLAMP(m, -2, 3)) FROM t GROUP BY a, b",
                          "SELECT b, SUM(CLAMP(m, -2, 3)) FROM t GROUP BY b"])
    plan = sum_strategy_plan(w, budget, neighbours=SUB, strategy="residual")
    assert plan is not None
    cells = np.array(list(itertools.product(*(range(s) for s in dom.sizes))), dtype=np.int64)
    e = w.measures["m"]
    values = np.concatenate([np.arange(-6, 8) * 10 ** -e, [-1234567, 1, 2999999]])
    pts = np.repeat(cells, len(values), axis=0)
    vals = np.tile(values, len(cells))
    delta = contributions(plan.measured, dom, pts, vals)
    p = power(budget.calibration)
    assert_spend(plan, delta, budget)
    pre_fit_checks(plan, delta, p)


# -- the choice and the answers ---------------------------------------------------------------
@pytest.mark.parametrize("budget", BUDGETS)
def test_auto_beats_direct_on_marginal_sums_under_substitution(budget):
    w = workload_of(FOUR, marginal_sums(ATTRS, "SUM(CLAMP(amount, 0, 200))"))
    plan = sum_strategy_plan(w, budget, neighbours=SUB, strategy="auto")
    assert plan is not None and len(plan.families) == 1
    f = plan.families[0]
    assert f.name != "direct"
    expected = dict(f.expected)
    ratio = expected["direct"] / expected[f.name]
    print(f"{budget.text()}, substitution: {f.name} expected total variance {ratio:.2f}x below "
          "direct")
    assert ratio > 1.5
    # a GROUP BY's direct cost doubles under substitution as the bound T = 2M (2M²) does: the
    # same gain as under add/remove
    ar = sum_strategy_plan(w, budget, strategy="auto")
    assert ar is not None
    ar_expected = dict(ar.families[0].expected)
    assert ratio == pytest.approx(ar_expected["direct"] / ar_expected[ar.families[0].name],
                                  rel=1e-6)


def test_named_strategies_apply_under_substitution():
    w = workload_of(GRID, MARGINAL_SUMS[:3])
    for name in ("identity", "residual"):
        plan = sum_strategy_plan(w, BUDGETS[0], neighbours=SUB, strategy=name)
        assert plan is not None and {f.name for f in plan.families} == {name}
    assert sum_strategy_plan(w, BUDGETS[0], neighbours=SUB, strategy="direct") is None


@pytest.mark.parametrize("budget", BUDGETS)
def test_reconstruction_unbiased_under_substitution(budget):
    w = workload_of(GRID, MARGINAL_SUMS)
    plan = sum_strategy_plan(w, budget, neighbours=SUB, strategy="auto")
    assert plan is not None and any(f.strategy is not None for f in plan.families)
    exact_measured, truth = grid_answers(plan, w)
    runs = 300
    z, ratio = z_scores(plan, exact_measured, truth, runs, seed=13)
    assert float(z @ z) < chi2_limit(len(z)), z
    assert 0.65 < float(np.median(ratio)) < 1.35
