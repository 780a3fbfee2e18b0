"""Marginal candidates (docs/theory.md §10.3, §10.4, §10.6): ``identity`` (W's maximal scopes)
and ``residual`` (the downward closure, GLS in the residual basis — or, under ρ-zCDP and
add/remove neighbours, ResidualPlanner's mechanism on integer residual contrasts), each with the
error-optimal allocation for the objective (:mod:`~.marginals`, :mod:`~.contrasts`).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from tessera.calibration.cost import workload_cost
from tessera.privacy import Definition, Neighbours
from tessera.strategy.context import Context, calibrate, shares_for
from tessera.strategy.contrasts import ResidualContrasts
from tessera.strategy.marginals import (
    MarginalDesign,
    Scope,
    covers,
    downward_closure,
    informative,
    minimax_precisions,
    optimal_precisions,
)
from tessera.strategy.reconstruction import (
    ContrastGLS,
    MarginalGLS,
    Strategy,
    model_variance,
    worst_cell,
)
from tessera.workload.families import Partition
from tessera.workload.workload import Workload

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


#: A measured marginal whose cost is below this fraction of the largest is dropped.
DROP_BELOW = 1e-4


def marginal_scopes(workload: Workload) -> list[Scope] | None:
    """The scope of every family when W is marginals only (no predicates, no grouping)."""
    if workload.queries or not workload.partitions:
        return None
    if any(any(g is not None for g in p.groups) for p in workload.partitions):
        return None
    return [p.attributes for p in workload.partitions]


def marginal_strategy(workload: Workload, ctx: Context, kind: str) -> Strategy | None:
    """``identity`` (W's maximal scopes) or ``residual`` (the downward closure), the
    allocation error-optimal for the objective: Σ_q w_q Var_q (``total``,
    :func:`~.marginals.optimal_precisions`) or max_q w_q Var_q (``max``,
    :func:`~.marginals.minimax_precisions`: a target's weight is then the largest of its
    families', the worst cell being what counts)."""
    scopes = marginal_scopes(workload)
    if scopes is None:
        return None
    dom = workload.domain
    targets = tuple(dict.fromkeys(scopes))
    weights = np.zeros(len(targets))  # Σ of the families' weights: the total's terms
    largest = np.zeros(len(targets))  # the largest: what the worst cell counts
    for p, s in zip(workload.partitions, scopes):
        weights[targets.index(s)] += p.weight
        largest[targets.index(s)] = max(largest[targets.index(s)], p.weight)
    sizes = {a: dom[a].size for a in dom.names}
    if kind == "identity":
        measured_scopes = tuple(s for s in targets
                                if not any(set(s) < set(t) for t in targets))
    else:
        # attributes of one code add nothing to a marginal (its residuals over them are zero
        # spaces, :mod:`~.marginals`): the closure of the targets without them, so that no
        # measured scope is a copy of another whose share the split could only waste
        measured_scopes = downward_closure([informative(t, sizes) for t in targets])
    zcdp = ctx.definition is not Definition.PURE
    full = MarginalDesign(sizes, measured_scopes, targets)

    def dropped(costs: FloatArray) -> tuple[tuple[Scope, ...], FloatArray]:
        """The measured scopes and costs without those below :data:`DROP_BELOW` of the
        largest, when the targets stay covered."""
        keep = costs >= DROP_BELOW * costs.max()
        kept = tuple(s for s, k in zip(measured_scopes, keep) if k)
        if all(covers(t, kept, sizes) for t in targets):
            return kept, costs[keep]
        return measured_scopes, costs

    def measure(scopes_costs: tuple[tuple[Scope, ...], FloatArray]) -> Strategy:
        measured_at, costs = scopes_costs
        shares = shares_for(costs, ctx.definition)
        families = [Partition.marginal(dom, list(s), float(w),
                                       name=f"{kind}(" + ",".join(s) + ")")
                    for s, w in zip(measured_at, shares)]
        measured = Workload.of_families(dom, families)
        starts = measured.family_starts[:-1].astype(np.int64)
        design = full if measured_at == measured_scopes else MarginalDesign(
            sizes, measured_at, targets)
        recon = MarginalGLS(design, starts, tuple(targets.index(s) for s in scopes))
        return calibrate(ctx, workload, measured, recon, kind)

    optimal = dropped(optimal_precisions(full, weights, zcdp=zcdp, total=ctx.total))
    if ctx.objective != "max":
        return measure(optimal)
    # the exact minimax split, with the total-optimal and the equal split kept as fallbacks
    # (by the measured worst weighted cell, after the shares' rounding) so that under ``max``
    # the split is never worse than either (docs/theory.md §10.4)
    splits = [optimal, (optimal[0], np.ones(len(optimal[0])))]
    if ctx.minimax:
        splits.insert(0, dropped(minimax_precisions(full, largest, zcdp=zcdp,
                                                    total=ctx.total)))
    best = measure(splits[0])
    for split in splits[1:]:
        s = measure(split)
        if worst_cell(s) < worst_cell(best):
            best = s
    return best


def contrast_layout(strategy: Strategy) -> tuple[ResidualContrasts, IntArray]:
    """(the residual contrasts, the first measured index of each residual's family) of a
    residual-contrast strategy (:func:`contrast_strategy`)."""
    recon = strategy.reconstruction
    if strategy.contrasts is None or not isinstance(recon, ContrastGLS):
        raise TypeError("not a residual-contrast strategy")
    return strategy.contrasts, recon.starts


def contrast_strategy(workload: Workload, ctx: Context) -> Strategy | None:
    """``residual`` through integer contrasts (:mod:`~.contrasts`), for marginal workloads under
    ρ-zCDP and add/remove neighbours: the closed-form optimal ρ_A per residual, charged as a
    marginal family per residual (the tautology for ∅) with shares w_A ∝ √ρ_A, so that the
    plan's per-row cost of family A is ρ_A and its σ per unit sensitivity 1/√(2ρ_A)."""
    scopes = marginal_scopes(workload)
    if (scopes is None or ctx.definition is Definition.PURE
            or ctx.neighbours is not Neighbours.ADD_REMOVE):
        return None
    dom = workload.domain
    weight: dict[Scope, float] = {}
    for p, s in zip(workload.partitions, scopes):
        weight[s] = weight.get(s, 0.0) + p.weight
    # a target of weight 0 is not released (its answers withheld): nothing is spent on it
    targets = tuple(s for s in weight if weight[s] > 0)
    if not targets:
        return None
    weights = np.array([weight[s] for s in targets])
    rc = ResidualContrasts({a: dom[a].size for a in dom.names}, targets)
    costs = (rc.minimax_costs(weights, ctx.total) if ctx.objective == "max"
             else rc.optimal_costs(weights, ctx.total))
    shares = shares_for(costs, ctx.definition)
    families = [Partition.marginal(dom, list(s), float(w), name="residual(" + ",".join(s) + ")")
                for s, w in zip(rc.scopes[1:], shares[1:])]
    measured = Workload.from_sql(["TRUE"], dom, names=["residual()"],
                                 weights=[float(shares[0])])
    measured = Workload(dom, measured.queries, measured.names, measured.weights, None,
                        tuple(families))
    starts = np.concatenate([[0], measured.family_starts[:-1]]).astype(np.int64)
    recon = ContrastGLS(rc, starts, tuple(targets.index(s) if s in targets else -1
                                          for s in scopes),
                        tuple(p.n_cells_in(dom) for p in workload.partitions))
    return calibrate_contrasts(ctx, workload, measured, recon)


def calibrate_contrasts(ctx: Context, workload: Workload, measured: Workload,
                        recon: ContrastGLS) -> Strategy:
    """The residual-contrast strategy measuring ``measured`` (the tautology, then one marginal
    family per residual, their weights the shares): its own γ_w and scales as for any measured
    workload, and W's expected variances with residual A's noise σ_A = scale × Δ_A."""
    rc, starts = recon.contrasts, recon.starts
    cost = workload_cost(measured, definition=ctx.definition, neighbours=ctx.neighbours,
                         time_limit=ctx.time_limit, unit=ctx.unit)
    scales = cost.scales(ctx.total)
    delta = np.ones(measured.n_queries)
    for k, s in enumerate(rc.scopes):
        end = starts[k + 1] if k + 1 < len(starts) else measured.n_queries
        delta[starts[k]:end] = math.sqrt(rc.sensitivity2(s))
    expected = recon.variances(model_variance(ctx.definition)(scales * delta))
    w = workload.weight_array()
    total = float(w[w > 0] @ expected[w > 0])
    return Strategy("residual", workload, measured, recon, cost.weighted, scales, expected,
                    total, rc)
