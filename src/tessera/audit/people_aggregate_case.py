"""Audit of aggregate statements counting people (docs/security.md, "Privacy audits";
docs/theory.md §3.14, "Aggregates counting people").

Sums of v ∈ 0..10 clamped to [0, 2], counted per person (``PrivacyUnit("pid", 3, "people")``:
at most K = 3 rows a person, each group summing every person's total there, clamped once),
planned by :func:`tessera.release.aggregate_plan.aggregate_plan` at pure ε = 1 and computed by
the engine (:func:`tessera.release.aggregates.exact_linear` on DuckDB, bounding included),
discrete Laplace noise at the plan's scales. D₂: 30 people of one row each; D₁ = D₂ + one
person. Events: every group the person moves ≥ its D₂ answer + τ, whose privacy loss is the
claim exactly for τ ≥ the move.

* ``one group``: ``SELECT SUM(CLAMP(v, 0, 2)) FROM t``, b = 2 (D = 2); the person's three rows
  of v = 5 move it by clamp(15) = 2. Planted **per-row clamp**: D₁ summed by rows, each clamped
  (2 + 2 + 2 = 6, at the same noise): 3ε.
* ``three years``: ``… WHERE y = Y`` for Y = 0, 1, 2, b = 6 (the coverage of 3 records at
  D = 2); the person's rows (v = 2 in each year) move each sum by 2. Planted **a row's cost**:
  the scales of the plan for one record (K = 1: b = 2) released with the honest claim: 3ε.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np
import numpy.typing as npt
import pandas as pd

from tessera.audit.cases import AuditCase, Claim, Event, Outputs, source_for
from tessera.data.source import encode
from tessera.errors import TesseraError
from tessera.mechanisms import discrete_laplace
from tessera.privacy import PrivacyUnit
from tessera.release.aggregate_plan import AggregatePlan, aggregate_plan
from tessera.release.aggregates import exact_linear
from tessera.release.budget import Budget
from tessera.schema.domain import Domain
from tessera.workload.aggregates import AggregateWorkload
from tessera.workload.select import parse_statement

__all__ = ["KINDS", "PeopleSumSetup", "people_sum_case", "people_sum_setup"]

#: The most rows one person keeps in the audit.
AUDIT_MAX_ROWS = 3
SCHEMA = {"attributes": {"v": {"type": "integer", "min": 0, "max": 10},
                         "y": {"type": "integer", "min": 0, "max": 2}}}
#: The two workloads (module docs): statements, the added person's rows, the planted bug.
KINDS: dict[str, tuple[tuple[str, ...], dict[str, list[int]], str]] = {
    "one group": (("SELECT SUM(CLAMP(v, 0, 2)) FROM t",), {"v": [5, 5, 5], "y": [0, 1, 2]},
                  "per-row clamp"),
    "three years": (tuple(f"SELECT SUM(CLAMP(v, 0, 2)) FROM t WHERE y = {y}" for y in range(3)),
                    {"v": [2, 2, 2], "y": [0, 1, 2]}, "a row's cost"),
}


@dataclass(frozen=True, eq=False)
class PeopleSumSetup:
    """The audited plan, the moved groups and the exact answers on D₁ and D₂ — and, for the
    planted bugs, D₁ summed by rows and the scales of a one-record plan."""

    plan: AggregatePlan
    moved: tuple[int, ...]
    answers: tuple[Outputs, Outputs]
    by_rows: Outputs
    row_scales: npt.NDArray[np.float64]


def people_sum_setup(kind: str, epsilon: float = 1.0) -> PeopleSumSetup:
    """Plan and count ``kind``'s workload (module docs) on D₁ and D₂ through the engine; checks
    that the person moves every group by 2 (by rows, a group of three rows by 6)."""
    statements, person, _ = KINDS[kind]
    domain = Domain.from_dict(SCHEMA)
    w = AggregateWorkload(domain, tuple(parse_statement(s, domain)[0] for s in statements))
    unit = PrivacyUnit("pid", AUDIT_MAX_ROWS, "people")
    plan = aggregate_plan(w, Budget.of(epsilon=epsilon), unit=unit, time_limit=None)
    if not plan.spent.exact:
        raise TesseraError("the audit workload needs an exact person cost")
    one_row = aggregate_plan(w, Budget.of(epsilon=epsilon),
                             unit=PrivacyUnit("pid", 1, "people"), time_limit=None)
    base = pd.DataFrame({"v": np.arange(30) % 11, "y": np.arange(30) % 3, "pid": np.arange(30)})
    first = pd.concat([base, pd.DataFrame({**person, "pid": [99] * len(person["v"])})],
                      ignore_index=True)
    a1, a2 = (np.asarray(exact_linear(domain, plan.linear, encode(f, domain, unit=unit)),
                         dtype=np.int64) for f in (first, base))
    rows = np.asarray(exact_linear(domain, plan.linear, encode(
        first, domain, unit=PrivacyUnit("pid", AUDIT_MAX_ROWS))), dtype=np.int64)
    moved = tuple(int(i) for i in np.flatnonzero(a1 != a2))
    if len(moved) != len(statements) or np.any(a1 - a2 != 2):
        raise TesseraError("the person does not move every group by 2")
    return PeopleSumSetup(plan, moved, (a1, a2), rows, np.asarray(one_row.scales))


def _run(answers: tuple[Outputs, Outputs], scales: npt.NDArray[np.float64], key: int,
         which: int, trials: int, seed: int | None) -> Outputs:
    """``trials`` releases, discrete Laplace at ``scales``, one call."""
    a = answers[which]
    noisy = discrete_laplace.sample(np.tile(a, trials), np.tile(scales, trials),
                                    source_for(seed, key, which))
    return np.asarray(noisy.values, dtype=np.int64).reshape(trials, a.size)


def people_sum_case(kind: str = "three years", epsilon: float = 1.0,
                    planted: bool = False) -> AuditCase:
    """``kind``'s release for a person of at most 3 rows counted once per group (module docs);
    ``planted``: its bug (the claim stays the honest one)."""
    setup = people_sum_setup(kind, epsilon)
    statements, _, bug = KINDS[kind]
    plan = setup.plan
    answers = setup.answers
    scales = np.asarray(plan.scales)
    if planted and bug == "per-row clamp":
        answers = (setup.by_rows, answers[1])
    elif planted:
        scales = setup.row_scales
    w = np.array(setup.moved)
    base = setup.answers[1][w]
    events = []
    for tau in range(2, 6):
        def test(y: Outputs, tau: int = tau) -> npt.NDArray[np.bool_]:
            return np.all(np.asarray(y)[:, w] >= base + tau, axis=1)
        events.append(Event(f"all {w.size} moved sums ≥ f(D₂) + {tau}", test))
    n = len(statements)
    claim = Claim(float(plan.spent.bound), 0.0,
                  f"pure ε-DP for one person of ≤ {AUDIT_MAX_ROWS} rows counted once per group: "
                  f"coverage {n} × D = 2, b = {plan.scales[0]:.6g}, exact")
    key = 13 if kind == "one group" else 14
    return AuditCase(
        f"people sums, {kind} (K = {AUDIT_MAX_ROWS})", claim,
        f"D₁ = D₂ + one person of {AUDIT_MAX_ROWS} rows moving {n} group"
        f"{'s' if n > 1 else ''} by 2 (a clamped total)",
        partial(_run, answers, scales, key), tuple(events), planted=bug if planted else None)
