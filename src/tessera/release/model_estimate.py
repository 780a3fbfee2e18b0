"""``--estimate model``: W's answers as non-negative, mutually consistent estimates from every
noisy measurement of the release (:mod:`tessera.estimation.lnn`, GReM-LNN: Mullins et al.,
NeurIPS 2024), for marginal workloads.

Post-processing of the measured noisy answers and public sizes (no privacy cost). The measured
queries must be plain marginals (W itself measured directly, or the ``identity``/``residual``
strategies), each family with one noise scale; W's families the target marginals. The answers
are biased (that is what buys their lower error), so they carry **no proven interval**: the
intervals of the release are those of the unbiased (GLS or direct) answers.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from tessera.estimation.lnn import (
    NAME,
    MarginalMeasurement,
    ModelEstimate,
    estimate_from_gls,
    estimate_marginals,
)
from tessera.release.plan import NoisePlan
from tessera.release.strategy_release import measured_noise_variances, noise_variances
from tessera.strategy.candidates import Strategy, contrast_layout
from tessera.workload.workload import Workload

Scope = tuple[str, ...]


def _marginal_scopes(workload: Workload) -> list[Scope] | None:
    """Each family's attributes when the workload is plain marginals (no predicates, no
    grouped values), else None."""
    if workload.queries or not workload.partitions:
        return None
    if any(any(g is not None for g in p.groups) for p in workload.partitions):
        return None
    return [tuple(p.attributes) for p in workload.partitions]


def model_answers(plan: NoisePlan, workload: Workload, noisy: npt.NDArray[np.int64],
                  strategy: Strategy | None = None,
                  ) -> tuple[npt.NDArray[np.float64] | None, str]:
    """(W's model answers in W's expanded order, the note for the certificate), or (None, why
    not) when W or the measured queries are not plain marginals. Residual contrasts
    (``strategy.contrasts``) give the GLS answers and each residual's information directly."""
    if strategy is not None and strategy.contrasts is not None:
        if set(_marginal_scopes(workload) or ()) - set(strategy.contrasts.targets):
            return None, ("model estimate not applied: a family of weight 0 is withheld "
                          "(answers left as released)")
        return _note(_from_contrasts(plan, strategy, noisy), workload)
    measured = plan.workload
    scopes = _marginal_scopes(measured)
    targets = _marginal_scopes(workload)
    if scopes is None or targets is None:
        return None, ("model estimate not applied: it needs a workload of marginals measured "
                      "as marginals (answers left as released)")
    var = noise_variances(plan)
    starts = measured.family_starts.astype(np.int64)
    values = noisy.astype(np.float64)
    ms = []
    for k, scope in enumerate(scopes):
        v = var[starts[k]:starts[k + 1]]
        if not np.all(np.isfinite(v)):
            continue  # not released (weight 0): not a measurement
        if np.ptp(v) > 1e-12 * float(v.max()):
            return None, (f"model estimate not applied: family {k} of the measured queries has "
                          "several noise scales (answers left as released)")
        ms.append(MarginalMeasurement(scope, values[starts[k]:starts[k + 1]], float(v[0])))
    dom = workload.domain
    sizes = {a: dom[a].size for a in dom.names}
    try:
        est = estimate_marginals(sizes, ms, targets)
    except ValueError as e:
        return None, f"model estimate not applied: {e} (answers left as released)"
    return _note(est, workload)


def _from_contrasts(plan: NoisePlan, strategy: Strategy, noisy: npt.NDArray[np.int64]
                    ) -> ModelEstimate:
    """GReM-LNN from residual contrasts: the GLS answers, and μ_B = p_B/(V_B Π_{i∈B} E_i) —
    the information that gives each residual the mean per-cell variance it has (exact when
    the contrasts' e_i are flat, as for binary attributes; any positive metric gives a valid
    post-processing, this one the measurements' own up to that flatness)."""
    rc, starts = contrast_layout(strategy)
    var = measured_noise_variances(plan, strategy)
    v = {sc: float(var[k]) for sc, k in zip(rc.scopes, starts)}
    sizes = dict(rc.sizes)
    gls = rc.reconstruct(rc.split(noisy))
    mu_b = {}
    for sc in rc.scopes:
        p = math.prod(1.0 - 1.0 / sizes[a] for a in sc)
        e = math.prod(float(f.cell_variance.sum()) for f in rc.factors(sc))
        mu_b[sc] = p / (v[sc] * e)
    cell_var = rc.variances(v)
    return estimate_from_gls(sizes, rc.targets, gls, mu_b,
                             [float(cell_var[t].mean()) for t in rc.targets])


def _note(est: ModelEstimate, workload: Workload) -> tuple[npt.NDArray[np.float64], str]:
    targets = _marginal_scopes(workload)
    assert targets is not None
    out = np.concatenate([est.marginals[s].ravel() for s in targets])
    note = (f"{NAME}: every answer ≥ 0 and all marginals agree on shared attributes and on "
            f"the total ({est.total:,.1f}); biased, so no interval is proven for it (the "
            f"intervals shown are the unbiased answers'); solver: {est.iterations} iterations, "
            f"KKT residual {est.kkt:.1e} counts"
            + ("" if est.converged else " (not converged: " + est.message + ")")
            + ("" if est.alpha == 0 else
               f", solver deficit {est.deficit:.1e} removed by mixing {est.alpha:.1e} of the "
               "uniform table"))
    return out, note
