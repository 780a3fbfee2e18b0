"""Statistical audit of a release for one person (tessera.audit.person_case; docs/theory.md
§3.13): the audit workload planned for a person of at most K = 3 rows, the data bounded by the
engine, D₁ = D₂ + one person with 2K copies of the witness row. The honest release passes
(ε_lb ≤ the claim) and comes close to it; the same release with bounding skipped (the person's
2K rows all counted) is caught (ε_lb > the claim). Exact event probabilities from the discrete
Laplace tail check that the audit has the power it needs at 200,000 runs per data set (seed 0).
The slow mode repeats both over 20 seeds, through OpenDP's secure sampler, and at K = 5."""

from __future__ import annotations

import math

import pytest

from tessera.audit.estimators import expected_shortfall
from tessera.audit.person_case import person_release_case, person_setup
from tessera.audit.run import audit

TRIALS = 200_000


def tail(m: int, b: float) -> float:
    """P[Z ≥ m] for Z ~ DLap(b), any integer m (symmetry below 0)."""
    if m < 0:
        return 1.0 - tail(1 - m, b)
    return math.exp(-m / b) / (1.0 + math.exp(-1.0 / b))


def event_probabilities(shift: int, tau: int, b: float, gamma: int) -> tuple[float, float]:
    """P[every witness query ≥ q(D₂) + τ] on D₁ (the witness queries moved by ``shift``) and
    on D₂."""
    return tail(tau - shift, b) ** gamma, tail(tau, b) ** gamma


def expectations(k: int, planted: bool) -> tuple[float, float, float, float]:
    """(claim, the best event's exact log-ratio, its expected Clopper–Pearson shortfall, b)."""
    setup = person_setup(1.0, k)
    b, gamma = float(setup.plan.scales[0]), len(setup.witness)
    shift = 2 * k if planted else k
    best = max(range(k, k + 4), key=lambda t: (math.log(
        event_probabilities(shift, t, b, gamma)[0] / event_probabilities(shift, t, b, gamma)[1]),
        -t))
    p1, p2 = event_probabilities(shift, best, b, gamma)
    return (setup.plan.spent, math.log(p1 / p2),
            expected_shortfall(p1, p2, TRIALS, delta=0.0, tests=8), b)


def test_person_release_passes_and_is_sharp() -> None:
    claim, exact, shortfall, b = expectations(3, planted=False)
    assert b == pytest.approx(3 * 3 / 1.0, rel=1e-9)  # b = K·γ/ε: the noise of a person
    assert exact == pytest.approx(claim, rel=1e-9)  # the events attain the claim exactly
    row = audit(person_release_case(1.0, 3), TRIALS, 0)
    assert not row.violated and row.epsilon_lb <= claim
    assert row.epsilon_lb >= exact - 2 * shortfall, (row, exact, shortfall)


def test_audit_catches_a_release_that_skips_bounding() -> None:
    claim, exact, shortfall, _ = expectations(3, planted=True)
    assert exact == pytest.approx(2 * claim, rel=1e-9)  # 2K rows counted: twice the loss
    assert exact - claim >= 10 * shortfall, "too few trials to catch the bug"
    row = audit(person_release_case(1.0, 3, planted=True), TRIALS, 0)
    assert row.violated and row.epsilon_lb > claim, row


@pytest.mark.slow
@pytest.mark.parametrize("k", [3, 5])
def test_passes_and_catches_over_twenty_seeds(k: int) -> None:
    honest, planted = person_release_case(1.0, k), person_release_case(1.0, k, planted=True)
    for seed in range(1, 21):
        assert not audit(honest, TRIALS, seed).violated, (k, seed)
        assert audit(planted, TRIALS, seed).violated, (k, seed)


@pytest.mark.slow
def test_secure_sampler_passes_and_catches() -> None:
    assert not audit(person_release_case(1.0, 3), TRIALS, None).violated
    assert audit(person_release_case(1.0, 3, planted=True), TRIALS, None).violated
