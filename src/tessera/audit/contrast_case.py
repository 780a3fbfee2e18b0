"""Audit of a release through residual contrasts (docs/security.md, "Privacy audits";
docs/theory.md §10.6; :mod:`tessera.strategy.contrasts`).

The DP output is every residual's noisy integer contrasts, Y_A + N_ℤ(0, σ_A²) (W's marginals
are their least-squares post-processing), so the audit runs them as :func:`tessera.answer`
does: the plan of :func:`~tessera.release.strategy_release.strategy_plan` with ``residual``
forced (W = the a × b marginal, a with 4 codes, b with 2), the contrasts from the measured
families' exact counts, σ_A from :func:`~tessera.release.strategy_release.contrast_sigmas`, the
same discrete Gaussian sampler. D₁ = D₂ + one row in the cell whose contrast columns are
longest (the exact L2 sensitivity of every residual is attained there). Claim: the (ε, δ)
the certificate derives from the plan's ρ. Events: the privacy-loss statistic of the
Gaussian shift, L(y) = Σ_A ⟨δ_A, y_A − Y_A(D₂)⟩/σ_A² ≥ t·√(2ρ_row) (the likelihood-ratio
events of the continuous approximation, which the discrete noise at these σ matches).

Planted bug (``planted=True``): the contrasts noised with the plan's σ *per unit sensitivity*
(σ_A/Δ_A: the multiplier Δ_A forgotten) — the contrasts' scale is then Δ_A ≈ 10³–10⁴ times too
small. The audit must report ε_lb above the claim.
"""

from __future__ import annotations

import dataclasses
from functools import partial

import numpy as np
import numpy.typing as npt
import pandas as pd

from tessera.accounting.zcdp import epsilon_for_delta
from tessera.audit.cases import AUDIT_DELTA, AuditCase, Claim, Event, Outputs, source_for
from tessera.data.counts import count
from tessera.errors import TesseraError
from tessera.mechanisms import discrete_gaussian
from tessera.release.budget import Budget
from tessera.release.strategy_release import contrast_sigmas, strategy_plan
from tessera.schema.domain import Domain
from tessera.strategy.candidates import contrast_layout
from tessera.workload.families import Partition
from tessera.workload.workload import Workload

CONTRAST_SCHEMA = {"a": 4, "b": 2}


@dataclasses.dataclass(frozen=True, eq=False)
class ContrastSetup:
    """The two data sets' contrasts, the honest σ per contrast and the planted one."""

    contrasts: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]
    sigmas: npt.NDArray[np.float64]
    planted_sigmas: npt.NDArray[np.float64]
    spent: float


def contrast_setup(rho: float = 0.5) -> ContrastSetup:
    domain = Domain.from_dict(CONTRAST_SCHEMA)
    workload = Workload.of_families(domain, [Partition.marginal(domain, ["a", "b"])])
    plan, choice = strategy_plan(workload, Budget.of(rho=rho), neighbours="add-remove",
                                 allocation="auto", strategy="residual", objective="total",
                                 time_limit=30)
    if choice is None or choice.chosen.contrasts is None:
        raise TesseraError("the contrast audit needs the residual-contrast strategy")
    s = choice.chosen
    rc, family_starts = contrast_layout(s)
    # the row whose columns are longest in every residual: the argmax code of each attribute
    row = {a: int(np.argmax(rc.factors((a,))[0].column_norms2)) for a in domain.names}
    base = pd.DataFrame({"a": np.arange(40) % 4, "b": np.arange(40) % 2})
    first = pd.concat([base, pd.DataFrame([row])], ignore_index=True)
    starts = list(family_starts) + [plan.workload.n_queries]

    def contrasts(frame: pd.DataFrame) -> npt.NDArray[np.int64]:
        counts = np.asarray(count(frame, plan.workload).answers, dtype=np.int64)
        return np.concatenate([rc.contrasts(sc, counts[starts[k]:starts[k + 1]])
                               for k, sc in enumerate(rc.scopes)])

    sizes = [rc.n_contrasts(sc) for sc in rc.scopes]
    honest = contrast_sigmas(plan, s)
    unit = plan.scales[family_starts].astype(np.float64)
    return ContrastSetup((contrasts(first), contrasts(base)), np.repeat(honest, sizes),
                         np.repeat(unit, sizes), plan.spent)


def _run(setup: ContrastSetup, sigmas: npt.NDArray[np.float64], which: int, trials: int,
         seed: int | None) -> Outputs:
    a = setup.contrasts[which]
    noisy = discrete_gaussian.sample(np.tile(a, trials), np.tile(sigmas, trials),
                                     source_for(seed, 21, which))
    return np.asarray(noisy.values, dtype=np.int64).reshape(trials, a.size)


def contrast_release_case(rho: float = 0.5, planted: bool = False,
                          delta: float = AUDIT_DELTA) -> AuditCase:
    setup = contrast_setup(rho)
    shift = (setup.contrasts[0] - setup.contrasts[1]).astype(np.float64)
    base = setup.contrasts[1].astype(np.float64)
    w = shift / setup.sigmas**2
    sd = float(np.sqrt(np.sum(shift**2 / setup.sigmas**2)))  # √(2 ρ_row)
    events = []
    for t in np.arange(-1.0, 3.01, 0.25):
        def test(y: Outputs, t: float = float(t)) -> npt.NDArray[np.bool_]:
            return (np.asarray(y, dtype=np.float64) - base) @ w >= t * sd
        events.append(Event(f"L(y) ≥ {t:+.2f} √(2ρ_row)", test))
    claim = Claim(epsilon_for_delta(setup.spent, delta), delta,
                  f"ρ = {setup.spent:.6g}-zCDP from the plan (residual contrasts, exact Δ_A); "
                  "(ε, δ) by the certificate's conversion")
    sigmas = setup.planted_sigmas if planted else setup.sigmas
    return AuditCase(
        "residual contrasts release (exact Δ per residual)", claim,
        f"{shift.size} contrasts of 4 residuals of a 4 × 2 marginal; D₁ = D₂ + the row of the "
        "longest columns", partial(_run, setup, sigmas), tuple(events),
        planted="contrasts noised with σ per unit sensitivity (Δ forgotten)" if planted
        else None)
