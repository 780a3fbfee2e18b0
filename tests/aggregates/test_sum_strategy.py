"""Strategies for sums (docs/theory.md §3.15, "Strategies for sums"): a counting strategy
measured on the weighted histogram h_u.

* the plan's spend equals, by brute force over every record (and every multiset of K records
  for a person), max Σ_a c_a |Δ_a|^p of the measured queries on h_u, which is M^p times the
  counting strategy's cost — a planted calibration that forgets the factor M is caught;
* the reconstructed answers are unbiased, with the variances the release states (a seeded
  statistical test whose tolerance comes from those variances; a planted mis-mapped
  reconstruction fails it);
* on every 1- and 2-way GROUP BY sum over 4 attributes ``auto`` picks a strategy with a lower
  expected total variance than direct.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pandas as pd
import pytest

from tessera.data.source import encode
from tessera.mechanisms import NoiseSource, discrete_gaussian, discrete_laplace
from tessera.overlap.linear import power
from tessera.privacy import PrivacyUnit
from tessera.release.aggregates import exact_linear
from tessera.release.budget import Budget
from tessera.release.sum_strategy import reconstruct, sum_strategy_plan
from tessera.schema.domain import Domain
from tessera.workload.aggregates import AggregateWorkload, LinearQuery
from tessera.workload.select import parse_statement

from .cases import DOMAIN, POINTS, multisets

BUDGETS = [Budget.of(epsilon=1.0), Budget.of(rho=0.5)]


def workload_of(domain: Domain, texts: list[str]) -> AggregateWorkload:
    return AggregateWorkload(domain, tuple(parse_statement(t, domain)[0] for t in texts))


def contributions(measured: tuple[LinearQuery, ...], domain: Domain, points: np.ndarray,
                  value: np.ndarray | None = None) -> np.ndarray:
    """Δ of every measured query (columns) for one record at each point (rows): [x ∈ a]·g(x),
    g the clamped value of the schema attribute, or of ``value`` (a measure's, per row)."""
    out = np.zeros((len(points), len(measured)), dtype=np.int64)
    for j, lq in enumerate(measured):
        hit = lq.query.evaluate(domain, points).astype(np.int64)
        if lq.role == "count":
            out[:, j] = hit
        elif value is not None:
            out[:, j] = hit * np.clip(value, lq.lo, lq.hi)
        else:
            attr = domain[lq.attribute]
            col = points[:, domain.index(lq.attribute)]
            raw = np.where(col == attr.missing_code, 0, attr.lo + col)
            out[:, j] = hit * np.where(col == attr.missing_code, 0,
                                       np.clip(raw, lq.lo, lq.hi))
    return out


def brute_cost(delta: np.ndarray, costs: np.ndarray, p: int) -> float:
    """max over the rows of Δ of Σ_a c_a |Δ_a|^p."""
    return float(np.max(np.abs(delta).astype(np.float64) ** p @ costs))


def counting_cost(delta: np.ndarray, costs: np.ndarray) -> float:
    """The counting strategy's own cost, max_c Σ_a c_a [a ∋ c] (what forgetting M computes)."""
    return float(np.max((delta != 0).astype(np.float64) @ costs))


def check_spend(stated: float, brute: float) -> None:
    """A calibration is right when its stated spend is the brute-force maximum (the levels are
    exact under add/remove) and never below it."""
    assert stated >= brute * (1 - 1e-9), f"stated {stated} below the true cost {brute}"
    assert stated <= brute * (1 + 1e-9), f"stated {stated} above the exact cost {brute}"


SIGNED = ["SELECT SUM(CLAMP(v, -1, 2)) FROM t",
          "SELECT a, SUM(CLAMP(v, -1, 2)), COUNT(*) FROM t GROUP BY a",
          "SELECT a, b, SUM(CLAMP(v, -1, 2)) FROM t GROUP BY a, b",
          "SELECT b, COUNT(*) FROM t GROUP BY b"]


@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("strategy", ["identity", "residual"])
def test_sensitivity_on_h_u_by_brute_force(budget, strategy):
    w = workload_of(DOMAIN, SIGNED)
    plan = sum_strategy_plan(w, budget, strategy=strategy)
    assert plan is not None and all(f.strategy is not None for f in plan.families)
    p = power(budget.calibration)
    delta = contributions(plan.measured, DOMAIN, POINTS)
    brute = brute_cost(delta, plan.costs, p)
    check_spend(float(plan.spent.value), brute)
    assert brute <= float(budget.total) * (1 + 1e-12)
    # the reduction: per family, the cost on h_u is M^p × the counting strategy's cost
    off = plan.offsets()
    for k, f in enumerate(plan.families):
        sl = slice(off[k], off[k + 1])
        fam = brute_cost(delta[:, sl], plan.costs[sl], p)
        assert fam == pytest.approx(f.family.bound ** p * counting_cost(delta[:, sl],
                                                                        plan.costs[sl]))
    # a planted calibration that forgets M (the counting cost alone) is caught
    sums = [k for k, f in enumerate(plan.families) if f.family.role == "sum"]
    planted = sum(counting_cost(delta[:, off[k]:off[k + 1]], plan.costs[off[k]:off[k + 1]])
                  for k in range(len(plan.families)))
    assert sums and plan.families[sums[0]].family.bound > 1
    with pytest.raises(AssertionError, match="below the true cost"):
        check_spend(planted, brute)


@pytest.mark.parametrize("budget", BUDGETS)
def test_person_of_k_rows_by_brute_force(budget):
    w = workload_of(DOMAIN, SIGNED[:3])
    unit = PrivacyUnit.of("pid", 2)
    plan = sum_strategy_plan(w, budget, strategy="residual", unit=unit)
    assert plan is not None
    p = power(budget.calibration)
    delta = multisets(contributions(plan.measured, DOMAIN, POINTS), 2)
    brute = brute_cost(delta, plan.costs, p)
    # K·S (ε) and K²·S (ρ), attained by 2 copies of the worst record
    check_spend(float(plan.spent.value), brute)


@pytest.mark.parametrize("budget", BUDGETS)
def test_measure_sensitivity_every_cell_and_value(budget):
    dom = Domain.from_dict({"attributes": {"a": {"type": "categorical", "values": ["x", "y"]},
                                           "b": {"type": "boolean"}}})
    w = workload_of(dom, ["SELECT a, SUM(CLAMP(m, -2, 3)) FROM t GROUP BY a",
                          "SELECT a, b, SUM(CLAMP(m, -2, 3)) FROM t GROUP BY a, b",
                          "SELECT b, SUM(CLAMP(m, -2, 3)) FROM t GROUP BY b"])
    plan = sum_strategy_plan(w, budget, strategy="residual")
    assert plan is not None
    cells = np.array(list(itertools.product(*(range(s) for s in dom.sizes))), dtype=np.int64)
    e = w.measures["m"]  # the sums are in units of 10^e (the clamp's bounds: -2, 3)
    values = np.concatenate([np.arange(-6, 8) * 10 ** -e, [-1234567, 1, 2999999]])
    pts = np.repeat(cells, len(values), axis=0)
    vals = np.tile(values, len(cells))
    delta = contributions(plan.measured, dom, pts, vals)
    p = power(budget.calibration)
    brute = brute_cost(delta, plan.costs, p)
    check_spend(float(plan.spent.value), brute)
    assert brute == pytest.approx((3 * 10 ** -e) ** p * counting_cost(delta, plan.costs))


# -- unbiased, with the stated variances ------------------------------------------------------
GRID = Domain.from_dict({"attributes": {
    "a": {"type": "categorical", "values": ["x", "y", "z"]},
    "b": {"type": "boolean"},
    "c": {"type": "categorical", "values": ["p", "q"]},
    "v": {"type": "integer", "min": 0, "max": 9},
}})
MARGINAL_SUMS = ["SELECT SUM(v) FROM t",
                 "SELECT a, SUM(v), COUNT(*) FROM t GROUP BY a",
                 "SELECT b, SUM(v) FROM t GROUP BY b",
                 "SELECT a, b, AVG(v) FROM t GROUP BY a, b",
                 "SELECT c, a, SUM(v) FROM t GROUP BY c, a"]  # GROUP BY order ≠ schema order


def grid_data(n: int = 300, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"a": rng.choice(["x", "y", "z"], n, p=[0.5, 0.3, 0.2]),
                         "b": rng.choice([True, False], n),
                         "c": rng.choice(["p", "q"], n, p=[0.7, 0.3]),
                         "v": rng.integers(0, 10, n)})


def z_scores(plan, exact_measured, truth, runs: int, seed: int):
    """(mean answer − truth)/(sd/√runs) of every linear query over seeded runs, and the ratio
    of the empirical to the stated variance."""
    sampler = (discrete_laplace.sample if plan.mechanism == "discrete_laplace"
               else discrete_gaussian.sample)
    source = NoiseSource.seeded(seed)
    draws = np.array([reconstruct(plan, sampler(exact_measured, plan.scales, source).values)
                      .answers for _ in range(runs)])
    stated = reconstruct(plan, exact_measured).variances
    z = (draws.mean(axis=0) - truth) / np.sqrt(stated / runs)
    return z, draws.var(axis=0, ddof=1) / stated


def grid_answers(plan, w):
    """The exact measured sums of ``plan`` and the exact linear answers of ``w`` on the grid
    table (what the seeded runs are compared with)."""
    table = encode(grid_data(), GRID)
    return (exact_linear(GRID, plan.measured, table),
            exact_linear(GRID, w.linear, table).astype(np.float64))


def chi2_limit(m: int) -> float:
    """Σ z² ~ χ²_m for an unbiased estimate with the stated variances: m + 6√(2m), with a fixed
    seed about 4 standard deviations of the χ² above its mean."""
    return m + 6 * np.sqrt(2 * m)


@pytest.mark.parametrize("budget", BUDGETS)
def test_reconstruction_unbiased_with_stated_variances(budget):
    w = workload_of(GRID, MARGINAL_SUMS)
    plan = sum_strategy_plan(w, budget, strategy="auto")
    assert plan is not None and {f.name for f in plan.families} <= {"identity", "residual"}
    exact_measured, truth = grid_answers(plan, w)
    runs = 400
    z, ratio = z_scores(plan, exact_measured, truth, runs, seed=11)
    assert float(z @ z) < chi2_limit(len(z)), z
    # each answer's empirical variance near the stated one (400 runs: sd of the ratio ≈ 0.07)
    assert 0.7 < float(np.median(ratio)) < 1.3
    # a planted bug: the family read back in GROUP BY order instead of the schema's order
    fam = next(k for k, f in enumerate(plan.families) if f.family.role == "sum")
    f = plan.families[fam]
    idx = f.index.copy()
    block = [k for k, i in enumerate(f.family.indices) if w.linear[i].statement == 4]
    idx[block] = idx[np.array(block).reshape(2, 3).T.ravel()]  # (c, a) keys, cells (a, c)
    bad = dataclasses.replace(plan, families=tuple(
        dataclasses.replace(g, index=idx) if k == fam else g
        for k, g in enumerate(plan.families)))
    zb, _ = z_scores(bad, exact_measured, truth, runs, seed=11)
    assert float(zb @ zb) > chi2_limit(len(zb))


# -- auto on all 1- and 2-way GROUP BY sums ---------------------------------------------------
FOUR = Domain.from_dict({"attributes": {
    "region": {"type": "categorical", "values": ["n", "s", "e", "w"]},
    "channel": {"type": "categorical", "values": ["web", "store"]},
    "tier": {"type": "categorical", "values": ["a", "b", "c"]},
    "weekday": {"type": "categorical", "values": ["mo", "tu", "we", "th", "fr", "sa", "su"]},
    "amount": {"type": "integer", "min": 0, "max": 500},
}})
ATTRS = ["region", "channel", "tier", "weekday"]


def marginal_sums(attrs: list[str], summed: str) -> list[str]:
    groups = [[a] for a in attrs] + [list(p) for p in itertools.combinations(attrs, 2)]
    return [f"SELECT {', '.join(g)}, {summed} FROM t GROUP BY {', '.join(g)}" for g in groups]


@pytest.mark.parametrize("budget", BUDGETS)
def test_auto_beats_direct_on_marginal_sums(budget):
    w = workload_of(FOUR, marginal_sums(ATTRS, "SUM(CLAMP(amount, 0, 200))"))
    plan = sum_strategy_plan(w, budget, strategy="auto")
    assert plan is not None and len(plan.families) == 1
    f = plan.families[0]
    expected = dict(f.expected)
    assert f.name != "direct"
    ratio = expected["direct"] / expected[f.name]
    print(f"{budget.text()}: {f.name} expected total variance {ratio:.2f}x below direct")
    assert ratio > 1.5


def test_a_named_strategy_that_does_not_apply_names_the_family():
    w = workload_of(GRID, ["SELECT SUM(v) FROM t WHERE a = 'x'", "SELECT b, COUNT(*) FROM t "
                           "GROUP BY b"])
    with pytest.raises(Exception, match=r"SUM\(CLAMP\(v, 0, 9\)\): strategy 'residual' does "
                                        "not apply"):
        sum_strategy_plan(w, BUDGETS[1], strategy="residual")
