"""The adaptive synthesizer's budget schedule: each round's two mechanisms, calibrated from a
budget share with exact costs (docs/theory.md §5, "the adaptive method").

A round is one selection (the exponential mechanism, ε-bounded-range: ε²/8-zCDP by
Cesar–Rogers, or ε under pure DP) and one measurement (discrete Gaussian, ρ = Δ₂²/(2σ²) by
CKS20, or discrete Laplace, ε = Δ₁/b). :meth:`Schedule.round` splits a share of the budget
(``measure_fraction`` to the measurement, the rest to the selection) and never plans past it:
every cost is a :class:`~fractions.Fraction` of the exact float parameters, and a selection ε is
lowered ulp by ulp until its cost fits. :meth:`Schedule.annealed` is AIM's annealing (McKenna
et al., VLDB 2022, Algorithm 1), whose step halves the noise and doubles the selection's ε;
Tessera's default step (:func:`annealing_step`) doubles a round's cost instead — √2 under
ρ-zCDP, AIM's 2 under pure ε (docs/theory.md §5, "annealing in finer steps").

The scores' sensitivity :func:`selection_sensitivity` is Δ = max_r w_r Δ₁(r) (the module
docstring of :mod:`tessera.synth.adaptive` derives it).

:func:`starting_rounds` is Tessera's budget-dependent start (docs/theory.md §5, "the start"):
AIM's T = 16·d sets the first noise whatever the budget; at a small budget against the data's
size that noise buries the cells of the workload's marginals (Adult, ε = 0.3: σ = 300 against
~145 rows per cell of a 2-way marginal), so the rounds start at the largest T ≤ 16·d at which
the average workload cell holds :data:`CELL_SIGMAS` noise standard deviations, and never fewer
than :data:`LEAST_ROUNDS_PER_ATTRIBUTE` · d.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from tessera.errors import TesseraError
from tessera.mechanisms import DiscreteGaussian, DiscreteLaplace, ExponentialMechanism
from tessera.privacy import Definition, Neighbours
from tessera.synth.accounting import Budget, largest_float_at_most
from tessera.synth.candidates import Candidate

__all__ = [
    "ANNEAL_COST",
    "CELL_SIGMAS",
    "LEAST_ROUNDS_PER_ATTRIBUTE",
    "MEASURE_FRACTION",
    "SELECTIVE_MEASURE_FRACTION",
    "Calibration",
    "CountNoise",
    "Schedule",
    "annealing_step",
    "noise_l1",
    "noise_param",
    "noise_sd",
    "selection_sensitivity",
    "sensitivities",
    "starting_rounds",
]

#: Noise on integer counts: discrete Gaussian (zCDP) or discrete Laplace (pure DP).
CountNoise = DiscreteGaussian | DiscreteLaplace
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
#: The start's signal-to-noise rule: the average cell of a workload marginal should hold at
#: least this many noise standard deviations (N̂ / (cells · sd) ≥ 5) at the first noise. 5, not
#: the 3 chosen on Adult: paired seeded runs over the panel of real tables (docs/benchmarks.md,
#: "What each default contributes"): a lower geometric mean at ε = 0.3 and 1 (health_insurance
#: 0.92× at ε = 0.3), no table more than 1 % worse, the same runs at ε = 3.
CELL_SIGMAS = 5.0
#: The annealing step's cost: when a round's measurement no longer moves the model by more than
#: its expected noise, the next rounds cost this many times more (the noise divided and the
#: selection's ε multiplied by :func:`annealing_step`). AIM halves the noise, which doubles the
#: cost under pure ε (b/2) but quadruples it under ρ-zCDP (σ/2); a doubling in both spends the
#: budget in finer steps, and more marginals are measured at intermediate noise — paired seeded
#: runs under zCDP (step √2 against 2): NLTCS 3-way ε = 1 0.90×; under pure ε step √2 was
#: 1.02× worse on Adult (docs/theory.md §5, "annealing in finer steps").
ANNEAL_COST = 2.0
#: The fewest rounds the start allows, per attribute (AIM's default is 16 per attribute; on
#: Adult 2-way at ε = 0.3, 2·d rounds were worse than 4·d: docs/benchmarks.md).
LEAST_ROUNDS_PER_ATTRIBUTE = 4
#: AIM's share of a round's budget for the measurement (the rest selects): the one-way
#: initialisation's, and the rounds' when the start lowered T (the workload's cells were within
#: ``cell_sigmas`` noise sd at AIM's T: the measurements are what the run lacks).
MEASURE_FRACTION = 0.9
#: The rounds' measurement share when the start kept AIM's T (the cells stood out of the noise
#: at the initialisation: the selection is what the run lacks). The selection's resolution, the
#: L1 error that moves its odds by e, is (Δ₁/Δ₂)·σ·√(f / (1 − f)) under ρ-zCDP and 2b·f/(1 − f)
#: under pure ε, whatever the budget and T (docs/theory.md §5, "the selection's share"): under
#: add/remove 3σ at 0.9 and 2σ at 0.8 (18b and 8b).
SELECTIVE_MEASURE_FRACTION = 0.8


@dataclass(frozen=True)
class Calibration:
    """One round's two mechanisms and their exact cost."""

    measurement: CountNoise
    selection: ExponentialMechanism
    cost: Fraction


class Schedule:
    """Calibrates rounds from budget shares (exact costs; module docstring): ``budget``, the
    measurements' L1 and L2 sensitivities, the selection's Δ and the measurement's share of a
    round."""

    def __init__(self, budget: Budget, l1: float, l2: float, sel_sensitivity: float,
                 measure_fraction: float) -> None:
        self.budget = budget
        self.total = budget.exact  # what a ledger charges: the same exact value, one source
        self.l1, self.l2, self.sel = l1, l2, sel_sensitivity
        self.fraction = Fraction(measure_fraction)
        self.pure = budget.definition is Definition.PURE

    def measurement(self, share: Fraction, sensitivity: float) -> CountNoise:
        value = largest_float_at_most(share)
        if not value > 0:
            raise TesseraError("the budget share of a measurement rounds to 0",
                               hint="a larger budget, or fewer rounds")
        if self.pure:
            return DiscreteLaplace.for_epsilon(value, sensitivity)
        return DiscreteGaussian.for_rho(value, sensitivity)

    def selection(self, share: Fraction) -> ExponentialMechanism:
        if self.pure:
            eps = largest_float_at_most(share)
        else:
            eps = math.sqrt(8.0 * float(share))
        mech = ExponentialMechanism(eps, self.sel)
        while self._sel_cost(mech) > share:
            eps = math.nextafter(eps, 0.0)
            mech = ExponentialMechanism(eps, self.sel)
        return mech

    def _sel_cost(self, mech: ExponentialMechanism) -> Fraction:
        return Fraction(mech.epsilon) if self.pure else Fraction(mech.rho())

    def cost(self, noise: CountNoise, sensitivity: float) -> Fraction:
        if isinstance(noise, DiscreteLaplace):
            return Fraction(noise.epsilon(sensitivity))
        return Fraction(noise.rho(sensitivity))

    def round(self, share: Fraction) -> Calibration:
        """A round costing at most ``share``: ``fraction`` to the measurement, the rest to the
        selection."""
        meas = self.measurement(share * self.fraction, self.l2 if not self.pure else self.l1)
        rest = share - self.cost(meas, self.l2 if not self.pure else self.l1)
        sel = self.selection(rest)
        out = Calibration(meas, sel, self.cost(meas, self.l2 if not self.pure else self.l1)
                           + self._sel_cost(sel))
        assert out.cost <= share
        return out

    def with_fraction(self, measure_fraction: float) -> Schedule:
        """The same budget, sensitivities and definition, with another measurement share."""
        return Schedule(self.budget, self.l1, self.l2, self.sel, measure_fraction)

    def annealed(self, cal: Calibration, factor: float | None = None) -> Calibration:
        """AIM's annealing with step ``factor`` > 1: the noise divided and the selection's ε
        multiplied by it, so both mechanisms cost factor² more in ρ (σ/f: ρ = Δ₂²f²/(2σ²);
        ε·f: (εf)²/8) or factor more in ε (b/f, ε·f). AIM's step is 2; the default
        (:func:`annealing_step`) doubles the cost in either definition (docs/theory.md §5,
        "annealing in finer steps")."""
        if factor is None:
            factor = annealing_step(self.pure)
        if not (math.isfinite(factor) and factor > 1.0):
            raise TesseraError(f"anneal must be a finite number > 1, got {factor!r}")
        if self.pure:
            meas: CountNoise = DiscreteLaplace(
                cal.measurement.scale / factor)  # type: ignore[union-attr]
            sel = ExponentialMechanism(cal.selection.epsilon * factor, self.sel)
        else:
            meas = DiscreteGaussian(cal.measurement.sigma / factor)  # type: ignore[union-attr]
            sel = ExponentialMechanism(cal.selection.epsilon * factor, self.sel)
        s = self.l1 if self.pure else self.l2
        return Calibration(meas, sel, self.cost(meas, s) + self._sel_cost(sel))


def annealing_step(pure: bool) -> float:
    """The default annealing step: the one that multiplies a round's cost by
    :data:`ANNEAL_COST` — √2 under ρ-zCDP (ρ ∝ 1/σ², ε_sel² ∝ ρ), 2 under pure ε (AIM's)."""
    return ANNEAL_COST if pure else math.sqrt(ANNEAL_COST)


def noise_sd(noise: CountNoise) -> float:
    return math.sqrt(noise.variance)


def noise_l1(noise: CountNoise) -> float:
    """E|Z| per cell (the bias term of the score)."""
    if isinstance(noise, DiscreteLaplace):
        return noise.scale
    return _SQRT_2_OVER_PI * noise.sigma


def noise_param(noise: CountNoise) -> float:
    return noise.scale if isinstance(noise, DiscreteLaplace) else noise.sigma




def selection_sensitivity(cands: Sequence[Candidate], substitute: bool) -> float:
    """Δ of the quality scores: max_r w_r Δ₁(r), Δ₁ = 2 for a marginal under substitution (a
    row leaves one cell and enters another), 1 otherwise (module docstring)."""
    return max(int(c.weight) * (2.0 if substitute and c.is_marginal else 1.0) for c in cands)


def sensitivities(cands: Sequence[Candidate], budget: Budget) -> tuple[float, float, float,
                                                                     float]:
    """(L1 and L2 sensitivity of a marginal's counts, the selection scores' Δ, a query count's
    sensitivity) for ``budget``'s relation and unit: a row moves a marginal by (2, √2) under
    substitution and (1, 1) under add/remove, and a query count by 1; one person of at most K
    rows moves every one of them K times as far (triangle inequality; docs/theory.md §3.13), so
    every noise scale and the exponential mechanism's score sensitivity grow by K — the one
    place the synthesizer's calibration reads the unit."""
    substitute = budget.neighbours is Neighbours.SUBSTITUTE
    l1, l2 = (2.0, math.sqrt(2.0)) if substitute else (1.0, 1.0)
    k = float(budget.unit.max_rows)
    return k * l1, k * l2, k * selection_sensitivity(cands, substitute), k


def starting_rounds(schedule: Schedule, most: int, least: int, total: float,
                    cells: float, cell_sigmas: float = CELL_SIGMAS) -> int:
    """The largest T in [``least``, ``most``] whose round noise sd(T) (calibrated exactly as
    :meth:`Schedule.round` of budget/T does) satisfies total / (cells · sd(T)) ≥
    ``cell_sigmas``; ``least`` when none does, ``most`` when ``least`` ≥ ``most``.

    ``total`` is N (n̂ under add/remove: post-processing of the noisy one-way marginals) and
    ``cells`` the mean number of cells of the workload's marginals: public sizes and a DP
    output, so the choice is post-processing. sd(T) grows with T (σ ∝ √T under zCDP, b ∝ T
    under pure ε), so the condition holds on an initial segment of T: bisection.

    >>> from tessera.synth.accounting import Budget
    >>> from tessera.privacy import Neighbours
    >>> s = Schedule(Budget.of(rho=0.01, neighbours=Neighbours.ADD_REMOVE), 1.0, 1.0, 1.0, 0.9)
    >>> starting_rounds(s, 160, 40, total=30_000.0, cells=100.0)  # σ(160) ≈ 94 ≤ 300 / 3
    160
    >>> starting_rounds(s, 160, 40, total=15_000.0, cells=100.0)  # σ(T) ≤ 50: T ≤ 160 (50/94)²
    44
    >>> starting_rounds(s, 160, 40, total=2_000.0, cells=100.0)
    40
    """
    if least >= most:
        return most

    def clear(t: int) -> bool:
        sd = noise_sd(schedule.round(schedule.total / t).measurement)
        return total >= cell_sigmas * cells * sd

    if clear(most):
        return most
    if not clear(least):
        return least
    lo, hi = least, most  # clear(lo), not clear(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if clear(mid) else (lo, mid)
    return lo
