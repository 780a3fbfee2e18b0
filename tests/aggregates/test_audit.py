"""A statistical audit of clamped sums: the release meets its ε on a worst-case pair, and a
planted bug — the engine summing raw values, without the clamp the noise was calibrated to —
is caught (tessera.audit.estimators: Clopper–Pearson lower bounds on ε, fixed seeds).

Schema v ∈ 0..10, ``SUM(CLAMP(v, 0, 2))`` at ε = 1: the plan's scale is b = 2 (M = 2). D and
D' differ by one record with v = 10. Honest: the sums differ by 2, the true ε is 1 and no event
can prove more (the lower bound holds with probability 0.95 over the runs; seeds are fixed).
Bug: they differ by 10, the mechanism is 5-DP, and the event "output ≥ sum(D) + 6" has
log-ratio ≈ 3.6; with 20,000 runs a side the Clopper–Pearson bound's shortfall is ≈ 0.2
(:func:`tessera.audit.estimators.expected_shortfall`), far from the claimed 1.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tessera.audit.estimators import best_lower_bound
from tessera.data.source import encode
from tessera.mechanisms import NoiseSource, discrete_laplace
from tessera.release import aggregates as release_aggregates
from tessera.release.aggregate_plan import aggregate_plan
from tessera.release.budget import Budget
from tessera.schema.domain import Domain
from tessera.workload.aggregates import AggregateWorkload, LinearQuery
from tessera.workload.select import parse_statement

DOMAIN = Domain.from_dict({"attributes": {"v": {"type": "integer", "min": 0, "max": 10}}})
RUNS = 20_000
OFFSETS = tuple(range(-4, 12))


def _unclamped(self: LinearQuery, domain: Domain) -> list[tuple[int, int]]:
    attr = domain[self.attribute]
    return [(c, attr.lo + c) for c in range(attr.n_values) if attr.lo + c != 0]


def _epsilon_lb(tmp_path, planted: bool, monkeypatch) -> float:
    w = AggregateWorkload(DOMAIN, (parse_statement("SELECT SUM(CLAMP(v, 0, 2)) FROM t",
                                                   DOMAIN)[0],))
    plan = aggregate_plan(w, Budget.of(epsilon=1.0), time_limit=None)
    assert plan.scales[0] == pytest.approx(2.0)
    base = pd.DataFrame({"v": [1, 3, 0, 7, 2]})
    paths = []
    for name, frame in (("d", base), ("d2", pd.concat([base, pd.DataFrame({"v": [10]})]))):
        p = tmp_path / f"{name}.csv"
        frame.to_csv(p, index=False)
        paths.append(p)
    if planted:
        monkeypatch.setattr(LinearQuery, "values", _unclamped)
    sums = [int(release_aggregates.exact_linear(DOMAIN, plan.linear,
                                                encode(str(p), DOMAIN))[0]) for p in paths]
    out = [discrete_laplace.sample(np.full(RUNS, s, dtype=np.int64), plan.scales[0],
                                   NoiseSource.seeded(seed)).values
           for s, seed in zip(sums, (11, 12))]
    s0 = sums[0]
    hits_1 = [int((out[1] >= s0 + k).sum()) for k in OFFSETS]
    hits_2 = [int((out[0] >= s0 + k).sum()) for k in OFFSETS]
    eps, _, _ = best_lower_bound(hits_1, RUNS, hits_2, RUNS)
    return eps


def test_clamped_sum_meets_its_epsilon(tmp_path, monkeypatch):
    eps = _epsilon_lb(tmp_path, False, monkeypatch)
    assert eps <= 1.0, eps
    print(f"honest: ε_lb = {eps:.3f}")


def test_sum_without_clamp_is_caught(tmp_path, monkeypatch):
    eps = _epsilon_lb(tmp_path, True, monkeypatch)
    assert eps > 2.5, eps
    print(f"planted bug: ε_lb = {eps:.3f}")
