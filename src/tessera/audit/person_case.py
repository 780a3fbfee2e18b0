"""Audit of a release whose unit of privacy is one person (docs/security.md, "Privacy audits";
docs/theory.md §3.13).

The audit workload of :func:`~.cases.workload_release_case` (γ = 3) answered as
:func:`tessera.answer` answers it for a person of at most K rows: the library's plan
(:func:`tessera.release.plan.noise_plan` with ``unit`` = ``PrivacyUnit("pid", K)``: γ_w = K·γ,
b = Kγ/ε, re-checked), the data bounded by the engine (:func:`tessera.data.counts.count` with
the unit: at most K rows of each person, by the hash rule), discrete Laplace noise at the
plan's scales. D₂: 40 people of one row each; D₁ = D₂ + one person with 2K copies of the
witness row of γ. Bounding keeps K of them, so exactly the γ witness queries move, each by K.
Claim: the plan's certified pure ε for a person. Events: every witness query ≥ its D₂ answer
+ τ for τ ≥ K, where the privacy loss of the output, Σ_w K/b, is ε exactly.

Planted bug (``planted=True``): **bounding skipped** — D₁ counted with all 2K rows of the
person (a row-level count) at the same, person-calibrated noise: the witness queries move by
2K and the privacy loss is 2ε. The audit must report ε_lb above the claim.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np
import numpy.typing as npt
import pandas as pd

from tessera.audit.cases import (
    AUDIT_SCHEMA,
    AUDIT_WORKLOAD,
    AuditCase,
    Claim,
    Event,
    Outputs,
    source_for,
)
from tessera.data.counts import count
from tessera.errors import TesseraError
from tessera.mechanisms import discrete_laplace
from tessera.privacy import PrivacyUnit
from tessera.release.budget import Budget
from tessera.release.plan import NoisePlan, noise_plan
from tessera.schema.domain import Domain
from tessera.workload.workload import Workload

__all__ = ["PersonSetup", "person_release_case", "person_setup"]

#: The most rows one person keeps in the audit (the person added to D₂ has twice as many).
AUDIT_MAX_ROWS = 3


@dataclass(frozen=True, eq=False)
class PersonSetup:
    """The audited workload, its person-level plan, the witness queries and the exact answers
    on D₁ (bounded, and — for the planted bug — unbounded) and D₂."""

    workload: Workload
    plan: NoisePlan
    witness: tuple[int, ...]
    answers: tuple[Outputs, Outputs]
    unbounded: Outputs
    max_rows: int


def person_setup(epsilon: float = 1.0, max_rows: int = AUDIT_MAX_ROWS) -> PersonSetup:
    """Plan the audit workload for a person of at most ``max_rows`` rows (pure ``epsilon``,
    add/remove one person), and count D₂ (40 people, one row each) and D₁ = D₂ + a person with
    2K copies of the witness row, through the engine's bounding; checks that exactly the
    witness queries move, by K (by 2K without bounding)."""
    domain = Domain.from_dict(AUDIT_SCHEMA)
    workload = Workload.from_sql(list(AUDIT_WORKLOAD), domain)
    unit = PrivacyUnit("pid", max_rows)
    plan = noise_plan(workload, Budget.of(epsilon=epsilon), allocation="uniform", unit=unit)
    witness = plan.overlap.witness
    if witness is None or not plan.overlap.exact:
        raise TesseraError("the audit workload needs an exact γ with a witness row")
    ages = np.arange(40) % 10
    base = pd.DataFrame({"age": ages, "sex": np.where(np.arange(40) % 3 == 0, "M", "F"),
                         "pid": np.arange(40)})
    row = {a.name: a.decode(np.array([c]))[0] for a, c in zip(domain, witness.x)}
    person = pd.DataFrame([row | {"pid": 1000}] * (2 * max_rows))
    first = pd.concat([base, person], ignore_index=True)
    a1 = np.asarray(count(first, workload, unit=unit).answers, dtype=np.int64)
    a2 = np.asarray(count(base, workload, unit=unit).answers, dtype=np.int64)
    raw = np.asarray(count(first.drop(columns=["pid"]), workload).answers,  # unbounded
                     dtype=np.int64)
    moved = np.flatnonzero(a1 != a2)
    if (tuple(moved) != tuple(sorted(witness.queries)) or np.any(a1[moved] - a2[moved] != max_rows)
            or np.any(raw[moved] - a2[moved] != 2 * max_rows)):
        raise TesseraError("the person does not move exactly the witness queries by K")
    return PersonSetup(workload, plan, tuple(sorted(witness.queries)), (a1, a2), raw, max_rows)


def _run(answers: tuple[Outputs, Outputs], scales: npt.NDArray[np.float64], which: int,
         trials: int, seed: int | None) -> Outputs:
    """``trials`` releases of the workload, discrete Laplace at the plan's scales, one call."""
    a = answers[which]
    noisy = discrete_laplace.sample(np.tile(a, trials), np.tile(scales, trials),
                                    source_for(seed, 12, which))
    return np.asarray(noisy.values, dtype=np.int64).reshape(trials, a.size)


def person_release_case(epsilon: float = 1.0, max_rows: int = AUDIT_MAX_ROWS,
                        planted: bool = False) -> AuditCase:
    """The audit workload released for a person of at most ``max_rows`` rows (module docs);
    ``planted``: D₁ counted without bounding (the claim stays the honest one)."""
    setup = person_setup(epsilon, max_rows)
    plan, k = setup.plan, max_rows
    answers = (setup.unbounded if planted else setup.answers[0], setup.answers[1])
    w = np.array(setup.witness)
    base = setup.answers[1][w]
    events = []
    for tau in range(k, k + 4):
        def test(y: Outputs, tau: int = tau) -> npt.NDArray[np.bool_]:
            return np.all(np.asarray(y)[:, w] >= base + tau, axis=1)
        events.append(Event(f"all {w.size} witness queries ≥ q(D₂) + {tau}", test))
    gamma = plan.overlap.bound
    claim = Claim(plan.spent, 0.0, f"pure ε-DP for one person of ≤ {k} rows: γ_w = {gamma:g} "
                                   f"= {k} × γ, b = {plan.scales[0]:.6g}, re-checked")
    return AuditCase(
        f"person release (K = {k})", claim,
        f"D₁ = D₂ + one person of {2 * k} copies of the witness row (bounded to {k})",
        partial(_run, answers, np.asarray(plan.scales)), tuple(events),
        planted="bounding skipped" if planted else None)
