"""The ``direct`` candidate: W itself, identical predicate queries measured once (docs/theory.md
§10; Smith et al., Thm 6), its split set by W's weights (``total``), their square roots
(``max``: the exact minimax) or the least-total-variance split of predicate queries
(:mod:`tessera.calibration.optimal`, cutting planes).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import numpy.typing as npt

from tessera.calibration.optimal import OPTIMAL_SECONDS, optimal_split, optimisable
from tessera.errors import TesseraError
from tessera.strategy.context import Context, calibrate
from tessera.strategy.reconstruction import Copy, Strategy, model_variance
from tessera.workload.workload import Workload

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def merge_duplicates(workload: Workload) -> tuple[Workload, IntArray]:
    """W with identical predicate queries kept once (the largest weight, the first name), and
    the measured index of every query of W (expanded order). W itself when nothing repeats
    (one lazy range family never repeats a query: :mod:`tessera.workload.ranges`)."""
    fams = workload.range_families
    if fams is not None and len(fams) == 1:
        return workload, np.arange(workload.n_queries, dtype=np.int64)
    first: dict[object, int] = {}
    index = np.empty(len(workload.queries), dtype=np.int64)
    keep: list[int] = []
    for i, q in enumerate(workload.queries):
        k = first.setdefault(q, len(keep))
        if k == len(keep):
            keep.append(i)
        index[i] = k
    cells = np.arange(len(keep), len(keep) + workload.n_cells, dtype=np.int64)
    if len(keep) == len(workload.queries):
        return workload, np.concatenate([index, cells])
    weights = [0.0] * len(keep)
    for i, k in enumerate(index):
        weights[k] = max(weights[k], workload.weights[i])
    measured = Workload(workload.domain, tuple(workload.queries[i] for i in keep),
                        tuple(workload.names[i] for i in keep), tuple(weights), None,
                        workload.partitions)
    return measured, np.concatenate([index, cells])


def direct(workload: Workload, ctx: Context) -> Strategy:
    """W itself, duplicates measured once. The split: ``total`` — the budget shares are W's
    weights (the plan's ``shares``, c_q ∝ w_q² under zCDP, ∝ w_q under pure ε); ``max`` — the
    shares are √w_q, which minimises max_q w_q Var_q exactly: any split with
    max_q w_q Var_q = t pays c_q ≥ w_q/(2t) (zCDP; Var = 1/(2c)) so γ(w)/(2t) ≤ ρ, and
    c_q = ρ w_q/γ(w) attains t = γ(w)/(2ρ) (pure ε alike with Var = 2/c², c ∝ √w).

    Under ``total``, predicate queries of one weight get the split of least total variance
    instead (:mod:`tessera.calibration.optimal`, cutting planes; kept only if better than the
    uniform one, which it is unless the optimiser found nothing better in its time; in a
    release the split is first ``ctx.certify``-ed, so the comparison and the certificate see
    the scales that are measured). With
    ``ctx.direct_scales`` (``tessera verify``) the certificate's stated split is taken as it is,
    with no optimiser run and no comparison: verify re-proves its privacy and compares it with
    the uniform split itself (docs/certificate.md)."""
    measured, index = merge_duplicates(workload)
    if ctx.objective == "max":
        measured = root_weights(measured)
    s = calibrate(ctx, workload, measured, Copy(index), "direct")
    if ctx.objective != "total" or not ctx.optimise_direct or not optimisable(measured):
        return s
    if ctx.direct_scales is not None:
        scales = np.asarray(ctx.direct_scales, dtype=np.float64)
        if scales.shape != (measured.n_queries,):
            raise TesseraError(f"{scales.size} stated scales for the {measured.n_queries} "
                               "queries direct measures")
    else:
        limit = (OPTIMAL_SECONDS if ctx.time_limit is None
                 else min(ctx.time_limit, OPTIMAL_SECONDS))
        scales = optimal_split(measured, ctx.definition, ctx.total, ctx.neighbours,
                               time_limit=limit, unit=ctx.unit).scales
        if ctx.certify is not None:  # (a release: the split as verify will re-prove it)
            scales = ctx.certify(measured, scales)
    expected = s.reconstruction.variances(model_variance(ctx.definition)(scales))
    w = workload.weight_array()
    total = float(w[w > 0] @ expected[w > 0])
    if total >= s.total and ctx.direct_scales is None:
        return s
    return dataclasses.replace(s, scales=scales, expected=expected, total=total,
                               split="optimal")


def root_weights(workload: Workload) -> Workload:
    """The workload with every weight replaced by its square root (itself when all are 0/1)."""
    w = workload.weight_array()
    if np.all((w == 0) | (w == 1)):
        return workload
    families = tuple(dataclasses.replace(p, weight=math.sqrt(p.weight))
                     for p in workload.partitions)
    return Workload(workload.domain, workload.queries, workload.names,
                    tuple(math.sqrt(x) for x in workload.weights), workload.sources, families)
