"""Noise for aggregate statements: per-linear-query scales from the public inputs alone, with
the spend re-checked exactly (docs/theory.md §3.15, docs/aggregates.md).

**Shape.** Each aggregate gets a cost share ∝ its statement's weight w, spread so that its
*worst record* pays that share: a count or sum q with sensitivity M_q = max |g_q| gets the cost
per unit of sensitivity u_q = w / M_q^p (p = 1 under ε, 2 under ρ). An ``AVG(x)`` = S/C splits
its share evenly between its sum and its count (u_S = w/(2M^p), u_C = w/2): with ε_S = c_S·M
and ε_C = c_C the costs of a worst record, the delta-method variance of S/C,
(Var S + μ² Var C)/C², is for |μ| ≤ M at worst M²(Var S/M² + Var C)/C² — under discrete Laplace
Var ∝ 1/c², so it is ∝ 1/ε_S² + 1/ε_C², and under the discrete Gaussian ∝ 1/ρ_S + 1/ρ_C:
both minimised under ε_S + ε_C fixed (ρ_S + ρ_C fixed) at the even split.

**Scale.** With S_u the exact maximum over one change of the unit of Σ_q u_q |Δf_q|^p
(:func:`tessera.release.linear_costs.linear_cost_bound`), the costs c_q = u_q·B/S_u meet the
budget B exactly. The scales b_q = 1/c_q (discrete Laplace) or σ_q = 1/√(2c_q) (discrete
Gaussian) are then what the proof rests on: their costs, rounded up, are re-checked exactly,
and widened by a hair until the re-check proves ≤ B (never released otherwise).

**Counting people** (``unit.count == "people"``, docs/theory.md §3.14 "Aggregates counting
people"): each statement's group counts and sums persons — a count the people with a kept row
in it, a sum their clamped totals — so M_q is what one person moves it (D_q: 1, or
max(|lo|, |hi|)), and S_u is the maximum weighted coverage of K records with the scores
u_q·D_q^p. The same shape, the same even split of an AVG (its mean is per person, |μ| ≤ D).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from tessera.errors import TesseraError
from tessera.mechanisms import discrete_gaussian, discrete_laplace
from tessera.overlap.linear import power, sensitivities
from tessera.privacy import ONE_ROW, Neighbours, PrivacyUnit
from tessera.release.budget import DISCRETE_LAPLACE, Budget
from tessera.release.decimals import decimal_value
from tessera.release.exact_costs import CostBound
from tessera.release.linear_costs import linear_cost_bound
from tessera.release.plan import INTERVAL_LEVEL, unit_costs
from tessera.schema.domain import Domain
from tessera.workload.aggregates import AggregateWorkload, LinearQuery

#: Rounds of widening before a plan that does not re-check is refused.
WIDEN_ROUNDS = 8


@dataclass(frozen=True, eq=False)
class AggregatePlan:
    """Per-linear-query noise: ``scales[q]`` (b_q or σ_q, in units of the answer),
    ``costs[q]`` (c_q per unit of sensitivity, rounded up), ``spent`` (the exact re-check,
    ≤ the total; a person's when ``unit`` is one), ``halfwidths[q]`` (exact 95% half-width of
    the noise), ``bounds[q]`` (M_q)."""

    workload: AggregateWorkload
    linear: tuple[LinearQuery, ...]
    budget: Budget
    neighbours: Neighbours
    unit: PrivacyUnit
    scales: npt.NDArray[np.float64]
    costs: npt.NDArray[np.float64]
    bounds: npt.NDArray[np.int64]
    spent: CostBound
    halfwidths: npt.NDArray[np.int64]

    @property
    def mechanism(self) -> str:
        return self.budget.mechanism

    def variances(self) -> npt.NDArray[np.float64]:
        """The noise variance of every linear query (exact, from the scale)."""
        fn = (discrete_laplace.variance if self.mechanism == DISCRETE_LAPLACE
              else discrete_gaussian.variance)
        return np.array([fn(float(s)) for s in self.scales])


def shape(workload: AggregateWorkload, linear: tuple[LinearQuery, ...],
          bounds: npt.NDArray[np.int64], p: int) -> npt.NDArray[np.float64]:
    """u_q = w/M_q^p, halved for each of an AVG's sum and count (module docstring)."""
    u = np.empty(len(linear))
    for i, lq in enumerate(linear):
        st = workload.statements[lq.statement]
        share = 0.5 if st.aggregates[lq.aggregate].kind == "avg" else 1.0
        if bounds[i] == 0:
            raise TesseraError(
                f"{st.source or st.name}: {st.aggregates[lq.aggregate].label} sums values that "
                "are all 0 after clamping: nothing to measure",
                hint="widen the CLAMP bounds, or drop the aggregate")
        u[i] = share * lq.weight / float(bounds[i]) ** p
    if not np.all(u > 0):
        raise TesseraError("every statement needs a weight > 0",
                           hint="drop the statements that are not to be released")
    return u


def aggregate_plan(workload: AggregateWorkload, budget: Budget, *,
                   neighbours: Neighbours | str = Neighbours.ADD_REMOVE,
                   unit: PrivacyUnit = ONE_ROW,
                   time_limit: float | None = 60.0) -> AggregatePlan:
    """Scales for every linear query of ``workload`` under ``budget`` (module docstring), read
    from the workload and schema alone."""
    n = Neighbours.parse(neighbours)
    d = budget.calibration
    p = power(d)
    domain = workload.cost_domain  # the schema, and each measure's breakpoints
    linear = workload.linear
    bounds = linear_bounds(domain, linear, unit)
    u = shape(workload, linear, bounds, p)
    scales, costs, spent = fit_to_budget(domain, linear, u, budget, neighbours=n, unit=unit,
                                         time_limit=time_limit)
    return AggregatePlan(workload, linear, budget, n, unit, scales, costs, bounds, spent,
                         halfwidths(budget, scales))


def linear_bounds(domain: Domain, linear: Sequence[LinearQuery],
                  unit: PrivacyUnit) -> npt.NDArray[np.int64]:
    """M_q of every linear query: what one row moves it (max |g_q|), or — each person
    counted once per query — what one person moves it under add/remove, D_q = 1 for a count
    and max(|lo|, |hi|) for a sum of the person's clamped total (docs/theory.md §3.14)."""
    if unit.counts_people:
        return np.array([lq.person_bound() for lq in linear], dtype=np.int64)
    return sensitivities(domain, linear)


def fit_to_budget(domain: Domain, linear: Sequence[LinearQuery], u: npt.NDArray[np.float64],
                  budget: Budget, *, neighbours: Neighbours, unit: PrivacyUnit,
                  time_limit: float | None
                  ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], CostBound]:
    """(scales, costs, spent) of the linear queries at costs ∝ ``u`` meeting the budget: the
    exact worst change S_u of the shape, c = u·B/S_u, then the re-check of the rounded costs,
    widened until it proves ≤ B (module docstring); refused if it never does."""
    d = budget.calibration
    n = neighbours
    su = linear_cost_bound(domain, linear, u, definition=d, neighbours=n, unit=unit,
                           time_limit=time_limit)
    if su is None or su.value == 0:
        raise TesseraError("no aggregate of the workload can change with one change of the "
                           f"unit ({unit.label(n)}): nothing to calibrate noise to",
                           hint="check the WHERE clauses (contradictions?); under substitute "
                                "neighbours a total count of rows is public")
    total = decimal_value(budget.total)
    c = u * (float(total) / su.bound)
    grow = 1.0
    for _ in range(WIDEN_ROUNDS):
        scales = as_scales(budget, c / grow)
        costs = unit_costs(budget, scales)
        spent = linear_cost_bound(domain, linear, costs, definition=d, neighbours=n, unit=unit,
                                  time_limit=time_limit, threshold=total)
        assert spent is not None
        if spent.value <= total:
            return scales, costs, spent
        if spent.achieved_value > total and spent.exact:
            grow *= float(spent.achieved_value / total) * (1 + 1e-12)
        else:
            grow *= max(float(spent.value / total), 1.0) * (1 + 1e-9)
    raise TesseraError("the aggregate plan does not re-check within the budget",
                       hint="give the re-check more time (--time-limit)")


def as_scales(budget: Budget, costs: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """b = 1/c (discrete Laplace) or σ = 1/√(2c) (discrete Gaussian), as floats."""
    if budget.mechanism == DISCRETE_LAPLACE:
        return 1.0 / costs
    return 1.0 / np.sqrt(2.0 * costs)


def halfwidths(budget: Budget, scales: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """Exact 95% half-widths of the discrete noise at each scale."""
    fn = (discrete_laplace.interval_halfwidth if budget.mechanism == DISCRETE_LAPLACE
          else discrete_gaussian.interval_halfwidth)
    return np.array([fn(float(s), INTERVAL_LEVEL) for s in scales], dtype=np.int64)


def check_scales(plan: Any) -> None:
    """Every scale of ``plan`` (an :class:`AggregatePlan` or a strategy plan) is finite,
    positive and within the samplers' range (before any charge)."""
    from tessera.mechanisms.batch import MAX_PARAMETER

    bad = np.flatnonzero(~((plan.scales > 0) & (plan.scales <= MAX_PARAMETER)))
    if bad.size:
        k = int(bad[0])
        raise TesseraError(f"linear query {k}: noise scale {plan.scales[k]:.4g} is outside the "
                           "sampler's range (nothing was charged)",
                           hint="raise the budget or narrow the CLAMP bounds")
    if not math.isfinite(float(plan.spent.value)):
        raise TesseraError("the spend is not finite")
