"""A statistical audit of aggregate statements counting people (docs/theory.md §3.14,
"Aggregates counting people"): the release meets its ε on a worst-case pair of data sets —
D₂, and D₁ = D₂ plus one person of K = 3 rows — and two planted bugs are caught
(tessera.audit.estimators: Clopper–Pearson lower bounds on ε, fixed seeds, 20,000 runs a side).

(a) **The per-person clamp skipped**: the engine clamps each row instead of each person's total.
``SUM(CLAMP(v, 0, 2))`` at ε = 1 has b = 2 (D = 2); the added person's three rows of v = 5 move
it by clamp(15) = 2 honestly, by 3·2 = 6 with the bug: a 3-DP mechanism, ε_lb ≈ 2.5 ≫ 1.

(b) **A row's cost instead of the coverage**: three yearly sums, a person with a row in each.
Honestly the person costs the coverage of 3 records, 3·2·c (b = 6); calibrated to one row's
cost, 2·c (b = 2), the three answers move by 2 each at a third of the noise: 3-DP. The event is
"every year's answer ≥ its D₂ answer + τ", whose loss adds over the three.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from tessera.audit.estimators import best_lower_bound
from tessera.data import duckdb_source
from tessera.data.source import encode
from tessera.mechanisms import NoiseSource, discrete_laplace
from tessera.privacy import PrivacyUnit
from tessera.release import linear_costs
from tessera.release.aggregate_plan import aggregate_plan
from tessera.release.aggregates import exact_linear
from tessera.release.budget import Budget
from tessera.schema.domain import Domain
from tessera.workload.aggregates import AggregateWorkload
from tessera.workload.select import parse_statement

DOMAIN = Domain.from_dict({"attributes": {"v": {"type": "integer", "min": 0, "max": 10},
                                          "y": {"type": "integer", "min": 0, "max": 2}}})
UNIT = PrivacyUnit("pid", 3, "people")
RUNS = 20_000
OFFSETS = tuple(range(-2, 14))


def _rows_clamped(self, requests, batch=200):  # the planted bug (a): each row clamped
    out = []
    for cond, value, lo, hi in requests:
        row = self.con.execute(f"SELECT SUM(LEAST(GREATEST({value}, {lo}), {hi})) FILTER "
                               f"(WHERE {cond}) FROM coded").fetchall()[0]
        out.append(0 if row[0] is None else int(row[0]))
    return out


def _epsilon_lb(statements: list[str], person: dict[str, list[int]]) -> float:
    """ε_lb of the release of ``statements`` between D₂ (30 people of one row) and D₁ = D₂ +
    one person (``person``'s rows), events: every answer ≥ its D₂ answer + τ."""
    w = AggregateWorkload(DOMAIN, tuple(parse_statement(s, DOMAIN)[0] for s in statements))
    plan = aggregate_plan(w, Budget.of(epsilon=1.0), unit=UNIT, time_limit=None)
    base = pd.DataFrame({"v": np.arange(30) % 11, "y": np.arange(30) % 3, "pid": np.arange(30)})
    extra = pd.DataFrame({**person, "pid": [99] * len(person["v"])})
    answers = [exact_linear(DOMAIN, plan.linear, encode(frame, DOMAIN, unit=UNIT))
               for frame in (base, pd.concat([base, extra], ignore_index=True))]
    out = [discrete_laplace.sample(np.tile(a, (RUNS, 1)), np.tile(plan.scales, (RUNS, 1)),
                                   NoiseSource.seeded(seed)).values
           for a, seed in zip(answers, (21, 22))]
    s0 = answers[0]
    hits_1 = [int(np.all(out[1] >= s0 + t, axis=1).sum()) for t in OFFSETS]
    hits_2 = [int(np.all(out[0] >= s0 + t, axis=1).sum()) for t in OFFSETS]
    eps, _, _ = best_lower_bound(hits_1, RUNS, hits_2, RUNS)
    return eps


ONE_SUM = ["SELECT SUM(CLAMP(v, 0, 2)) FROM t"]
YEARLY = [f"SELECT SUM(CLAMP(v, 0, 2)) FROM t WHERE y = {y}" for y in range(3)]


def test_person_total_clamped_once_meets_its_epsilon():
    eps = _epsilon_lb(ONE_SUM, {"v": [5, 5, 5], "y": [0, 1, 2]})
    assert eps <= 1.0, eps
    print(f"honest: ε_lb = {eps:.3f}")


def test_rows_clamped_one_by_one_is_caught(monkeypatch):
    monkeypatch.setattr(duckdb_source.EncodedTable, "person_sums", _rows_clamped)
    eps = _epsilon_lb(ONE_SUM, {"v": [5, 5, 5], "y": [0, 1, 2]})
    assert eps > 2.0, eps
    print(f"planted bug (a): ε_lb = {eps:.3f}")


def test_person_covering_three_years_meets_its_epsilon():
    eps = _epsilon_lb(YEARLY, {"v": [2, 2, 2], "y": [0, 1, 2]})
    assert eps <= 1.0, eps
    print(f"honest: ε_lb = {eps:.3f}")


def test_a_rows_cost_instead_of_the_coverage_is_caught(monkeypatch):
    honest = linear_costs.people_linear_cost

    def one_row(*args, **kwargs):  # the planted bug (b): a person costs one record's
        kwargs["unit"] = dataclasses.replace(kwargs["unit"], max_rows=1)
        return honest(*args, **kwargs)

    monkeypatch.setattr(linear_costs, "people_linear_cost", one_row)
    eps = _epsilon_lb(YEARLY, {"v": [2, 2, 2], "y": [0, 1, 2]})
    assert eps > 2.0, eps
    print(f"planted bug (b): ε_lb = {eps:.3f}")


@pytest.mark.parametrize("statements", [ONE_SUM, YEARLY])
def test_the_audited_plans_are_exact(statements):
    """The claims audited are the plans' exact costs (D = 2 per covered statement)."""
    w = AggregateWorkload(DOMAIN, tuple(parse_statement(s, DOMAIN)[0] for s in statements))
    plan = aggregate_plan(w, Budget.of(epsilon=1.0), unit=UNIT, time_limit=None)
    assert plan.spent.exact
    assert plan.scales.tolist() == pytest.approx([2.0 * len(statements)] * len(statements))
