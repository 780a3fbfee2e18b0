"""Audit of a release through a strategy (docs/security.md, "Privacy audits"; docs/theory.md
§10).

The DP output of a strategy release is the noisy answers of the *measured* queries (W's answers
are least-squares post-processing of them), so the audit runs the measured queries as
:func:`tessera.answer` does: the strategy chosen by the library (here a forced
``hierarchical`` tree over the codes of one attribute, for a W of 8 disjoint cells), its own
plan (:func:`tessera.release.strategy_release.strategy_plan`: the strategy's γ_w, its shares,
the re-check), discrete Laplace noise at the plan's scales. D₁ = D₂ + the witness row of the
strategy's γ_w, which moves exactly one group of every tree level by one. Claim: the plan's
certified pure ε. Events: every moved measured query ≥ its D₂ answer + τ (the privacy loss of
the output is Σ 1/b_q exactly there).

Planted bug (``planted=True``): the strategy's queries calibrated with **W's** γ (1: W's cells
are disjoint) instead of the strategy's own γ_w (the number of tree levels, weighted) — every
level then spends the whole budget. The audit must report ε_lb above the claim.
"""

from __future__ import annotations

import dataclasses
from functools import partial

import numpy as np
import pandas as pd

from tessera.audit.cases import AuditCase, Claim, Event, Outputs, source_for
from tessera.calibration.scales import per_query_scales
from tessera.data.counts import count
from tessera.errors import TesseraError
from tessera.mechanisms import discrete_laplace
from tessera.overlap import max_overlap
from tessera.release.budget import Budget
from tessera.release.plan import NoisePlan
from tessera.release.strategy_release import strategy_plan
from tessera.schema.domain import Domain
from tessera.workload.workload import Workload

STRATEGY_SCHEMA = {"attributes": {"a": {"type": "integer", "min": 0, "max": 7}}}
STRATEGY_WORKLOAD = tuple(f"a = {v}" for v in range(8))


@dataclasses.dataclass(frozen=True, eq=False)
class StrategySetup:
    workload: Workload
    measured: Workload
    plan: NoisePlan
    moved: tuple[int, ...]
    answers: tuple[Outputs, Outputs]
    workload_gamma: float


def strategy_setup(epsilon: float = 1.0) -> StrategySetup:
    domain = Domain.from_dict(STRATEGY_SCHEMA)
    workload = Workload.from_sql(list(STRATEGY_WORKLOAD), domain)
    plan, choice = strategy_plan(workload, Budget.of(epsilon=epsilon), neighbours="add-remove",
                                 allocation="auto", strategy="hierarchical", objective="total",
                                 time_limit=30)
    if choice is None or plan.overlap.witness is None or not plan.overlap.exact:
        raise TesseraError("the strategy audit needs an exact γ_w with a witness row")
    measured = plan.workload
    base = pd.DataFrame({"a": np.arange(40) % 8})
    row = pd.DataFrame({a.name: a.decode(np.array([c]))
                        for a, c in zip(domain, plan.overlap.witness.x)})
    first = pd.concat([base, row], ignore_index=True)
    a1 = np.asarray(count(first, measured).answers, dtype=np.int64)
    a2 = np.asarray(count(base, measured).answers, dtype=np.int64)
    moved = np.flatnonzero(a1 != a2)
    if np.any(a1[moved] - a2[moved] != 1):
        raise TesseraError("the witness row does not move its queries by one")
    gamma_w = max_overlap(workload, comp="pure").bound
    return StrategySetup(workload, measured, plan, tuple(int(i) for i in moved), (a1, a2),
                         float(gamma_w))


def planted_strategy_scales(setup: StrategySetup) -> np.ndarray:
    """The scales the strategy's shares get when calibrated with W's γ (the planted bug)."""
    ov = setup.plan.overlap
    doctored = dataclasses.replace(ov, score_bound=setup.workload_gamma,
                                   score_achieved=min(ov.score_achieved, setup.workload_gamma))
    return per_query_scales(doctored, setup.measured.weight_array(), setup.plan.total)


def _run(answers: tuple[Outputs, Outputs], scales: np.ndarray, which: int, trials: int,
         seed: int | None) -> Outputs:
    a = answers[which]
    noisy = discrete_laplace.sample(np.tile(a, trials), np.tile(scales, trials),
                                    source_for(seed, 18, which))
    return np.asarray(noisy.values, dtype=np.int64).reshape(trials, a.size)


def strategy_release_case(epsilon: float = 1.0, planted: bool = False) -> AuditCase:
    setup = strategy_setup(epsilon)
    plan = setup.plan
    scales = planted_strategy_scales(setup) if planted else plan.scales
    moved = np.array(setup.moved)
    base = setup.answers[1][moved]
    events = []
    for tau in (1, 2, 3):
        def test(y: Outputs, tau: int = tau) -> np.ndarray:
            return np.all(np.asarray(y)[:, moved] >= base + tau, axis=1)
        events.append(Event(f"every moved tree node ≥ q(D₂) + {tau}", test))
    claim = Claim(plan.spent, 0.0, f"pure ε-DP from the strategy's plan: γ_w = "
                                   f"{plan.overlap.bound:.6g} (exact), re-checked")
    return AuditCase(
        "strategy release (hierarchical, its own γ_w)", claim,
        f"{setup.measured.n_queries} measured tree nodes for 8 cells; D₁ = D₂ + the witness row",
        partial(_run, setup.answers, np.asarray(scales)), tuple(events),
        planted="strategy calibrated with the workload's γ" if planted else None)
