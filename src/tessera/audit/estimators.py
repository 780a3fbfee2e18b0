"""Lower bounds on ε from event frequencies: Clopper–Pearson intervals (docs/security.md).

A mechanism M is (ε, δ)-DP when, for every pair of neighbouring data sets (D₁, D₂) and every
output event E,

    P[M(D₁) ∈ E] ≤ e^ε · P[M(D₂) ∈ E] + δ.

So for a *fixed* event E (chosen before the runs) with p₁ = P[M(D₁) ∈ E] > δ,

    ε ≥ log((p₁ − δ) / p₂),

and replacing p₁ by a lower and p₂ by an upper confidence bound gives a lower bound on the ε of
M that holds with the stated confidence (the approach of Ding et al., "Detecting Violations of
Differential Privacy", CCS 2018, and of Jagielski et al., "Auditing Differentially Private
Machine Learning", NeurIPS 2020). The bounds are Clopper–Pearson's exact binomial bounds, each
one-sided at level (1 − confidence)/2, so that both hold together with probability at least
``confidence`` (union bound):

    p_lo(k, n) = Beta⁻¹(α/2; k, n − k + 1),    p_hi(k, n) = Beta⁻¹(1 − α/2; k + 1, n − k).

Trial counts. For large n the lower bound falls short of the event's true log-ratio by about

    z · (√((1 − p₁)/p₁) + √((1 − p₂)/p₂)) / √n,    z = Φ⁻¹(1 − α/2)

(the delta method on log p̂ plus the one-sided CP margins, δ = 0; with δ the first term is
√(p₁(1 − p₁))/(p₁ − δ), and K events tried in both directions use z = Φ⁻¹(1 − α/(4K)),
:func:`best_lower_bound`): :func:`expected_shortfall`
gives it and :func:`trials_for` inverts it, which is how the trial counts of the audits are
chosen (a planted bug must clear the claim by several shortfalls, an honest mechanism's bound is
its event ratio minus one shortfall).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import stats

from tessera.errors import TesseraError

__all__ = [
    "DEFAULT_CONFIDENCE",
    "EventCounts",
    "best_lower_bound",
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "epsilon_lower_bound",
    "expected_shortfall",
    "point_estimate",
    "trials_for",
]

#: Joint confidence of the two one-sided Clopper–Pearson bounds of an audit.
DEFAULT_CONFIDENCE = 0.99


def _check_counts(hits: int, trials: int) -> None:
    if isinstance(trials, bool) or int(trials) != trials or trials < 1:
        raise TesseraError(f"trials must be a positive integer, got {trials!r}")
    if isinstance(hits, bool) or int(hits) != hits or not 0 <= hits <= trials:
        raise TesseraError(f"hits must be an integer in [0, {trials}], got {hits!r}")


def _alpha(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise TesseraError(f"a confidence must be in (0, 1), got {confidence!r}")
    return 1.0 - confidence


def clopper_pearson_lower(hits: int, trials: int, level: float) -> float:
    """One-sided lower bound on p at ``level`` (P[p ≥ bound] ≥ level):
    Beta⁻¹(1 − level; k, n − k + 1)."""
    _check_counts(hits, trials)
    if hits == 0:
        return 0.0
    return float(stats.beta.ppf(1.0 - level, hits, trials - hits + 1))


def clopper_pearson_upper(hits: int, trials: int, level: float) -> float:
    """One-sided upper bound on p at ``level``: Beta⁻¹(level; k + 1, n − k)."""
    _check_counts(hits, trials)
    if hits == trials:
        return 1.0
    return float(stats.beta.ppf(level, hits + 1, trials - hits))


@dataclass(frozen=True)
class EventCounts:
    """How often the event E happened: ``hits_1`` of ``trials_1`` runs on D₁ (the data set
    under which E is the likelier), ``hits_2`` of ``trials_2`` runs on D₂."""

    hits_1: int
    trials_1: int
    hits_2: int
    trials_2: int

    def __post_init__(self) -> None:
        _check_counts(self.hits_1, self.trials_1)
        _check_counts(self.hits_2, self.trials_2)

    @property
    def frequency_1(self) -> float:
        return self.hits_1 / self.trials_1

    @property
    def frequency_2(self) -> float:
        return self.hits_2 / self.trials_2


def epsilon_lower_bound(
    counts: EventCounts, delta: float = 0.0, confidence: float = DEFAULT_CONFIDENCE
) -> float:
    """ε_lb = log((p_lo(D₁) − δ) / p_hi(D₂)), at least 0 (module docs).

    With probability ≥ ``confidence`` over the runs, every (ε, δ) the mechanism satisfies on
    this pair has ε ≥ ε_lb. 0 when the lower bound on p₁ does not exceed δ (no evidence).
    """
    if not 0.0 <= delta < 1.0:
        raise TesseraError(f"δ must be in [0, 1), got {delta!r}")
    side = 1.0 - _alpha(confidence) / 2.0
    p1 = clopper_pearson_lower(counts.hits_1, counts.trials_1, side)
    p2 = clopper_pearson_upper(counts.hits_2, counts.trials_2, side)
    if p1 - delta <= 0.0 or p2 <= 0.0:
        return 0.0
    return max(0.0, math.log((p1 - delta) / p2))


def point_estimate(counts: EventCounts, delta: float = 0.0) -> float:
    """log((p̂₁ − δ)/p̂₂) from the frequencies (no confidence; ∞ when p̂₂ = 0, 0 if p̂₁ ≤ δ)."""
    p1, p2 = counts.frequency_1 - delta, counts.frequency_2
    if p1 <= 0.0:
        return 0.0
    if p2 == 0.0:
        return math.inf
    return math.log(p1 / p2)


def best_lower_bound(
    hits_1: Sequence[int], trials_1: int, hits_2: Sequence[int], trials_2: int,
    delta: float = 0.0, confidence: float = DEFAULT_CONFIDENCE,
) -> tuple[float, int, bool]:
    """The largest ε_lb over K candidate events tried in both directions, each at confidence
    1 − (1 − ``confidence``)/(2K) (Bonferroni): all 2K bounds hold together with probability
    ≥ ``confidence``, so their maximum is a valid lower bound however the best event falls.

    ``hits_1[k]``, ``hits_2[k]``: how often event k happened on D₁ and on D₂. Returns
    (ε_lb, k, swapped): ``swapped`` when the bound came from event k being likelier on D₂.
    """
    if len(hits_1) != len(hits_2) or not hits_1:
        raise TesseraError("need the same non-empty list of events on both data sets")
    tests = 2 * len(hits_1)
    each = 1.0 - _alpha(confidence) / tests
    best = (0.0, 0, False)
    for k, (h1, h2) in enumerate(zip(hits_1, hits_2, strict=True)):
        for swapped, counts in ((False, EventCounts(h1, trials_1, h2, trials_2)),
                                (True, EventCounts(h2, trials_2, h1, trials_1))):
            value = epsilon_lower_bound(counts, delta, each)
            if value > best[0]:
                best = (value, k, swapped)
    return best


def expected_shortfall(p1: float, p2: float, trials: int,
                       confidence: float = DEFAULT_CONFIDENCE, delta: float = 0.0,
                       tests: int = 1) -> float:
    """How far below log((p₁ − δ)/p₂) the bound of ``trials`` runs per data set lands, to first
    order: z (√(p₁(1−p₁))/(p₁ − δ) + √((1−p₂)/p₂)) / √n, z = Φ⁻¹(1 − α/(2·tests)) (``tests``
    bounds under Bonferroni, as in :func:`best_lower_bound` with 2K tests)."""
    if not (delta < p1 <= 1.0 and 0.0 < p2 <= 1.0):
        raise TesseraError(f"event probabilities must be in (δ, 1], got {p1!r}, {p2!r}")
    z = float(stats.norm.ppf(1.0 - _alpha(confidence) / (2.0 * tests)))
    spread = math.sqrt(p1 * (1.0 - p1)) / (p1 - delta) + math.sqrt((1.0 - p2) / p2)
    return z * spread / math.sqrt(trials)


def trials_for(p1: float, p2: float, shortfall: float,
               confidence: float = DEFAULT_CONFIDENCE, delta: float = 0.0,
               tests: int = 1) -> int:
    """The number of runs per data set that brings :func:`expected_shortfall` down to
    ``shortfall``."""
    if not (math.isfinite(shortfall) and shortfall > 0):
        raise TesseraError(f"the shortfall must be positive, got {shortfall!r}")
    one = expected_shortfall(p1, p2, 1, confidence, delta, tests)
    return max(1, math.ceil((one / shortfall) ** 2))
