"""A release through a strategy: measure the chosen strategy, reconstruct W (docs/theory.md §10).

:func:`strategy_plan` chooses the strategy from the public inputs (:mod:`tessera.strategy`) and
calibrates the noise of the *measured* queries with :func:`~.plan.noise_plan` — their own γ_w,
the strategy's shares, the independent re-check — so the ledger charge, the certificate and
``tessera verify`` cover what was actually measured. :func:`reconstruct` turns the noisy
measured answers into W's answers by generalised least squares, with each answer's exact
variance (from the discrete noises' exact variances) and a 95% interval from the normal
approximation to the linear combination of independent noises (labelled as such: it is not a
proven bound).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from tessera.errors import TesseraError
from tessera.mechanisms import discrete_gaussian, discrete_laplace
from tessera.mechanisms.randomness import NoiseSource
from tessera.mechanisms.record import MechanismRecord
from tessera.privacy import ONE_ROW, Neighbours, PrivacyUnit
from tessera.release.budget import DISCRETE_LAPLACE, Budget
from tessera.release.plan import (
    CALIBRATION_SHARE,
    Allocation,
    Certified,
    NoisePlan,
    certify,
    check_released,
    noise_plan,
    stated,
)
from tessera.strategy.candidates import Copy, Strategy, contrast_layout, root_weights
from tessera.strategy.choose import (
    StrategyChoice,
    choose_strategy,
    only_direct,
    people_strategy,
)
from tessera.strategy.contrasts import contrast_sigma
from tessera.strategy.rectangles import two_attributes
from tessera.strategy.stated_shares import shares_of
from tessera.workload.canonical import workload_hash
from tessera.workload.workload import Workload

#: z of the two-sided 95% normal interval.
Z95 = 1.959963984540054
#: ``strategy.max_split`` of a certificate made under ``--objective max`` whose W is a 2-D range
#: family: marginal, tree *and* 2-D product-of-trees candidates took the minimax split
#: (``minimax``: made before the products took theirs — they kept the total's split).
MINIMAX_RECTANGLES = "minimax-rectangles"
INTERVAL_NOTE = ("95% interval: ±1.96 × the exact standard deviation of the GLS estimate "
                 "(normal approximation to a linear combination of independent discrete "
                 "noises; not a proven bound)")


@dataclass(frozen=True, eq=False)
class Reconstructed:
    """W's answers from the measured strategy: ``answers``, exact ``variances``, 95%
    ``halfwidths`` (normal approximation, :data:`INTERVAL_NOTE`)."""

    choice: StrategyChoice
    answers: npt.NDArray[np.float64]
    variances: npt.NDArray[np.float64]
    #: direct (duplicates merged): each answer's own exact discrete-noise half-width
    exact_halfwidths: npt.NDArray[np.int64] | None = None

    @property
    def workload(self) -> Workload:
        return self.choice.chosen.workload

    @property
    def halfwidths(self) -> npt.NDArray[np.float64]:
        if self.exact_halfwidths is not None:
            return np.where(self.exact_halfwidths >= 0, self.exact_halfwidths, np.nan)
        return Z95 * np.sqrt(self.variances)


def strategy_plan(
    workload: Workload, budget: Budget, *, neighbours: Neighbours | str, allocation: Allocation,
    strategy: str, objective: str, time_limit: float | None, estimate: str = "gls",
    stated_scales: npt.ArrayLike | None = None, direct_split: str = "optimal",
    max_split: str = MINIMAX_RECTANGLES, stated_chosen: str | None = None,
    recorded_direct: npt.ArrayLike | None = None,
    stated_shares: dict[str, tuple[float, ...]] | None = None,
    unit: PrivacyUnit = ONE_ROW,
) -> tuple[NoisePlan, StrategyChoice | None]:
    """The noise plan of what is measured, and the strategy choice (None: the workload itself is
    measured as given — an explicit allocation, or ``auto`` where no other candidate applies
    and nothing repeats — the plan as before strategies). ``stated_scales``: ``tessera
    verify``'s certificate scales of the measured queries (:func:`~.plan.noise_plan`);
    ``direct_split``: ``shares`` recomputes a certificate made before ``direct`` optimised its
    split (its strategy section has no ``direct_split``); ``max_split``: ``best-of-two``
    recomputes one made under ``max`` before marginal and tree candidates took the minimax
    split (no ``max_split``), ``minimax`` one made before 2-D products of trees took theirs
    (:data:`MINIMAX_RECTANGLES`: the default, every minimax split); ``stated_chosen``: the
    certificate's chosen strategy — when it is ``direct`` with the ``optimal`` split, the
    stated scales *are* that split: the cutting-plane optimiser is not run again (its stop
    under a wall-clock guard need not be reproducible), and verify checks them instead
    (privacy re-proved, no worse than uniform);
    ``recorded_direct``: the optimised split of a ``direct`` candidate that lost, as the
    certificate's candidate table records it (:func:`recorded_direct_split`) — taken in place
    of the optimiser likewise, and checked by :func:`check_direct_split`; ``stated_shares``:
    the shares of every non-direct candidate the certificate's candidate table states, by name
    (:func:`stated_share_values`), taken in place of the recomputed and rounded ones
    (:mod:`tessera.strategy.stated_shares`); ``unit``: one row, or one person of at most K
    rows, whom every candidate and the plan are calibrated for (docs/theory.md §3.13)."""
    rel = Neighbours.parse(neighbours)
    check_released(workload.weight_array())  # before any candidate is calibrated
    if unit.counts_people:  # W measured as it is (tessera.strategy.choose.people_strategy)
        people_strategy(strategy)
    if (allocation != "auto" and strategy in ("auto", "direct")) or unit.counts_people or (
            strategy == "auto" and only_direct(workload)
            and (objective != "max" or root_weights(workload) is workload)):
        # an explicit split of the budget over W's own queries, or nothing but W itself to
        # measure: W is measured as given (no strategy section in the certificate); under
        # ``max`` with weights 0/1 the uniform split is the exact optimum (candidates.direct)
        kind = "uniform" if allocation == "auto" and objective == "max" else allocation
        return noise_plan(workload, budget, neighbours=rel, allocation=kind,
                          time_limit=time_limit, stated_scales=stated_scales, unit=unit), None
    direct_scales = None
    if stated_scales is not None and stated_chosen == "direct" and direct_split == "optimal":
        given = np.asarray(stated_scales, dtype=object)
        direct_scales = tuple(float(x) for x in stated(given, given.size))
    elif recorded_direct is not None and direct_split == "optimal":
        given = np.asarray(recorded_direct, dtype=object)
        direct_scales = tuple(float(x) for x in stated(given, given.size))
    # a release certifies direct's optimised split where it is made (the check verify runs,
    # widening it if the proof needs a margin), so that the split the chooser compares, the one
    # measured and the one a losing candidate's row records are each what verify re-proves;
    # verify itself (stated scales) only checks. The proof gets the re-check's share of the
    # time limit, no more than verify's re-check of the same scales is sure to get.
    proofs: dict[bytes, Certified] = {}
    recheck_limit = None if time_limit is None else (1.0 - CALIBRATION_SHARE) * time_limit

    def certify_split(measured: Workload, scales: npt.NDArray[np.float64]
                      ) -> npt.NDArray[np.float64]:
        proof = certify(measured, budget, rel, scales, recheck_limit, unit=unit)
        proofs[proof.scales.tobytes()] = proof
        return proof.scales

    choice = choose_strategy(workload, budget.calibration, budget.total, neighbours=rel,
                             strategy=strategy, objective=objective, time_limit=time_limit,
                             estimate=estimate, optimise_direct=direct_split == "optimal",
                             minimax=max_split in ("minimax", MINIMAX_RECTANGLES),
                             minimax_rectangles=max_split == MINIMAX_RECTANGLES,
                             direct_scales=direct_scales,
                             stated_shares=stated_shares, unit=unit,
                             certify=certify_split if stated_scales is None else None)
    s = choice.chosen
    proof = None
    if s.split == "optimal":
        # the chooser's optimal split of the measured queries is the one measured: its proof
        # is the chooser's certificate-alone re-check (not run twice), and it is not optimised
        # a second time; verify's stated scales are re-proved by the plan
        kind = "optimal"
        if stated_scales is None:
            stated_scales = s.scales
            proof = proofs.get(np.asarray(s.scales, dtype=np.float64).tobytes())
    elif s.name == "direct":
        w = s.measured.weight_array()
        kind = "uniform" if np.all(w == w[0]) else "shares"
    else:
        kind = "shares"
    plan = noise_plan(s.measured, budget, neighbours=rel, allocation=kind,
                      time_limit=time_limit, stated_scales=stated_scales, certified=proof,
                      unit=unit)
    return plan, choice


def noise_variances(plan: NoisePlan) -> npt.NDArray[np.float64]:
    """The exact variance of every measured query's discrete noise (∞: not released)."""
    fn = (discrete_laplace.variance if plan.mechanism == DISCRETE_LAPLACE
          else discrete_gaussian.variance)
    out = np.full(plan.scales.shape, np.inf)
    finite = np.isfinite(plan.scales)
    values, inverse = np.unique(plan.scales[finite], return_inverse=True)
    out[finite] = np.array([fn(float(s)) for s in values])[inverse.ravel()]
    return out


def contrast_sigmas(plan: NoisePlan, strategy: Strategy) -> npt.NDArray[np.float64]:
    """σ_A of every residual's contrasts (:mod:`tessera.strategy.contrasts`): the plan's σ per
    unit sensitivity of family A times Δ_A, rounded up, its cost Δ_A²/(2σ_A²) checked
    exactly against the plan's (re-checked) cost of the family."""
    rc, starts = contrast_layout(strategy)
    return np.array([contrast_sigma(float(plan.scales[k]), rc.sensitivity2(sc),
                                    float(plan.costs[k]))
                     for sc, k in zip(rc.scopes, starts)])


def measure_contrasts(plan: NoisePlan, strategy: Strategy, exact: npt.ArrayLike,
                      source: NoiseSource) -> tuple[npt.NDArray[np.int64], MechanismRecord]:
    """The noisy contrasts of every residual: Y_A (integers, from the exact counts of the
    measured family A) + N_ℤ(0, σ_A²) each, from OpenDP's discrete Gaussian (one call per
    residual), in the order of the strategy's scopes."""
    rc, first = contrast_layout(strategy)
    counts = np.asarray(exact, dtype=np.int64)
    starts = list(first) + [len(counts)]
    sigmas = contrast_sigmas(plan, strategy)
    values = [rc.contrasts(sc, counts[starts[k]:starts[k + 1]]) for k, sc in
              enumerate(rc.scopes)]
    per = np.repeat(sigmas, [v.size for v in values])
    noisy = discrete_gaussian.sample(np.concatenate(values), per, source)
    return noisy.values, noisy.mechanism


def measured_noise_variances(plan: NoisePlan, strategy: Strategy) -> npt.NDArray[np.float64]:
    """The exact variance of the noise behind every measured query: its own discrete noise, or
    (residual contrasts) the noise of its family's contrasts, N_ℤ(0, σ_A²)."""
    if strategy.contrasts is None:
        return noise_variances(plan)
    starts = list(contrast_layout(strategy)[1]) + [len(plan.scales)]
    var = [discrete_gaussian.variance(float(sg)) for sg in contrast_sigmas(plan, strategy)]
    return np.repeat(var, np.diff(starts))


def reconstruct(plan: NoisePlan, choice: StrategyChoice,
                noisy: npt.NDArray[np.int64]) -> Reconstructed:
    """GLS answers of W from the measured noisy answers (post-processing: no privacy cost)."""
    s = choice.chosen
    answers, variances = s.estimate(noisy.astype(np.float64),
                                    measured_noise_variances(plan, s))
    # a query of weight 0 measured directly is not released (variance ∞): no answer
    answers = np.where(np.isfinite(variances), answers, np.nan)
    exact = None
    if isinstance(s.reconstruction, Copy):
        exact = plan.halfwidths[s.reconstruction.index]
    return Reconstructed(choice, answers, variances, exact)


def strategy_fields(choice: StrategyChoice, plan: NoisePlan) -> dict[str, Any]:
    """The certificate's ``strategy`` section: recomputable from the public inputs (with
    residual contrasts, each residual's contrasts, precisions, exact squared L2 sensitivity,
    σ and per-row cost)."""

    s = choice.chosen
    direct = next((c for c in choice.candidates if c.name == "direct"), None)
    rows = [{k: v for k, v in row.items() if k != "chosen"} for row in choice.table()]
    for row, c in zip(rows, choice.candidates):
        if c is direct and c is not s and c.split == "optimal":
            # the losing direct candidate's optimised split, so that verify need not run the
            # optimiser again (its wall-clock guard makes a run irreproducible):
            # :func:`check_direct_split`
            row["scales"] = [float(x) if np.isfinite(x) else None for x in c.scales]
        elif c is not direct:
            # the shares as used (each the shortest decimal of its float, which reads back to
            # it exactly): verify takes them from here rather than recomputing and rounding
            row["shares"] = [repr(w) for w in shares_of(c.measured)]
    fields = {
        "requested": choice.requested,
        "objective": choice.objective,
        "chosen": s.name,
        "target_workload": {"sha256": workload_hash(s.workload),
                            "queries": s.workload.n_queries},
        "measured_workload": {"sha256": workload_hash(s.measured),
                              "queries": s.measured.n_queries},
        "reconstruction": s.reconstruction.name,
        "interval": INTERVAL_NOTE if s.name != "direct" else "exact (the noise's own)",
        "candidates": rows,
    }
    if choice.estimate != "gls":
        fields["estimate"] = choice.estimate
    if direct is not None and direct.split != "shares":
        # the direct candidate's split (absent: its weights as shares, as in certificates made
        # before the optimal split; verify recomputes the choice with the same rule)
        fields["direct_split"] = direct.split
    if choice.objective == "max" and choice.minimax:
        # marginal and tree candidates took the minimax split (absent: the better of the
        # total-optimal and the equal split, as in certificates made before it)
        # (``minimax-rectangles``: and a 2-D product of trees took the minimax split of each
        # axis; ``minimax``, as before it, where no such candidate applies)
        fields["max_split"] = (MINIMAX_RECTANGLES if choice.minimax_rectangles
                               and two_attributes(choice.chosen.workload) is not None
                               else "minimax")
    if s.contrasts is not None:
        rc, starts = contrast_layout(s)
        fields["contrasts"] = [
            {"scope": list(sc), "contrasts": rc.n_contrasts(sc),
             "precision": [f.precision for f in rc.factors(sc)],
             "l2_sensitivity_squared": rc.sensitivity2(sc), "sigma": float(sg),
             "rho": float(plan.costs[k])}
            for sc, k, sg in zip(rc.scopes, starts, contrast_sigmas(plan, s))]
        fields["contrasts_note"] = CONTRASTS_NOTE
    return fields


def recorded_direct_split(section: dict[str, Any]) -> list[float | None] | None:
    """The optimised split of the losing ``direct`` candidate a certificate's ``strategy``
    section records in its candidate table (``candidates[k].scales``; None: none recorded — the
    chosen strategy is ``direct``, its split is not optimised, or the certificate was made
    before the split was recorded, when verify re-runs the optimiser)."""
    for row in section.get("candidates", []):
        if isinstance(row, dict) and row.get("strategy") == "direct" and "scales" in row:
            return list(row["scales"])
    return None


def stated_share_values(section: dict[str, Any]) -> dict[str, tuple[float, ...]]:
    """The shares each non-direct candidate's row of a certificate's candidate table states
    (``candidates[k].shares``: decimal strings, in the measured workload's order) as floats, by
    candidate name; a row without them (a certificate made before the shares were recorded) is
    recomputed and rounded by verify as before. A clear error for anything but a list of
    decimal strings."""
    out: dict[str, tuple[float, ...]] = {}
    for k, row in enumerate(section.get("candidates", [])):
        raw = row.get("shares") if isinstance(row, dict) else None
        if raw is None:
            continue
        if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
            raise TesseraError(f"strategy.candidates[{k}].shares: not a list of decimal strings")
        try:
            out[str(row.get("strategy"))] = tuple(float(x) for x in raw)
        except ValueError as e:
            raise TesseraError(f"strategy.candidates[{k}].shares: {e}") from None
    return out


def check_direct_split(choice: StrategyChoice, budget: Budget, neighbours: Neighbours | str,
                       time_limit: float | None) -> NoisePlan | None:
    """The plan of the losing ``direct`` candidate's optimised split as it was taken
    (``tessera verify``, from the certificate's candidate table; docs/certificate.md): its
    exact overlap load re-proved ≤ the budget from the scales alone (:func:`~.plan.noise_plan`
    with ``stated_scales`` and no calibration proof; a :class:`~tessera.errors.TesseraError`
    names an over-spend), to be held against the uniform split by
    :func:`~.plan.uniform_excess`. None when no candidate lost with an optimised split. Its
    expected errors are the candidate's own, from these scales in closed form
    (:func:`tessera.strategy.candidates.direct`)."""
    d = next((c for c in choice.candidates if c.name == "direct"), None)
    if d is None or d is choice.chosen or d.split != "optimal":
        return None
    return noise_plan(d.measured, budget, neighbours=neighbours, allocation="optimal",
                      time_limit=time_limit, stated_scales=d.scales, unit=d.overlap.unit)


#: What the certificate says of a residual-contrast release.
CONTRASTS_NOTE = (
    "each residual family's noise is N_Z(0, sigma^2) on its integer Helmert contrasts "
    "(tessera.strategy.contrasts); the plan's sigma of a residual family is per unit L2 "
    "sensitivity, sigma = that x sqrt(l2_sensitivity_squared); each row pays at most rho of every "
    "family, as a row of the marginal family it is charged as")
