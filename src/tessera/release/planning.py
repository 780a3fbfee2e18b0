"""``tessera plan``: the expected error of a release before any data is read
(docs/theory.md §10).

:func:`plan_release` chooses the strategy exactly as :func:`tessera.answer` would
(:mod:`tessera.strategy`), and reports every candidate's γ_w and expected error, the chosen one's
expected RMSE and 95% half-width per query (normal approximation, continuous noise model:
σ² for the discrete Gaussian, 2b² for the discrete Laplace, upper bounds on the discrete
variances) and in total.

Target error. Every candidate's noise scales with the budget in one way — each measured query's
cost is its share of the total, so Var ∝ 1/ρ (zCDP) or 1/ε² (pure ε) with the strategy and
its allocation unchanged (the chooser's ranking does not depend on the total) — so the
smallest total meeting an expected error E (the RMSE over W's queries for ``objective='total'``,
the largest query's RMSE for ``'max'``) is total × (err/E)² (ρ) or total × err/E (ε). An
(ε, δ) target converts ρ to ε at the same δ by bisection (ρ(ε, δ) is increasing in ε).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from tessera.accounting.zcdp import bisect, epsilon_for_delta, rho_for_epsilon_delta
from tessera.errors import TesseraError
from tessera.overlap import OverlapResult, max_overlap
from tessera.privacy import ONE_ROW, Definition, Neighbours, PrivacyUnit
from tessera.release.budget import Budget
from tessera.release.strategy_release import Z95
from tessera.strategy.choose import StrategyChoice, choose_strategy
from tessera.workload.workload import Workload


@dataclass(frozen=True, eq=False)
class ReleasePlan:
    """The strategy ``answer`` would measure, its expected errors, and (with a target) the
    smallest budget meeting it (``needed``; ``error`` is the objective's expected error)."""

    budget: Budget
    neighbours: Neighbours
    choice: StrategyChoice
    error: float
    target_error: float | None = None
    needed: Budget | None = None
    unit: PrivacyUnit = ONE_ROW
    #: with a privacy id: what one person costs when each query counts rows (K·γ) and when it
    #: counts people (the coverage of K rows), for W's queries (:func:`person_costs`)
    person_costs: PersonCosts | None = None

    @property
    def rmse(self) -> npt.NDArray[np.float64]:
        """Expected RMSE of every query of W (chosen strategy)."""
        return np.sqrt(self.choice.chosen.expected)

    @property
    def halfwidths(self) -> npt.NDArray[np.float64]:
        return Z95 * self.rmse

    def to_dict(self, max_queries: int = 1000) -> dict[str, Any]:
        wl = self.choice.chosen.workload
        names = wl.all_names()
        queries = [{"name": next(names), "rmse": float(r), "halfwidth95": float(h)}
                   for r, h in zip(self.rmse[:max_queries], self.halfwidths[:max_queries])]
        return {
            "budget": self.budget.to_dict(), "neighbours": self.neighbours.value,
            **({} if self.unit.is_row else {"privacy_unit": self.unit.to_dict()}),
            "objective": self.choice.objective, "chosen": self.choice.chosen.name,
            "expected_error": self.error,
            "candidates": self.choice.table(),
            "queries": queries, "queries_listed": len(queries), "queries_total": wl.n_queries,
            "target_error": self.target_error,
            "needed_budget": None if self.needed is None else self.needed.to_dict(),
            **({} if self.person_costs is None
               else {"person_costs": self.person_costs.to_dict()}),
        }


@dataclass(frozen=True)
class PersonCosts:
    """What one person of at most K rows costs W's released queries (weight > 0, each with
    unit weight: the uniform split's γ_w) under both measurements: ``rows`` — each query
    counts the person's kept rows (γ_w = K·γ under ε, score K²·S under ρ; docs/theory.md
    §3.13) — and ``people`` — each query counts the person once (the maximum weighted coverage
    of K rows, docs/theory.md §3.14). The two measure different quantities (rows against
    people), so neither replaces the other: the curator chooses with ``--count``; these are
    the figures to choose with (the noise scale of every query grows with γ_w: b ∝ γ_w under
    ε, σ ∝ √score under ρ)."""

    rows: OverlapResult
    people: OverlapResult

    def to_dict(self) -> dict[str, Any]:
        return {kind: {"gamma_w": r.bound, "score": r.score_bound, "exact": r.exact,
                       "method": r.method}
                for kind, r in (("rows", self.rows), ("people", self.people))}


def person_costs(workload: Workload, definition: Definition, neighbours: Neighbours,
                 unit: PrivacyUnit, time_limit: float | None = 60.0) -> PersonCosts:
    """:class:`PersonCosts` of ``workload`` for ``unit``'s id and K (no data)."""
    released = (workload.weight_array() > 0).astype(np.float64)
    share = None if time_limit is None else time_limit / 2
    rows, people = (max_overlap(workload, released, comp=definition, neighbours=neighbours,
                                time_limit=share,
                                unit=PrivacyUnit(unit.id_column, unit.max_rows, count))
                    for count in ("rows", "people"))
    return PersonCosts(rows, people)


def objective_error(choice: StrategyChoice) -> float:
    """RMSE over W's released queries (``total``) or the largest query's RMSE (``max``)."""
    s = choice.chosen
    w = s.workload.weight_array()
    v = s.expected[w > 0]
    return math.sqrt(float(np.max(v)) if choice.objective == "max" else float(np.mean(v)))


def plan_release(
    workload: Workload, budget: Budget, *, neighbours: Neighbours | str = Neighbours.ADD_REMOVE,
    strategy: str = "auto", objective: str = "total", target_error: float | None = None,
    time_limit: float | None = 60.0, unit: PrivacyUnit = ONE_ROW,
) -> ReleasePlan:
    """The plan of a release of ``workload`` under ``budget`` (module docs); no data.
    ``unit``: one row, or one person of at most K rows (every error K times a row's when
    counting rows; counting people, the coverage's), with both of a person's costs
    (:func:`person_costs`)."""
    rel = Neighbours.parse(neighbours)
    choice = choose_strategy(workload, budget.calibration, budget.total, neighbours=rel,
                             strategy=strategy, objective=objective, time_limit=time_limit,
                             compare=True, unit=unit)
    err = objective_error(choice)
    needed = None
    if target_error is not None:
        if not (math.isfinite(target_error) and target_error > 0):
            raise TesseraError(f"target error {target_error!r} must be a number > 0")
        needed = budget_for(budget, err / target_error)
    costs = (None if unit.is_row else
             person_costs(workload, budget.calibration, rel, unit, time_limit))
    return ReleasePlan(budget, rel, choice, err, target_error, needed, unit, costs)


def budget_for(budget: Budget, ratio: float) -> Budget:
    """The budget whose expected errors are ``1/ratio`` × those under ``budget``."""
    d = budget.definition
    if d is Definition.PURE:
        return Budget.of(epsilon=float(budget.epsilon) * ratio)  # type: ignore[arg-type]
    rho = budget.total * ratio * ratio
    if d is Definition.ZCDP:
        return Budget.of(rho=rho)
    if d is Definition.GDP:
        return Budget.of(mu=math.sqrt(2.0 * rho))
    delta = float(budget.delta)  # type: ignore[arg-type]
    return Budget.of(epsilon=epsilon_reaching(rho, delta), delta=delta)


def epsilon_reaching(rho: float, delta: float) -> float:
    """The smallest ε found (to 1e-12 relative, rounded up) whose (ε, δ) budget calibrates as
    at least ρ-zCDP: ``rho_for_epsilon_delta(ε, δ) ≥ rho`` holds at the ε returned, so its
    errors are at most those of ρ (docs/theory.md §3, §7).

    ρ(·, δ) is the inverse of ε(ρ, δ) (:func:`epsilon_for_delta`) up to its bisections' 1e-12,
    so the bracket starts 1e-9 either side of ε(ρ, δ) (widened until it brackets) and the
    bisection keeps the end that meets ρ; each step is one ρ(ε, δ) conversion (itself nested
    bisections), so a tight start saves most of them."""
    guess = epsilon_for_delta(rho, delta)
    if guess > 0.0:
        lo, hi = guess * (1.0 - 1e-9), guess * (1.0 + 1e-9)
    else:  # (tiny ρ: ε = 0 already meets δ)
        lo, hi = 0.0, 1.0
    while rho_for_epsilon_delta(hi, delta) < rho:
        lo, hi = hi, 2.0 * hi
    while lo > 0.0 and rho_for_epsilon_delta(lo, delta) >= rho:
        lo, hi = 0.5 * lo, lo
    # below(ε) ⇔ ε's budget is short of ρ: true at lo (or lo = 0), false at hi; keep hi
    return bisect(lambda e: e <= 0.0 or rho_for_epsilon_delta(e, delta) < rho, lo, hi)[1]
