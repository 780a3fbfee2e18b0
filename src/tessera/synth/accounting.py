"""The privacy of IPMWU and of the MWEM baseline (docs/theory.md §5, §7): the budget split, the
two private steps of a round, and the proof of what a run spent.

**Neighbours and units.** Every private step works on *counts* q(X) = Σ_i f(x_i), whose
sensitivity is exactly 1 under both relations (docs/theory.md §1: one query's count moves by at
most 1 when a row is substituted, added or removed). The normalised answers f(X) = q(X)/N of
Ghazi et al. are post-processing of the counts, with

* **substitute one row** (Ghazi et al., the default): N = n, the number of rows, *public*;
* **add/remove one row**: n is private, so N = n̂ = max(1, n + noise) is measured first (a
  discrete Laplace or Gaussian count of the tautology, sensitivity 1) with a share of the budget,
  as docs/theory.md §5 prescribes ("run on counts with a separately privatised total").

**Selection.** The exponential mechanism over F with count-unit scores s_f = |q_f(X) − N·v_f|,
v_f = f(S_t) or ⟨f, h_t⟩ (a function of past outputs only), sensitivity Δ = 1:
P[f] ∝ exp(ε₀ s_f/2) = exp(ε₀ |f(X) − v_f| / (2/N)), which is Ghazi et al.'s step with the corrected
factor 2 (docs/theory.md §5: the score is not monotone). Scoring counts rather than fractions
keeps Δ = 1 exact (1/n is not a float).

**Measurement.** q_{f_t}(X) + Z with Z discrete Laplace (pure) or discrete Gaussian (zCDP) on the
integer count, through the exact OpenDP samplers (:mod:`tessera.mechanisms`); a_t = (q + Z)/N.

**Budget split** (:func:`plan`). T rounds, each one selection and one measurement:

* pure ε (basic composition): ε₀ = ε/(2T) for each step (the largest float with 2T·ε₀ ≤ ε);
  selection ε₀, measurement discrete Laplace with scale b = 1/ε₀ rounded up;
* ρ-zCDP: ρ₀ = ρ/(2T) for each step; the selection is ε-bounded-range, hence ε²/8-zCDP
  (Cesar–Rogers), so ε_sel = √(8ρ₀) rounded down; the measurement is a discrete Gaussian with
  1/(2σ²) ≤ ρ₀ (Canonne–Kamath–Steinke);
* add/remove: the total first, with ``total_fraction`` of the budget (ε or ρ), the rest split as
  above.

Every float is rounded so that the exact rational sum of the per-step costs is ≤ the budget.

**Proof** (:func:`prove`). A run records one :class:`Step` per mechanism that actually ran (its
:class:`~tessera.mechanisms.MechanismRecord` and the sensitivity it was applied to); the proof
recomputes each step's cost from the record alone with the mechanisms' own privacy maps and adds
them exactly (pure: basic composition Σε; zCDP: Σρ, which also holds for adaptive choices).
The synthetic rows, the samples S_t and everything else are post-processing (docs/theory.md §5).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from tessera.accounting.guarantee import Guarantee
from tessera.errors import TesseraError
from tessera.mechanisms import (
    DiscreteGaussian,
    DiscreteLaplace,
    ExponentialMechanism,
    MechanismRecord,
    NoiseSource,
    discrete_gaussian,
    discrete_laplace,
)
from tessera.mechanisms.record import float_at_least
from tessera.privacy import ONE_ROW, Definition, Neighbours, PrivacyUnit, check_budget

__all__ = [
    "Budget",
    "Plan",
    "Step",
    "count_bound",
    "dyadic_exponent",
    "exact_scores",
    "largest_float_at_most",
    "measure",
    "noise_cost",
    "plan",
    "prove",
    "selection_scores",
    "select",
    "step_cost",
]

#: Noise on an integer count: discrete Laplace (pure DP) or discrete Gaussian (zCDP).
CountNoise = DiscreteLaplace | DiscreteGaussian


@dataclass(frozen=True)
class Budget:
    """What a run may spend: pure ε or ρ-zCDP, under a neighbour relation over a unit of
    privacy (one row, or one person of at most K rows: docs/theory.md §3.13, whose mechanisms
    are calibrated to sensitivities K times a row's)."""

    definition: Definition
    value: float
    neighbours: Neighbours = Neighbours.SUBSTITUTE
    unit: PrivacyUnit = ONE_ROW

    @staticmethod
    def of(epsilon: float | None = None, rho: float | None = None,
           neighbours: Neighbours | str = Neighbours.SUBSTITUTE,
           unit: PrivacyUnit = ONE_ROW) -> Budget:
        """Exactly one of ``epsilon`` (pure DP) and ``rho`` (zCDP)."""
        if (epsilon is None) == (rho is None):
            raise TesseraError("give exactly one budget: epsilon= (pure DP) or rho= (zCDP)")
        value = epsilon if epsilon is not None else rho
        assert value is not None
        definition = Definition.PURE if epsilon is not None else Definition.ZCDP
        value = check_budget("ε" if epsilon is not None else "ρ", value)
        return Budget(definition, value, Neighbours.parse(neighbours), unit)

    @property
    def exact(self) -> Fraction:
        """What the run may spend, exactly: the smaller of the float's binary value and the
        decimal it prints as, which is what a ledger charges (docs/theory.md §9: 0.1 is one
        tenth). Every schedule is calibrated to this, so a run charged ``repr(ε)`` never spends
        the binary excess (ten runs of ε = 0.1 fit a total of 1 exactly)."""
        return min(Fraction(self.value), Fraction(repr(self.value)))

    def guarantee(self, value: float | None = None, **kw: object) -> Guarantee:
        """This budget (or ``value`` in its definition) as a :class:`Guarantee`."""
        v = self.value if value is None else value
        if self.definition is Definition.PURE:
            return Guarantee.pure(v, self.neighbours, unit=self.unit,  # type: ignore[arg-type]
                                  **kw)
        return Guarantee.zcdp(v, self.neighbours, unit=self.unit, **kw)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Step:
    """One mechanism that ran: its role (``"total"``, ``"selection"``, ``"measurement"``), the
    round (0 for the total), its record, and the sensitivity of what it was applied to."""

    role: str
    round: int
    mechanism: MechanismRecord
    sensitivity: float = 1.0


@dataclass(frozen=True)
class Plan:
    """The calibrated mechanisms of a run: the total (add/remove only) and one round's two
    steps, for ``rounds`` rounds; :attr:`planned` is what the run will spend (≤ the budget)."""

    budget: Budget
    rounds: int
    total: CountNoise | None
    selection: ExponentialMechanism
    measurement: CountNoise

    @property
    def definition(self) -> Definition:
        return self.budget.definition

    def total_cost(self) -> Fraction:
        if self.total is None:
            return Fraction(0)
        return Fraction(noise_cost(self.total, self.definition))

    def round_cost(self) -> Fraction:
        """Selection + measurement of one round, in the budget's definition (exact sum)."""
        sel = (self.selection.epsilon if self.definition is Definition.PURE
               else self.selection.rho())
        return Fraction(sel) + Fraction(noise_cost(self.measurement, self.definition))

    @property
    def planned(self) -> Guarantee:
        """Σ of the per-step costs (exact rational sum, rounded up): the spend of a full run."""
        total = self.total_cost() + self.rounds * self.round_cost()
        return self.budget.guarantee(float_at_least(total), basis="exact",
                                     note=_composition_note(self.definition))


def _composition_note(definition: Definition) -> str:
    return ("basic composition of pure-DP steps" if definition is Definition.PURE
            else "additivity of zCDP over adaptive steps")


def noise_cost(noise: CountNoise, definition: Definition) -> float:
    """The cost of count noise (sensitivity 1) in ``definition``: ε = 1/b (discrete Laplace;
    ε²/2 as zCDP) or ρ = 1/(2σ²) (discrete Gaussian)."""
    if isinstance(noise, DiscreteLaplace):
        eps = noise.epsilon(1)
        return eps if definition is Definition.PURE else float_at_least(Fraction(eps) ** 2 / 2)
    if definition is Definition.PURE:
        raise TesseraError("the discrete Gaussian has no pure-DP guarantee")
    return noise.rho(1)


def largest_float_at_most(x: Fraction) -> float:
    """The largest float ≤ x (a budget share rounded in the safe direction)."""
    f = float(x)
    while Fraction(f) > x:
        f = math.nextafter(f, -math.inf)
    return f


def _count_noise(share: Fraction, definition: Definition) -> CountNoise:
    """Noise on a sensitivity-1 count costing at most ``share`` (ε or ρ)."""
    value = largest_float_at_most(share)
    if not value > 0:
        raise TesseraError("the budget share of a step rounds to 0")
    if definition is Definition.PURE:
        return DiscreteLaplace.for_epsilon(value, 1)
    return DiscreteGaussian.for_rho(value, 1)


def split_total(budget: Budget, total_fraction: float) -> CountNoise | None:
    """The mechanism measuring n under add/remove (``None`` under substitution: n is public)."""
    if budget.neighbours is Neighbours.SUBSTITUTE:
        return None
    if not (0.0 < total_fraction < 1.0):
        raise TesseraError(f"total_fraction must be in (0, 1), got {total_fraction!r}")
    return _count_noise(budget.exact * Fraction(total_fraction), budget.definition)


def plan(budget: Budget, rounds: int, total: CountNoise | None = None) -> Plan:
    """Calibrate T = ``rounds`` rounds on what ``total`` (the add/remove count of n) leaves."""
    if isinstance(rounds, bool) or int(rounds) != rounds or rounds < 1:
        raise TesseraError(f"rounds must be a positive integer, got {rounds!r}")
    rounds = int(rounds)
    rest = budget.exact
    if total is not None:
        rest -= Fraction(noise_cost(total, budget.definition))
    share = rest / (2 * rounds)
    if budget.definition is Definition.PURE:
        eps0 = largest_float_at_most(share)
        if not eps0 > 0:
            raise TesseraError("the budget per step rounds to 0", hint="fewer rounds")
        selection = ExponentialMechanism(eps0, 1.0)
    else:
        eps_sel = math.sqrt(8.0 * float(share))  # then down until ε²/8 (rounded up) ≤ ρ₀
        selection = ExponentialMechanism(eps_sel, 1.0)
        while Fraction(selection.rho()) > share:
            eps_sel = math.nextafter(eps_sel, 0.0)
            selection = ExponentialMechanism(eps_sel, 1.0)
    measurement = _count_noise(share, budget.definition)
    out = Plan(budget, rounds, total, selection, measurement)
    assert out.total_cost() + rounds * out.round_cost() <= budget.exact
    return out


# -- the two private steps of a round ---------------------------------------------------------


def dyadic_exponent(bound: float) -> int:
    """The largest k ≥ 0 with every multiple of 2^-k of magnitude ≤ ``bound`` an exact float
    with room to spare: k = 52 − ⌈log₂(bound + 1)⌉ − 1 (at least 0)."""
    return max(0, 52 - math.ceil(math.log2(float(bound) + 1.0)) - 1)


def count_bound(normaliser: float) -> int:
    """A public cap B = 4N + 1 on one count (N public: n, or a noisy estimate of it). Counts are
    clamped to [0, B] before scoring: clamping is 1-Lipschitz, so sensitivities are unchanged,
    and it never acts unless n > 4N + 1."""
    return 4 * math.ceil(max(float(normaliser), 1.0)) + 1


def selection_scores(counts: npt.ArrayLike, synthetic: npt.ArrayLike,
                     normaliser: float) -> npt.NDArray[np.float64]:
    """s_f = |q_f(X) − N·v_f| in count units, computed **exactly** (sensitivity exactly 1).

    The grid 2^-k is fixed from public values only (N and the synthetic answers, never the
    counts: a grid that moved with the data would break the bound): N·v_f is rounded to it, the
    count clamped to [0, B] (:func:`count_bound`), and the difference taken in integer
    arithmetic, so every returned float is exact and one row moves s_f by at most 1 — a float
    subtraction could move it by 1 + ulp."""
    q = np.asarray(counts, dtype=np.int64)
    e = float(normaliser) * np.asarray(synthetic, dtype=np.float64)
    if q.size == 0:
        return np.zeros(0)
    bound = count_bound(normaliser)
    k = dyadic_exponent(bound + float(np.abs(e).max()))
    e_int = np.rint(e * float(2**k)).astype(np.int64)
    return np.abs(np.clip(q, 0, bound) * (1 << k) - e_int) / float(2**k)


def exact_scores(exact: Sequence[npt.NDArray[np.int64]], synthetic: Sequence[npt.ArrayLike],
                 bias: Sequence[float], weights: Sequence[int],
                 normaliser: float) -> npt.NDArray[np.float64]:
    """s_r = w_r (‖y_r − e_r‖₁ − b_r) for groups r, computed exactly (the adaptive method's
    quality score, docs/theory.md §5).

    ``exact`` y_r (integer counts: the data), ``synthetic`` e_r, ``bias`` b_r, integer
    ``weights`` w_r and ``normaliser`` N (all public). The grid 2^-k is fixed from public values
    only (the weights, e_r, b_r and the cap B = :func:`count_bound` (N) on each count, to which the
    counts are clamped); e_r and b_r are rounded to it and the rest is integer arithmetic, so the
    returned floats are exact: one row moving y_r by Δ₁ in L1 moves s_r by at most w_r Δ₁."""
    cap = count_bound(normaliser)
    bound = max((int(w) * (len(y) * cap + float(np.abs(np.asarray(e)).sum()) + abs(b) + 1)
                 for y, e, b, w in zip(exact, synthetic, bias, weights, strict=True)),
                default=1.0)
    k = dyadic_exponent(bound)
    scale = float(2**k)
    out = np.empty(len(exact))
    for i, (y, e, b, w) in enumerate(zip(exact, synthetic, bias, weights, strict=True)):
        e_int = np.rint(np.asarray(e, dtype=np.float64) * scale).astype(np.int64)
        y_c = np.clip(np.asarray(y, dtype=np.int64), 0, cap)
        l1 = int(np.abs(y_c * (1 << k) - e_int).sum())
        out[i] = int(w) * (l1 - int(round(b * scale))) / scale  # |·| < 2^52: exact
    return out


def select(mechanism: ExponentialMechanism, counts: npt.ArrayLike, synthetic: npt.ArrayLike,
           normaliser: float, source: NoiseSource, runs: int = 1,
           round: int = 0) -> tuple[npt.NDArray, Step]:
    """The selection of a round: index(es) drawn with P[f] ∝ exp(ε s_f/2), and its step.

    ``runs`` > 1 repeats it independently (for tests; each run costs the step again)."""
    scores = selection_scores(counts, synthetic, normaliser)
    chosen = mechanism.select(scores, source, runs)
    return chosen.indices, Step("selection", round, chosen.mechanism, 1.0)


def measure(noise: CountNoise, count: int, source: NoiseSource, role: str = "measurement",
            round: int = 0) -> tuple[int, Step]:
    """q + Z on one integer count (sensitivity 1): the noisy count and its step."""
    release = noise.sample(np.array([int(count)], dtype=np.int64), source)
    return int(release.values[0]), Step(role, round, release.mechanism, 1.0)


# -- the proof ----------------------------------------------------------------------------------


def step_cost(step: Step, definition: Definition) -> float:
    """The cost of one step in ``definition`` (ε or ρ), from its record and sensitivity alone.

    * exponential mechanism (parameter ε for scores of sensitivity 1): ε·Δ pure, (εΔ)²/8 zCDP;
    * discrete Laplace (scale b): ε = Δ/b pure, ε²/2 zCDP;
    * discrete Gaussian (σ): ρ = Δ²/(2σ²) zCDP, no pure guarantee.
    """
    rec, sens = step.mechanism, step.sensitivity
    if rec.value is None:
        raise TesseraError(f"step {step.role} #{step.round}: one parameter per step expected")
    if rec.parameter == "ε" and rec.definition is Definition.PURE:
        eps = Fraction(rec.value) * Fraction(sens)
        if definition is Definition.PURE:
            return float_at_least(eps)
        return float_at_least(eps * eps / 8)
    if rec.parameter == "scale b":
        eps = discrete_laplace.epsilon(rec.value, sens)
        if definition is Definition.PURE:
            return eps
        return float_at_least(Fraction(eps) ** 2 / 2)
    if rec.parameter == "σ":
        if definition is Definition.PURE:
            raise TesseraError("a discrete Gaussian step has no pure-DP guarantee")
        return discrete_gaussian.rho(rec.value, sens)
    raise TesseraError(f"unknown mechanism in step {step.role} #{step.round}: {rec.name}")


def prove(steps: Sequence[Step], definition: Definition, neighbours: Neighbours,
          unit: PrivacyUnit = ONE_ROW) -> Guarantee:
    """What a sequence of (adaptively chosen) steps spends: the exact sum of their costs,
    rounded up (basic composition for pure DP, additivity for zCDP). ``unit``: the unit the
    steps' sensitivities are a change of (a person: K times a row's, recorded in each step)."""
    total = sum((Fraction(step_cost(s, definition)) for s in steps), Fraction(0))
    value = float_at_least(total)
    if definition is Definition.PURE:
        return Guarantee.pure(value, neighbours, note=_composition_note(definition), unit=unit)
    if definition is Definition.ZCDP:
        return Guarantee.zcdp(value, neighbours, note=_composition_note(definition), unit=unit)
    raise TesseraError(f"runs are accounted in pure DP or zCDP, not {definition.label}")
