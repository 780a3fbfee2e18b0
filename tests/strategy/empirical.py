"""Shared by the strategy tests: the empirical mean squared error of seeded releases of a
chosen strategy against its claimed (exact) variances."""

from __future__ import annotations

import pandas as pd

from tessera.data.counts import count
from tessera.mechanisms import NoiseSource, discrete_gaussian
from tessera.release import Budget
from tessera.release.strategy_release import noise_variances, strategy_plan
from tessera.strategy.candidates import Strategy
from tessera.workload.workload import Workload


def mse_ratio(wl: Workload, data: pd.DataFrame, strategy: str, rho: float,
              runs: int) -> tuple[float, Strategy]:
    """(Σ_q mean over ``runs`` seeded releases of (estimate − truth)²) / Σ_q claimed Var_q,
    and the strategy. Its expectation is 1; each run's sum is a Gaussian quadratic form of
    relative sd ≤ √2, so the mean of ``runs`` has relative sd ≤ √(2/runs)."""
    plan, choice = strategy_plan(wl, Budget.of(rho=rho), neighbours="add-remove",
                                 allocation="auto", strategy=strategy, objective="total",
                                 time_limit=60)
    assert choice is not None
    s = choice.chosen
    exact = count(data, s.measured).answers
    truth = count(data, wl).answers.astype(float)
    var = noise_variances(plan)
    _, v = s.estimate(exact, var)
    sq = 0.0
    for seed in range(runs):
        noisy = discrete_gaussian.sample(exact, plan.scales, NoiseSource.seeded(seed)).values
        est, _ = s.estimate(noisy, var)
        sq += float(((est - truth) ** 2).sum())
    return sq / runs / float(v.sum()), s
