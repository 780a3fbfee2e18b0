"""Paper 1's utility gain, as a statistical test with fixed seeds (bench/bench_answer.py on Adult).

Workload: the four 1-way marginals of a synthetic domain with four attributes of 10 values —
four disjoint partitions, t = 40 queries, every row in exactly one query of each, so γ = 4.
Tessera calibrates b = γ/ε (pure) or σ² = γ/(2ρ) (zCDP); sequential composition needs
b = t/ε or σ² = t/(2ρ). Over many seeded repetitions the ratio MAE_sequential / MAE_tessera
must match the ratio E|Z_seq| / E|Z_tessera| computed from the mechanisms' pmfs within five
standard errors (estimated from the per-repetition MAEs); ≈ t/γ = 10 (pure) or √10 (Gaussian).

The second test plants a bug — a calibration that uses γ − 1 — and checks that the plan's
re-check refuses it and that, forced past the re-check, the same statistical test rejects it.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from tessera import Budget, Domain, count
from tessera.errors import TesseraError
from tessera.mechanisms import NoiseSource, discrete_gaussian, discrete_laplace
from tessera.release import plan as plan_module
from tessera.release.plan import noise_plan
from tessera.workload.builders import marginals

EPSILON, RHO = 1.0, 0.5
REPS = 2000
SIGMAS = 5.0  # tolerance in standard errors

DOMAIN = Domain.from_dict({"a": 10, "b": 10, "c": 10, "d": 10})
WORKLOAD = marginals(DOMAIN, 1)  # 4 partitions of 10 cells: t = 40, γ = 4
BUDGETS = [Budget.of(epsilon=EPSILON), Budget.of(rho=RHO)]


def _exact_answers() -> np.ndarray:
    rng = np.random.default_rng(0)
    data = pd.DataFrame({name: rng.integers(0, 10, size=500) for name in DOMAIN.names})
    return count(data, WORKLOAD).answers


def _mean_abs(mechanism: str, scale: float) -> float:
    """E|Z| from the pmf, summed over |k| ≤ 60·scale + 60 (the tail beyond is < e^{-60})."""
    pmf = discrete_laplace.pmf if mechanism == "discrete_laplace" else discrete_gaussian.pmf
    k = np.arange(-math.ceil(60 * scale) - 60, math.ceil(60 * scale) + 61)
    return float(np.sum(np.abs(k) * pmf(k, scale)))


def _sequential_scale(budget: Budget, t: int) -> float:
    if budget.mechanism == "discrete_laplace":
        return t / EPSILON
    return math.sqrt(t / (2.0 * RHO))


def _observed_ratio(
    budget: Budget, exact: np.ndarray, tessera_scales: np.ndarray, seq_scale: float, seed: int
) -> tuple[float, float]:
    """MAE_seq / MAE_tessera over REPS seeded repetitions, and its standard error (delta
    method on the per-repetition MAEs)."""
    sampler = (discrete_laplace.sample if budget.mechanism == "discrete_laplace"
               else discrete_gaussian.sample)
    values = np.tile(exact, (REPS, 1))
    mae = []
    for i, scales in enumerate((np.tile(tessera_scales, (REPS, 1)),
                                np.full(values.shape, seq_scale))):
        noisy = sampler(values, scales, NoiseSource.seeded(seed + i)).values
        mae.append(np.abs(noisy - values).mean(axis=1))
    m_t, m_s = mae[0].mean(), mae[1].mean()
    rel_se = math.sqrt((mae[0].std(ddof=1) / m_t) ** 2 / REPS
                       + (mae[1].std(ddof=1) / m_s) ** 2 / REPS)
    ratio = m_s / m_t
    return ratio, ratio * rel_se


def _predicted(budget: Budget, tessera_scale: float, seq_scale: float) -> float:
    m = budget.mechanism
    return _mean_abs(m, seq_scale) / _mean_abs(m, tessera_scale)


def test_pmf_mean_abs_matches_closed_form() -> None:
    for b in (0.5, 4.0, 40.0):
        assert _mean_abs("discrete_laplace", b) == pytest.approx(1.0 / math.sinh(1.0 / b),
                                                                 rel=1e-12)
    # the discrete Gaussian's E|Z| is *below* the continuous σ√(2/π): Euler–Maclaurin on
    # Σ_k |k| e^{−k²/(2σ²)} gives σ√(2/π) − 1/(6σ√(2π)) + O(σ^{-3})
    for sigma in (2.0, 10.0):
        approx = sigma * math.sqrt(2 / math.pi) - 1.0 / (6 * sigma * math.sqrt(2 * math.pi))
        assert _mean_abs("discrete_gaussian", sigma) == pytest.approx(approx, rel=1e-3)


@pytest.mark.parametrize("budget", BUDGETS, ids=["pure", "zcdp"])
def test_observed_gain_matches_prediction(budget: Budget) -> None:
    exact = _exact_answers()
    plan = noise_plan(WORKLOAD, budget)
    t = len(WORKLOAD)
    assert t == 40
    assert plan.overlap.exact and plan.overlap.bound == 4.0
    assert np.all(plan.scales == plan.scales[0])
    seq = _sequential_scale(budget, t)
    predicted = _predicted(budget, float(plan.scales[0]), seq)
    # the exact prediction is close to the scale ratio t/γ (pure: 10.10) or √(t/γ) (Gaussian:
    # 3.224 vs 3.162 — at σ = 2 the lattice lowers E|Z| by ≈ 1/(6σ√(2π)), 2% of it)
    nominal = t / 4 if budget.mechanism == "discrete_laplace" else math.sqrt(t / 4)
    assert predicted == pytest.approx(nominal, rel=0.025)
    observed, se = _observed_ratio(budget, exact, plan.scales, seq, seed=11)
    assert se < 0.01 * predicted  # the test has power: 5 SE is well below a 10% error
    assert abs(observed - predicted) <= SIGMAS * se, (observed, predicted, se)


class _PlantedCost:
    """A workload cost whose scales are calibrated with γ − 1 instead of γ (the planted bug)."""

    def __init__(self, real: object) -> None:
        self._real = real
        self.weighted = real.weighted  # type: ignore[attr-defined]
        self.status = real.status  # type: ignore[attr-defined]

    def scales(self, total: float) -> np.ndarray:
        g = float(self.weighted.bound)
        return self._real.scales(total) * (g - 1.0) / g  # type: ignore[attr-defined]


@pytest.mark.parametrize("budget", BUDGETS, ids=["pure", "zcdp"])
def test_planted_gamma_minus_one_is_caught(
    budget: Budget, monkeypatch: pytest.MonkeyPatch
) -> None:
    exact = _exact_answers()
    real_cost = plan_module.workload_cost
    monkeypatch.setattr(plan_module, "workload_cost",
                        lambda *a, **kw: _PlantedCost(real_cost(*a, **kw)))
    # the plan's own re-check refuses to release the over-spending noise
    with pytest.raises(TesseraError, match="re-checks"):
        noise_plan(WORKLOAD, budget, allocation="uniform")
    # forced past the re-check, the statistical test rejects it
    monkeypatch.setattr(plan_module, "recheck_spent",
                        lambda wl, c, n, total, tl, **kw: (total, False))
    planted = noise_plan(WORKLOAD, budget, allocation="uniform")
    t = len(WORKLOAD)
    good_scale = (4.0 / EPSILON if budget.mechanism == "discrete_laplace"
                  else math.sqrt(4.0 / (2.0 * RHO)))
    assert planted.scales[0] < good_scale
    seq = _sequential_scale(budget, t)
    predicted = _predicted(budget, good_scale, seq)
    observed, se = _observed_ratio(budget, exact, planted.scales, seq, seed=11)
    assert abs(observed - predicted) > SIGMAS * se, (observed, predicted, se)
