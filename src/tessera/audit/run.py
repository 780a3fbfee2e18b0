"""Run the audits: ε lower bounds for every case, as the rows of the audit table
(docs/security.md; ``tessera audit`` prints them).

For a case (:mod:`tessera.audit.cases`) with K candidate events, :func:`audit` draws ``trials``
outputs on D₁ and ``trials`` on D₂, counts each event on both, and reports the best of the 2K
Bonferroni-corrected Clopper–Pearson bounds (:func:`tessera.audit.estimators.best_lower_bound`)
together with that event's point estimate. The bound holds with probability ≥ ``confidence``
over the runs; with a seed, the runs are reproducible and NOT PRIVATE (numpy), which does not
matter to an audit (the seeded samplers draw the same distributions as OpenDP's, which the
``--secure`` mode checks with OpenDP's own sampler).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tessera.audit.cases import (
    AuditCase,
    adaptive_case,
    discrete_gaussian_case,
    discrete_laplace_case,
    exponential_case,
    synthesizer_case,
    workload_release_case,
)
from tessera.audit.contrast_case import contrast_release_case
from tessera.audit.estimators import (
    DEFAULT_CONFIDENCE,
    EventCounts,
    best_lower_bound,
    point_estimate,
)
from tessera.audit.people_aggregate_case import people_sum_case
from tessera.audit.person_case import person_release_case
from tessera.audit.strategy_case import strategy_release_case
from tessera.errors import TesseraError

__all__ = [
    "DEFAULT_TRIALS",
    "PER_TRIAL_SHARE",
    "SECURE_SELECTION_SHARE",
    "AuditRow",
    "audit",
    "audit_table",
    "trials_of",
]

#: Runs per data set of the vectorised cases in ``tessera audit``.
DEFAULT_TRIALS = 200_000
#: The end-to-end cases (one synthesizer call per run, ~2 ms) get this share of the trials.
PER_TRIAL_SHARE = 1 / 40
#: With OpenDP's secure sampler, selections (one OpenDP call per run) get this share.
SECURE_SELECTION_SHARE = 1 / 10


# -- the collections ---------------------------------------------------------------------------


def all_cases(end_to_end: bool = False) -> list[AuditCase]:
    """The honest cases, in the order of the audit table (``end_to_end``: the synthesizer
    rounds run by calling the synthesizer once per trial)."""
    return [discrete_laplace_case(), discrete_gaussian_case(), exponential_case(),
            workload_release_case(), workload_release_case(rho=0.5),
            synthesizer_case("ipmwu", end_to_end=end_to_end),
            synthesizer_case("mwem", end_to_end=end_to_end), adaptive_case(),
            strategy_release_case(), contrast_release_case(), person_release_case(),
            people_sum_case("one group"), people_sum_case("three years")]


def planted_cases() -> list[AuditCase]:
    """The planted bugs, each against its honest claim."""
    return [discrete_laplace_case(scale_factor=0.5), discrete_gaussian_case(sigma_factor=0.5),
            exponential_case(sensitivity_error=-1), workload_release_case(overlap_error=-1.0),
            adaptive_case(planted=True), strategy_release_case(planted=True),
            contrast_release_case(planted=True), person_release_case(planted=True),
            people_sum_case("one group", planted=True),
            people_sum_case("three years", planted=True)]


@dataclass(frozen=True)
class AuditRow:
    """One line of the audit table: the mechanism, its claim, the measured lower bound."""

    mechanism: str
    claimed_epsilon: float
    delta: float
    claim: str
    epsilon_lb: float
    point: float
    trials: int
    event: str
    pair: str
    seeded: bool
    planted: str | None
    seconds: float

    @property
    def ratio(self) -> float:
        """ε_lb / claimed ε: how close the audit comes to the claim (≤ 1 unless it fails)."""
        return self.epsilon_lb / self.claimed_epsilon if self.claimed_epsilon > 0 else math.inf

    @property
    def violated(self) -> bool:
        """True when the lower bound exceeds the claim: a privacy bug, at the confidence."""
        return self.epsilon_lb > self.claimed_epsilon


def audit(case: AuditCase, trials: int, seed: int | None = 0,
          confidence: float = DEFAULT_CONFIDENCE) -> AuditRow:
    """Audit one case with ``trials`` runs per data set (``seed`` None: OpenDP's secure
    randomness, not reproducible)."""
    if isinstance(trials, bool) or int(trials) != trials or trials < 1:
        raise TesseraError(f"trials must be a positive integer, got {trials!r}")
    trials = int(trials)
    start = time.perf_counter()
    outputs = [case.run(which, trials, seed) for which in (0, 1)]
    hits = [[int(np.count_nonzero(e.test(out))) for e in case.events] for out in outputs]
    delta = case.claim.delta
    lb, k, swapped = best_lower_bound(hits[0], trials, hits[1], trials, delta, confidence)
    counts = EventCounts(hits[0][k], trials, hits[1][k], trials)
    if swapped:
        counts = EventCounts(hits[1][k], trials, hits[0][k], trials)
    event = case.events[k].name + (" (likelier on D₂)" if swapped else "")
    return AuditRow(case.name, case.claim.epsilon, delta, case.claim.statement, lb,
                    point_estimate(counts, delta), trials, event, case.pair, seed is not None,
                    case.planted, time.perf_counter() - start)


def audit_table(trials: int = DEFAULT_TRIALS, seed: int | None = 0, *,
                planted: bool = False, end_to_end: bool = False, per_trial: int | None = None,
                cases: Sequence[AuditCase] | None = None,
                confidence: float = DEFAULT_CONFIDENCE) -> list[AuditRow]:
    """The audit table: every honest case (and the planted bugs with ``planted``; the
    synthesizers called once per trial with ``end_to_end``), with :func:`trials_of` runs per
    data set. ``seed`` None uses OpenDP's secure randomness."""
    if cases is not None:
        chosen = list(cases)
    else:
        chosen = all_cases(end_to_end) + (planted_cases() if planted else [])
    return [audit(c, trials_of(c, trials, seed is None, per_trial), seed, confidence)
            for c in chosen]


def trials_of(case: AuditCase, trials: int, secure: bool, per_trial: int | None = None) -> int:
    """Runs per data set for ``case``: ``trials``, or ``per_trial`` (default ``trials`` ×
    :data:`PER_TRIAL_SHARE`) for an end-to-end case, or ``trials`` ×
    :data:`SECURE_SELECTION_SHARE` for a selection drawn one OpenDP call at a time; at
    least 100."""
    if case.per_trial:
        return per_trial if per_trial is not None else max(100, int(trials * PER_TRIAL_SHARE))
    if secure and case.secure_per_trial:
        return max(100, int(trials * SECURE_SELECTION_SHARE))
    return trials
