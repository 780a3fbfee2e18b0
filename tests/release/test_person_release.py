"""Releases at the person level (docs/theory.md §3.13): the noise of every strategy grows by K
(the Laplace scale b under pure ε, the Gaussian σ under zCDP) against the same release at the
row level, the proven spend stays within the budget, the guarantees name the person, and what
is counted is the bounded data."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tessera.data.counts import count
from tessera.errors import DataWarning
from tessera.privacy import Neighbours, PrivacyUnit
from tessera.release.answering import answer
from tessera.release.budget import Budget
from tessera.release.strategy_release import strategy_plan
from tessera.schema.domain import Domain
from tessera.workload.builders import marginal_families
from tessera.workload.workload import Workload

DOMAIN = Domain.from_dict({"attributes": {
    "a": {"type": "integer", "min": 0, "max": 7},
    "b": {"type": "categorical", "values": ["x", "y", "z"]},
    "c": {"type": "integer", "min": 0, "max": 3},
}})
WORKLOADS = {
    "predicates": lambda: Workload.from_sql(
        ["a < 2", "a >= 1 AND b = 'x'", "b = 'x'", "c = 1", "a > 5 AND c < 2"], DOMAIN),
    "marginals": lambda: marginal_families(DOMAIN, 2),
    "ranges": lambda: Workload.from_sql(
        [f"a BETWEEN {i} AND {j}" for i in range(8) for j in range(i, 8)], DOMAIN),
}


def table(seed: int = 0, n: int = 500) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"a": rng.integers(0, 8, n), "b": rng.choice(["x", "y", "z"], n),
                         "c": rng.integers(0, 4, n), "pid": rng.integers(0, 60, n)})


@pytest.mark.parametrize("name", sorted(WORKLOADS))
@pytest.mark.parametrize("budget", [Budget.of(epsilon=1.0), Budget.of(rho=0.5)],
                         ids=["pure", "zcdp"])
@pytest.mark.parametrize("neighbours", ["add-remove", "substitute"])
def test_noise_grows_by_k(name: str, budget: Budget, neighbours: str) -> None:
    """Every measured query's b (pure) or σ (zCDP) is K times the row-level one: the same
    strategy, its γ_w K·γ (pure) or its score K²·S (zCDP)."""
    k = 3
    wl = WORKLOADS[name]()
    kw = {"neighbours": neighbours, "allocation": "auto", "strategy": "auto",
          "objective": "total", "time_limit": 30.0}
    row, row_choice = strategy_plan(wl, budget, **kw)
    person, person_choice = strategy_plan(wl, budget, unit=PrivacyUnit("pid", k), **kw)
    assert (row_choice is None) == (person_choice is None)
    if row_choice is not None:
        assert row_choice.chosen.name == person_choice.chosen.name
    released = np.isfinite(row.scales)
    np.testing.assert_allclose(person.scales[released] / row.scales[released], k, rtol=1e-12)
    assert person.spent <= budget.total and person.unit == PrivacyUnit("pid", k)
    assert person.overlap.bound == pytest.approx(
        (k if budget.calibration.value == "pure" else k * k) * row.overlap.bound, rel=1e-12)
    g = person.guarantees()[0]
    assert g.unit == person.unit and "one person (privacy id 'pid', at most 3 rows" in g.text()


def test_substituting_a_person_pays_the_total_count() -> None:
    """The number of rows is not public when a person is substituted: the tautology costs a
    person K (row substitution: nothing), so its noise is that of add/remove."""
    wl = Workload.from_sql(["TRUE", "a < 4"], DOMAIN)
    budget = Budget.of(epsilon=1.0)
    unit = PrivacyUnit("pid", 2)
    sub, _ = strategy_plan(wl, budget, neighbours="substitute", allocation="uniform",
                           strategy="auto", objective="total", time_limit=30.0, unit=unit)
    add, _ = strategy_plan(wl, budget, neighbours="add-remove", allocation="uniform",
                           strategy="auto", objective="total", time_limit=30.0, unit=unit)
    assert sub.overlap.bound == add.overlap.bound == 4.0  # K · max(S_ar = 2, S_sub = 1)
    np.testing.assert_allclose(sub.scales, add.scales)


def test_a_person_release_counts_the_bounded_rows() -> None:
    """What is counted is the bounded table: at ε = 100 (b = K·γ/ε ≤ 0.1: a draw of the
    discrete Laplace is 0 but with probability ~1e-4) the seeded answers are the bounded
    counts, far from the unbounded ones."""
    frame = table(1)
    wl = WORKLOADS["predicates"]()
    unit = PrivacyUnit("pid", 2)
    exact = count(frame, wl, unit=unit).answers
    with pytest.warns(DataWarning, match="does not declare.*'pid'"):  # read without the unit
        unbounded = count(frame, wl, extra_columns="ignore").answers
    assert np.all(exact <= unbounded) and np.all(unbounded - exact >= 20)
    rel = answer(frame, wl, Budget.of(epsilon=100.0), unit=unit, seed=5, allocation="uniform")
    assert rel.plan.unit == unit and float(rel.plan.scales.max()) <= 0.1
    assert np.array_equal(rel.noisy, exact)


def test_unit_in_guarantee_dict() -> None:
    wl = WORKLOADS["predicates"]()
    plan, _ = strategy_plan(wl, Budget.of(rho=0.1), neighbours=Neighbours.ADD_REMOVE,
                            allocation="uniform", strategy="auto", objective="total",
                            time_limit=30.0, unit=PrivacyUnit("pid", 4))
    d = plan.guarantees()[0].to_dict()
    assert d["privacy_unit"] == {"id_column": "pid", "max_rows": 4}
    assert d["neighbours"].startswith("add/remove one person")
