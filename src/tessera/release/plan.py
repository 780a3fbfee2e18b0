"""The noise plan of a release: per-query noise calibrated from the workload alone
(docs/theory.md §3, §7).

Everything here is a function of the *public* inputs — schema, workload, budget, neighbour
relation — never of the data, so a third party can recompute it (``tessera verify``).

Calibration (with the budget's calibration definition, pure ε or ρ-zCDP, and total B):

* ``uniform``: every query the same noise: b = γ/ε (pure) or σ² = γ/(2ρ), γ = γ(Q) exact or a
  proven upper bound (Smith et al., Thm 6);
* ``shares``: the budget split in proportion to the workload's weights w_q: ε_q = ε w_q/γ_w or
  ρ_q = ρ w_q²/γ_w (:mod:`tessera.calibration.scales`);
* ``importance``: the weights are error importances; Σ_q w_q Var_q is minimised subject to the
  overlap constraint by cutting planes (:mod:`tessera.calibration.allocation`);
* ``optimal`` (what ``auto`` means for predicate queries of one weight): ``importance`` with
  unit importances — the least total variance Σ_q Var_q any split of the budget meeting the
  overlap constraint gets (:mod:`tessera.calibration.optimal`, docs/theory.md §10.4). The
  allocation keeps the best of the cutting plane's split, the Lagrange shape and the uniform
  split, so it is never worse than ``uniform``; ``tessera verify`` re-proves the stated split
  (an optimiser under a time limit need not return the same split twice) and checks that it
  is no worse than the uniform one.

Then, independently of how the scales were found, the plan is **re-checked**: the per-query
costs c_q = 1/b_q (pure) or 1/(2σ_q²) (zCDP) compose along any row to at most
spent = max_x Σ_{q∈I(x)} c_q (or over I(x) Δ I(y) under substitution), computed by the overlap
solver as an exact value or a proven upper bound. The plan is refused unless spent ≤ B.

The re-check is :func:`certify`: the very check ``tessera verify`` runs on a certificate's
stated scales (:func:`recheck_spent`), on the scales as the certificate writes them and reads
them back, with nothing assumed of how they were found. Its bound is a solver's, on costs
rounded up to a grid (:mod:`tessera.release.exact_costs`, and ToulBar2's 2⁴⁰ integer costs:
:mod:`tessera.overlap.wcsp`), so it can sit above the row the calibration's own oracle bounded
by more than the calibration's rounding margin (:func:`~tessera.calibration.optimal.widened`,
1e-12) — ~2e-10 (relative) at 200 queries — or far more when its route is looser (a time
limit; under substitution beyond ToulBar2's reach, min(2·S, Σ)): a split the calibration
proves can be one the re-check does not. Then :func:`certify` widens the scales (larger noise,
the safe direction) by the least margin it finds that proves them, before anything is charged,
so that every certificate's spend is proved from the certificate alone.

**Per person** (``unit``: a privacy id and at most K rows each, docs/theory.md §3.13) both
proofs are a person's: the calibration's γ_w is K·γ (pure ε) or the score K²·S (ρ), so every
noise scale grows by K (b, and σ), and the re-check's spent is K (ε) or K² (ρ) times the
row-level maximum — the larger of the add/remove and the substitution one when a person is
substituted. c_q stay per unit of sensitivity: what one row pays, what the ledger stores.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import numpy as np
import numpy.typing as npt

from tessera.accounting import pld
from tessera.accounting.composition import homogeneous_overlap
from tessera.accounting.guarantee import Guarantee
from tessera.accounting.zcdp import epsilon_for_delta
from tessera.calibration.cost import workload_cost
from tessera.calibration.optimal import OPTIMAL_SECONDS, optimal_split, optimisable, widened
from tessera.calibration.scales import normalised_weights
from tessera.errors import TesseraError
from tessera.mechanisms import discrete_gaussian, discrete_laplace
from tessera.overlap import OverlapResult
from tessera.privacy import ONE_ROW, Definition, Neighbours, PrivacyUnit
from tessera.release.budget import DISCRETE_LAPLACE, Budget
from tessera.workload.files import require_at_most
from tessera.workload.workload import Workload

logger = logging.getLogger(__name__)

Allocation = Literal["auto", "uniform", "shares", "importance", "optimal"]
ALLOCATIONS = ("auto", "uniform", "shares", "importance", "optimal")
#: The allocations an optimiser computes (under a time limit): verify re-proves their scales.
OPTIMISED = ("importance", "optimal")

#: δ values at which the certificate states (ε, δ)-DP.
REPORTED_DELTAS = (1e-5, 1e-6, 1e-9)
#: Share of a plan's time limit for the calibration's overlap solves (the re-check gets the rest).
CALIBRATION_SHARE = 2.0 / 3.0
#: Most queries a noise plan calibrates (and a release answers): the plan keeps several float
#: arrays per query and the release a noisy answer, interval and name each (NLTCS all 7-way
#: marginals, 1,464,320 cells: 0.44 GiB peak; Adult all 4-way, 131,761,493 cells: out of memory
#: above 11 GiB; docs/benchmarks.md "Resource guards").
PLAN_MAX_QUERIES = 10_000_000
#: Interval level of the per-query intervals.
INTERVAL_LEVEL = 0.95
#: Re-checks :func:`certify` runs (the first, then widened scales) before it refuses a plan.
CERTIFY_ROUNDS = 5
#: The first widening's margin (relative) at most: the size of ToulBar2's rounding slack (its
#: bound counts as exact within 1e-9 of its row: :mod:`tessera.overlap.wcsp`); each further
#: widening's margin is :data:`CERTIFY_GROWTH` times the last.
CERTIFY_MARGIN = 1e-9
#: Growth of the widening margin per round (1e-9, 3.2e-8, 1e-6, 3.3e-5): a bound moves only
#: when the costs cross its grid, by up to a whole grid unit per query a row pays.
CERTIFY_GROWTH = 32.0


@dataclass(frozen=True, eq=False)
class NoisePlan:
    """Per-query noise for ``workload`` under ``budget``, with what it provably costs.

    ``scales[q]``: discrete Laplace scale b_q or discrete Gaussian σ_q (∞: not released);
    ``costs[q]``: c_q = 1/b_q or 1/(2σ_q²); ``overlap``: γ_w of the calibration;
    ``spent``: the re-checked max_x Σ_{I(x)} c_q (≤ ``total``), exact or a proven upper bound
    (``spent_exact``); ``halfwidths[q]``: the exact 95% half-width of the noise. ``unit``: one
    row, or one person of at most K rows: ``overlap`` and ``spent`` are then a person's (K or
    K² times a row's; ``costs`` stay a row's, per unit of sensitivity).
    """

    workload: Workload
    budget: Budget
    neighbours: Neighbours
    allocation: str
    method: str
    overlap: OverlapResult
    scales: npt.NDArray[np.float64]
    costs: npt.NDArray[np.float64]
    spent: float
    spent_exact: bool
    halfwidths: npt.NDArray[np.int64]
    unit: PrivacyUnit = ONE_ROW

    @property
    def mechanism(self) -> str:
        return self.budget.mechanism

    @property
    def total(self) -> float:
        return self.budget.total

    @property
    def sequential(self) -> float:
        """Σ_q c_q: what the same noise would cost under sequential composition."""
        return float(math.fsum(self.costs[np.isfinite(self.costs)].tolist()))

    def guarantees(self) -> tuple[Guarantee, ...]:
        """Every guarantee the mechanism that runs provably has (never the target alone), each
        naming its relation over the plan's unit (one row, or one person)."""
        n, unit = self.neighbours, self.unit
        basis = "exact" if self.spent_exact else "upper bound"
        person = ("" if unit.is_row else "; a person counted once per query pays the coverage "
                  f"of {unit.max_rows} rows" if unit.counts_people
                  else f"; a person pays {self._factor()} × a row's")
        if self.mechanism == DISCRETE_LAPLACE:
            eps = self.spent
            out = [
                Guarantee.pure(eps, n, basis=basis, note="discrete Laplace, analytic map"
                               + person, unit=unit),
                # pure ε ⇒ ε²/2-zCDP (Bun–Steinke 2016, Prop. 1.4)
                Guarantee.zcdp(_half_square_up(eps), n, basis="upper bound",
                               note="from pure ε", unit=unit),
            ]
            for delta, (value, note) in zip(REPORTED_DELTAS, self._laplace_profile()):
                out.append(Guarantee.approx(value, delta, n, basis="upper bound", note=note,
                                            unit=unit))
            return tuple(out)
        rho = self.spent
        out = [Guarantee.zcdp(rho, n, basis=basis, note="discrete Gaussian (CKS20 Thm 4)"
                              + person, unit=unit)]
        deltas = REPORTED_DELTAS
        if self.budget.delta is not None and self.budget.delta not in deltas:
            deltas = (float(self.budget.delta), *deltas)  # the δ the user asked for, first
        for delta in deltas:
            out.append(Guarantee.approx(epsilon_for_delta(rho, delta), delta, n,
                                        basis="upper bound", note="from ρ-zCDP (CKS20 Cor. 13)",
                                        unit=unit))
        return tuple(out)

    def _factor(self) -> int:
        """What a person pays in multiples of a row's score: K (ε) or K² (ρ) (counting rows)."""
        return self.unit.factor(self.budget.calibration)


    def _laplace_profile(self) -> list[tuple[float, str]]:
        """ε(δ) at :data:`REPORTED_DELTAS` for a discrete-Laplace plan: pure ε always holds;
        when every released query has the same scale b and a row meets at most k of them
        (k = ⌈spent·b⌉), the pessimistic PLD of k-fold composition (dp-accounting) is tighter
        (Smith et al., Thm 6 with f = the discrete Laplace trade-off). Per person (a count may
        move by up to K, not 1) only the pure-ε profile is stated."""
        pure = [(self.spent, "implied by pure ε-DP")] * len(REPORTED_DELTAS)
        finite = self.scales[np.isfinite(self.scales)]
        if finite.size == 0 or not np.all(finite == finite[0]) or not self.unit.is_row:
            return pure
        b = float(finite[0])
        k = math.ceil(self.spent * b - 1e-9)
        if not 1 <= k <= 10_000:
            return pure
        f = homogeneous_overlap(pld.discrete_laplace(b), k)
        out = []
        for delta, (eps, note) in zip(REPORTED_DELTAS, pure):
            e = float(f.epsilon(delta))
            out.append((e, f"{k}-fold discrete Laplace, pessimistic PLD") if e < eps
                       else (eps, note))
        return out


def check_released(weights: npt.NDArray[np.float64]) -> None:
    """Weight 0 means "not released" (docs/theory.md §3.10): a workload whose every weight is 0
    releases nothing, and is refused before any budget is spent."""
    if not np.any(weights > 0):
        raise TesseraError("every query of the workload has weight 0: nothing would be released",
                           hint="weight 0 means 'not released'; give the queries to release a "
                           "weight > 0")


def noise_plan(
    workload: Workload,
    budget: Budget,
    *,
    neighbours: Neighbours | str = Neighbours.ADD_REMOVE,
    allocation: Allocation = "auto",
    time_limit: float | None = 60.0,
    max_queries: int = PLAN_MAX_QUERIES,
    stated_scales: npt.ArrayLike | None = None,
    certified: Certified | None = None,
    unit: PrivacyUnit = ONE_ROW,
) -> NoisePlan:
    """Calibrate per-query noise for ``budget`` (module docs); refuse rather than overspend.

    ``time_limit`` (seconds) covers the whole plan: the calibration's overlap solves get
    :data:`CALIBRATION_SHARE` of it and the independent re-check the rest (each returns a proven
    upper bound if it stops early, never a lower one). ``stated_scales`` (``tessera verify``):
    for an optimised allocation (:data:`OPTIMISED`), the per-query scales a certificate states,
    re-proved by the same re-check instead of re-optimised (never widened: they are checked as
    stated); ignored for the others, which are recomputed. Scales this function computes are
    :func:`certify`-ed: re-checked as a certificate states them and widened if the re-check
    needs a margin to prove the budget from them alone. ``certified``: the stated scales are
    the strategy chooser's split, already :func:`certify`-ed (its ``scales`` are the stated
    ones): its proof is taken rather than run twice.
    ``unit``: one row, or one person of at most K rows (module docs, "Per person")."""
    rel = Neighbours.parse(neighbours)
    if allocation not in ALLOCATIONS:
        raise TesseraError(f"unknown allocation {allocation!r}", hint=", ".join(ALLOCATIONS))
    t = workload.n_queries
    if t == 0:
        raise TesseraError("the workload has no queries")
    require_at_most(t, max_queries, "a release of", "answer fewer families per release (the "
                    "ledger composes releases), or raise the limit: noise_plan(..., max_queries=N)")
    w = workload.weight_array()
    check_released(w)
    if allocation in OPTIMISED and unit.counts_people:
        raise TesseraError(f"the {allocation} split scales a row's cost by K; a person counted "
                           "once per query pays the coverage of K rows instead",
                           hint="use --weights uniform or shares with --count people")
    if allocation == "auto":
        allocation = (("optimal" if optimisable(workload) and not unit.counts_people
                       else "uniform")
                      if np.all(w == w[0]) else "shares")
        # (W's own weights when they differ: shares; ``importance`` makes them error weights)
    comp, total = budget.calibration, budget.total
    start = time.monotonic()
    calibration_limit = None if time_limit is None else CALIBRATION_SHARE * time_limit
    if allocation in OPTIMISED:
        if workload.is_structured:
            raise TesseraError(
                f"{allocation} allocation takes predicate workloads; structured families "
                "get their budget share from their weights",
                hint="use --weights shares (or uniform) with marginals, cubes and hierarchies",
            )
        # γ of the unit weights: the certificate's overlap, and the uniform split's calibration
        cost = workload_cost(_with_weights(workload, (w > 0).astype(np.float64)),
                             definition=comp, neighbours=rel, time_limit=calibration_limit,
                             unit=unit)
        overlap = cost.weighted
        if stated_scales is not None:
            scales = stated(stated_scales, t)
            method = f"{allocation} (re-proved from the stated scales)"
        else:
            # weight 0 is never released (docs/theory.md §3.10): the split is the released
            # queries' alone, and so is the comparison with the uniform split below
            released = w > 0
            split = optimal_split(
                _released_only(workload, released), comp, total, rel,
                importance=w[released] if allocation == "importance" else None,
                time_limit=(OPTIMAL_SECONDS if calibration_limit is None
                            else min(calibration_limit, OPTIMAL_SECONDS))
                if allocation == "optimal" else calibration_limit, unit=unit)
            scales = np.full(t, np.inf)
            scales[released] = split.scales
            method = f"{allocation}: {split.method}"
            # the optimiser's own uniform candidate is rescaled by its oracle's bound, which a
            # time limit can leave above the exact γ: compare with the plan's uniform split
            uniform = widened(cost.scales(total), t)
            if allocation == "optimal" and (np.sum(uniform[released]**2)
                                            <= np.sum(scales[released]**2)):
                scales = uniform
                method = (f"optimal: the uniform split (γ_w {cost.status}; the optimiser found "
                          "nothing better in its time)")
    else:
        # only the ratios of the shares matter: normalise, so that tiny weights (whose squares
        # would underflow under zCDP) calibrate like any others
        # uniform: equal shares for every released query (weight 0 is never released)
        shares = ((w > 0).astype(np.float64) if allocation == "uniform"
                  else normalised_weights(w))
        wl = _with_weights(workload, shares)
        cost = workload_cost(wl, definition=comp, neighbours=rel, time_limit=calibration_limit,
                             unit=unit)
        overlap = cost.weighted
        scales = cost.scales(total)
        method = f"{allocation} (γ_w {cost.status}, {overlap.method})"
        scales = widened(scales, t)  # for rounding; then re-checked exactly
    left = None if time_limit is None else max(1.0, time_limit - (time.monotonic() - start))
    if allocation in OPTIMISED and stated_scales is not None and certified is None:
        # a certificate's stated scales (verify): the re-check alone must prove them, as stated
        costs = _costs(budget, scales)
        spent, exact = recheck_spent(workload, costs, rel, total, left, unit=unit,
                                     definition=comp)
    else:
        if certified is not None and not np.array_equal(certified.scales, scales):
            raise TesseraError("internal error: the certified scales are not the stated ones",
                               hint="report this")
        proof = certify(workload, budget, rel, scales, left,
                                                   unit=unit) if certified is None else certified
        scales, costs, spent, exact = proof.scales, proof.costs, proof.spent, proof.exact
        if proof.widened > 0:
            method += (f"; scales widened by {proof.widened:.2g} (relative) so that the "
                       "re-check proves the budget from them alone")
    halfwidths = _halfwidths(budget, scales)
    logger.info("calibrated %s queries: %s, %s neighbours; γ_w = %.6g (%s), allocation %s; "
                "spent %.6g of %.6g (%s)", f"{t:,}", budget.text(), rel.label, overlap.bound,
                "exact" if overlap.exact else "upper bound", method, spent, total,
                "exact" if exact else "upper bound")
    return NoisePlan(workload, budget, rel, allocation, method, overlap, scales, costs, spent,
                     exact, halfwidths, unit)


def stated(scales: npt.ArrayLike, t: int) -> npt.NDArray[np.float64]:
    """A certificate's per-query scales as an array (None: not released, ∞), checked."""
    raw = [math.inf if s is None else s for s in np.asarray(scales, dtype=object).tolist()]
    if len(raw) != t:
        raise TesseraError(f"{len(raw)} stated scales for {t} queries")
    out = np.asarray(raw, dtype=np.float64)
    if np.any(np.isnan(out)) or np.any(out <= 0):
        raise TesseraError("a stated noise scale is not a positive number")
    return out


def restated(plan: NoisePlan, scales: npt.ArrayLike, time_limit: float | None = 60.0
              ) -> NoisePlan:
    """``plan`` with a certificate's stated per-query scales in place of its own (``tessera
    verify``): the privacy proof of what ran rests on those scales alone — the costs c_q from
    them (rounded up, :func:`_costs`), the exact re-check max over one neighbour change of Σ c_q
    (exact or a proven upper bound, refused above the total; no calibration proof is assumed:
    :func:`recheck_spent`), the exact half-widths. The overlap (γ_w of the split's shares) and
    the method stay the plan's: they describe the recomputed split, which verify compares with
    the stated one to a tolerance. Scales equal to the plan's give the plan itself (its spend
    was proved by the same re-check of the same scales: :func:`noise_plan`)."""
    s = stated(scales, plan.workload.n_queries)
    if np.array_equal(s, plan.scales):
        return plan
    costs = _costs(plan.budget, s)
    spent, exact = recheck_spent(plan.workload, costs, plan.neighbours, plan.total, time_limit,
                                 unit=plan.unit, definition=plan.budget.calibration)
    return dataclasses.replace(plan, scales=s, costs=costs, spent=spent, spent_exact=exact,
                               halfwidths=_halfwidths(plan.budget, s))


def uniform_excess(plan: NoisePlan, time_limit: float | None = 60.0) -> float:
    """Σ_q Var_q of the plan over Σ_q Var_q of the uniform split of the same budget, minus 1
    (≤ 0: never worse than uniform, the promise of ``optimal``). Both in the continuous noise
    model (2b² or σ²) over the released queries. The uniform split is the one the plan's
    ``optimal`` allocation compares with (:func:`noise_plan`): calibrated to γ of the released
    queries (one overlap solve), widened for rounding — a reference, not a release, so it is
    not :func:`certify`-ed."""
    w = plan.workload.weight_array()
    cost = workload_cost(_with_weights(plan.workload, (w > 0).astype(np.float64)),
                         definition=plan.budget.calibration, neighbours=plan.neighbours,
                         time_limit=None if time_limit is None
                         else CALIBRATION_SHARE * time_limit, unit=plan.unit)
    uniform = widened(cost.scales(plan.total), plan.workload.n_queries)

    def total_variance(scales: npt.NDArray[np.float64]) -> float:
        s = scales[np.isfinite(scales)]
        return float(np.sum((2.0 if plan.mechanism == DISCRETE_LAPLACE else 1.0) * s * s))
    return total_variance(plan.scales) / total_variance(uniform) - 1.0


def _half_square_up(eps: float) -> float:
    """ε²/2 rounded up (in the decimals every budget figure is read as, docs/theory.md §9):
    the zCDP that pure ε-DP implies (Bun–Steinke 2016, Prop. 1.4), never understated."""
    from tessera.release.decimals import decimal_value, float_up

    return float_up(decimal_value(eps) ** 2 / 2)


def _with_weights(workload: Workload, weights: npt.ArrayLike) -> Workload:
    """The workload with these weights (expanded order: predicate queries, then each family's
    cells; a family's cells must share one weight)."""
    w = np.asarray(weights, dtype=np.float64)
    k = len(workload.queries)
    families = []
    for p, cells in workload.family_slices():
        share = w[cells]
        if share.size and not np.all(share == share[0]):
            raise TesseraError(f"family {p.name!r}: its cells need one weight")
        families.append(dataclasses.replace(p, weight=float(share[0]) if share.size else 1.0))
    return Workload(workload.domain, workload.queries, workload.names,
                    tuple(float(x) for x in w[:k]), workload.sources, tuple(families))


class Unproven(TesseraError):
    """The re-check's proven bound lies above the total while no row is known to exceed it:
    the stated scales do not prove the budget (``bound`` and ``achieved``: the exact
    :class:`~tessera.release.exact_costs.CostBound` values, as decimals of the costs)."""

    def __init__(self, message: str, *, hint: str | None = None, where: str | None = None,
                 bound: Fraction = Fraction(0), achieved: Fraction = Fraction(0)) -> None:
        super().__init__(message, hint=hint, where=where)
        self.bound = bound
        self.achieved = achieved

    def located(self, where: str) -> Unproven:
        out = super().located(where)
        assert isinstance(out, Unproven)
        out.bound, out.achieved = self.bound, self.achieved
        return out


@dataclass(frozen=True, eq=False)
class Certified:
    """Scales as a certificate states them, with the spend the re-check proves from them alone
    (:func:`certify`): ``costs`` c_q from ``scales`` (:func:`_costs`), ``spent`` ≤ the total
    (exact or a proven upper bound: ``exact``), ``widened`` the relative margin by which the
    given scales were raised to get the proof (0: none)."""

    scales: npt.NDArray[np.float64]
    costs: npt.NDArray[np.float64]
    spent: float
    exact: bool
    widened: float


def as_written(scales: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """The scales a certificate states, as ``tessera verify`` reads them back: each through JSON
    (∞, not released, as null) and :func:`stated`. (Python writes a float as its shortest
    round-tripping decimal, so this is the identity — checked here rather than assumed, on the
    distinct values only: a marginal's cells share one scale.)"""
    s = np.asarray(scales, dtype=np.float64)
    values, inverse = np.unique(s, return_inverse=True)
    text = json.dumps([float(x) if math.isfinite(x) else None for x in values.tolist()])
    back = stated(json.loads(text), values.size)
    return back[inverse.ravel()].reshape(s.shape)


def certify(workload: Workload, budget: Budget, neighbours: Neighbours,
            scales: npt.ArrayLike, time_limit: float | None, *,
            unit: PrivacyUnit = ONE_ROW) -> Certified:
    """Scales whose spend the re-check proves ≤ the total *from the scales alone*, as written
    in a certificate: what ``tessera verify`` runs (:func:`recheck_spent` on :func:`as_written`
    scales, no calibration proof assumed), run by the release on its own scales before
    anything is charged (module docs).

    When the re-check's bound V lies above the total B while its witness A does not (a bound
    looser than the calibration's by the solvers' rounding of costs, or a time limit), the
    scales are raised so that the costs shrink by r = (B/V)(1 − m). The true maximum M ∈ [A, V]
    then becomes rM ≤ B(1 − m), and the new bound is rM plus the re-check's rounding slack δ,
    which does not follow costs moved by less than its grid: m must cover δ. First
    m = min((V − A)/V, :data:`CERTIFY_MARGIN`) (the bound's own slack, when it is a few
    roundings of ToulBar2's 2⁴⁰ grid: ~2e-10 at 200 queries); then, since a bound moves only
    when costs cross its grid (equal costs all at once, by a whole unit per query a row pays),
    a margin :data:`CERTIFY_GROWTH` times larger each round. Scales only grow (more noise), so
    this never weakens a guarantee; after :data:`CERTIFY_ROUNDS` re-checks without a proof the
    plan is refused (nothing charged). A row that provably pays more than B is refused at once:
    the calibration is wrong."""
    from tessera.release.decimals import decimal_value

    s = as_written(scales)
    start = s
    limit = decimal_value(budget.total)
    power = 1.0 if budget.mechanism == DISCRETE_LAPLACE else 2.0  # c ∝ 1/b or 1/σ²
    for k in range(CERTIFY_ROUNDS):
        costs = _costs(budget, s)
        try:
            spent, exact = recheck_spent(workload, costs, neighbours, budget.total, time_limit,
                                         unit=unit, definition=budget.calibration)
        except Unproven as e:
            if k == CERTIFY_ROUNDS - 1:
                raise TesseraError(
                    f"{e.message}, and {CERTIFY_ROUNDS - 1} widenings of the noise did not "
                    "prove it either: refusing to release (nothing was charged)",
                    hint="give the plan more time (--time-limit): the re-check's bound is "
                         "looser than the calibration's") from None
            v, a = e.bound, e.achieved
            m = (min(float((v - a) / v), CERTIFY_MARGIN) if k == 0
                 else CERTIFY_MARGIN * CERTIFY_GROWTH**k)
            r = float(limit / v) * (1.0 - m)  # < 1: the costs' shrink factor
            finite = np.isfinite(s)
            s = as_written(np.where(finite, s * r ** (-1.0 / power), s))
            continue
        finite = np.isfinite(start)
        grown = float(np.max(s[finite] / start[finite])) - 1.0 if finite.any() else 0.0
        return Certified(s, costs, spent, exact, max(grown, 0.0))
    raise AssertionError("unreachable")  # (the last round returns or raises)


def _released_only(workload: Workload, released: npt.NDArray[np.bool_]) -> Workload:
    """The predicate queries of ``workload`` that are released (itself when all are)."""
    if np.all(released):
        return workload
    keep = np.flatnonzero(released).tolist()
    sources = None if workload.sources is None else tuple(workload.sources[i] for i in keep)
    return Workload(workload.domain, tuple(workload.queries[i] for i in keep),
                    tuple(workload.names[i] for i in keep),
                    tuple(workload.weights[i] for i in keep), sources, ())


def unit_costs(budget: Budget, scales: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The costs c_q per unit of sensitivity of noise at ``scales`` (1/b or 1/(2σ²)), each
    rounded up (:func:`_costs`): what every re-check of a release's spend starts from."""
    return _costs(budget, scales)


def _costs(budget: Budget, scales: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """c_q = Δ/b_q (discrete Laplace, ε) or Δ²/(2σ_q²) (discrete Gaussian, ρ), Δ = 1, each
    rounded up by two ulps: the float cost is never below the mechanism's true parameter (the
    division and the square round to nearest, each by at most half an ulp)."""
    with np.errstate(divide="ignore"):
        if budget.mechanism == DISCRETE_LAPLACE:
            raw = np.where(np.isfinite(scales), 1.0 / scales, 0.0)
        else:
            raw = np.where(np.isfinite(scales), 1.0 / (2.0 * scales * scales), 0.0)
    up = np.nextafter(np.nextafter(raw, np.inf), np.inf)
    return np.where(raw > 0, up, 0.0)


def recheck_spent(
    workload: Workload, costs: npt.NDArray[np.float64], neighbours: Neighbours, total: float,
    time_limit: float | None, *, unit: PrivacyUnit = ONE_ROW,
    definition: Definition = Definition.PURE,
) -> tuple[float, bool]:
    """max over one neighbour change of Σ c_q, exact or a proven upper bound; refuse > total.
    Per person (``unit``) the change is a person's: ``unit.factor(definition)`` (K for ε, K²
    for ρ) times the row-level maximum (:func:`tessera.release.exact_costs.cost_bound`).

    The costs add in both calibration definitions (ε and ρ compose by summation), so this is
    the weighted maximum overlap with comp ``pure`` and weights c — computed in the ledger's
    exact arithmetic (:func:`tessera.release.exact_costs.cost_bound`: each cost is the decimal
    it prints as, sums are exact rationals, the bound is rounded up), so that a certificate's
    ``spent.value`` and the ledger's charge are one number from one source, and the comparison
    with the total has no tolerance.

    Nothing is assumed of how the costs were found: this is the whole proof, for the release
    (through :func:`certify`) as for ``tessera verify``. A bound above the total with no row
    known to exceed it (a time limit, or costs rounded up to a solver's grid) proves nothing:
    :class:`Unproven` (which :func:`certify` answers by widening the release's own scales);
    a row that provably pays more: a plain refusal."""
    from tessera.release.decimals import decimal_value
    from tessera.release.exact_costs import cost_bound

    if not np.all(np.isfinite(costs)) or np.any(costs < 0):
        raise TesseraError("a noise scale came out non-positive: refusing to release")
    limit = decimal_value(total)
    subject = workload if workload.is_structured else workload.queries
    cb = cost_bound(workload.domain, subject, costs, neighbours=neighbours,
                    time_limit=time_limit, threshold=limit, unit=unit, definition=definition)
    if cb.value <= limit:
        return cb.bound, cb.exact
    if cb.achieved_value > limit:
        # a row provably pays more than the budget (when the solve is exact and no cost was
        # rounded, the witness attains the maximum itself): the calibration is wrong, never
        # release — no tolerance
        raise TesseraError(
            f"the noise plan re-checks at {float(cb.achieved_value):.17g} > budget "
            f"{total:.17g}: a row pays more than the budget; refusing to release",
            hint="report this: the calibration and the re-check disagree",
        )
    raise Unproven(
        f"the stated noise re-checks at ≤ {float(cb.value):.17g}, which does not prove the "
        f"budget {total:.17g}",
        hint="give the re-check more time (--time-limit), or the scales are too small",
        bound=cb.value, achieved=cb.achieved_value)


#: The half-width stored for a noise whose 95% half-width exceeds int64 (a discrete Laplace
#: scale above ~2.5·10^18): such a scale is far past what the samplers accept (2^52), so the
#: release refuses it before any charge (``answering``'s scale check) and the value, a lower
#: bound, is never stated; it only keeps the plan computable up to that check.
SATURATED_HALFWIDTH = int(np.iinfo(np.int64).max)


def _halfwidths(budget: Budget, scales: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """Exact 95% half-widths of the discrete noise, computed once per distinct scale (closed
    form for the discrete Laplace, whatever the scale; above int64:
    :data:`SATURATED_HALFWIDTH`)."""
    out = np.full(scales.shape, -1, dtype=np.int64)  # -1: not released
    fn = (discrete_laplace.interval_halfwidth if budget.mechanism == DISCRETE_LAPLACE
          else discrete_gaussian.interval_halfwidth)
    finite = np.isfinite(scales)
    values, inverse = np.unique(scales[finite], return_inverse=True)
    widths = np.array([min(fn(float(s), INTERVAL_LEVEL), SATURATED_HALFWIDTH) for s in values],
                      dtype=np.int64)
    out[finite] = widths[inverse.ravel()]
    return out
