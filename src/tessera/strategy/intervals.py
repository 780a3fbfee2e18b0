r"""Generalised least squares over one ordered attribute: hierarchical (tree) and identity
strategies for ranges, prefixes and hierarchies (docs/theory.md §10; Hay, Rastogi, Miklau,
Suciu, VLDB 2010; Qardaji, Yang, Li, VLDB 2013 on the branching).

Setting. One attribute with n codes; x ∈ ℝⁿ its histogram (the marginal, n ≤
:data:`MAX_CODES`; the rest of the domain is summed out, never built). Each measured *level* l
is a partition of the codes into groups (a tree level: intervals; the identity: single codes);
its group counts G_l x are answered with independent noise of per-group variance v_l
(precision u_l = 1/v_l). The levels of one strategy are partitions, so a row meets one group
of each: the strategy's γ_w = Σ_l c_l exactly.

GLS. The information matrix I = Σ_l u_l G_lᵀG_l (n × n, (G_lᵀG_l)_{ij} = [i, j in one group]);
the estimate x̂ = I⁻¹ Σ_l u_l G_lᵀ y_l has covariance I⁻¹ (I is invertible when some level
has single codes; otherwise the pseudo-inverse gives the estimable part). A workload query is
a union of code spans [lo, hi): its estimate sums x̂ over them, its variance
Σ_{s,s'} Σ_{i∈s, j∈s'} (I⁻¹)_{ij}, read in O(1) a pair from the 2-D prefix sums of I⁻¹.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import scipy.linalg

from tessera.workload.families import interval_levels

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Most codes the dense n × n information matrix is built for (32 MiB at 2,048 codes).
MAX_CODES = 4096
#: Branchings the hierarchical strategy tries (the least expected error is kept).
BRANCHINGS = (2, 3, 4, 8, 16, 32)


@dataclass(frozen=True, eq=False)
class Spans:
    """Workload queries over one attribute as code spans: span k is [lo[k], hi[k]) and belongs
    to query ``query[k]`` (non-decreasing); ``n_queries`` queries (one may have no span)."""

    lo: IntArray
    hi: IntArray
    query: IntArray
    n_queries: int

    @staticmethod
    def ranges(lo: npt.ArrayLike, hi: npt.ArrayLike) -> Spans:
        """One span per query: [lo_q, hi_q)."""
        lo_a = np.asarray(lo, dtype=np.int64)
        return Spans(lo_a, np.asarray(hi, dtype=np.int64), np.arange(len(lo_a)), len(lo_a))

    @staticmethod
    def all_ranges(n: int) -> Spans:
        """All n(n+1)/2 ranges [i, j], i ≤ j, in row-major order of (i, j)."""
        i, j = np.triu_indices(n)
        return Spans.ranges(i, j + 1)


def level_groups(levels: Sequence[Sequence[tuple[int, int]]], n: int) -> list[IntArray]:
    """Each level (a list of [lo, hi) spans, one per group) as the group of every code."""
    out = []
    for level in levels:
        g = np.full(n, -1, dtype=np.int64)
        for k, (lo, hi) in enumerate(level):
            g[lo:hi] = k
        out.append(g)
    return out


def tree_levels(n: int, branching: int) -> list[list[tuple[int, int]]]:
    """The levels of the ``branching``-ary interval tree over n codes, root first
    (:func:`tessera.workload.families.interval_levels`), as spans."""
    return [[(iv.min(), iv.max() + 1) for iv in level]
            for level in interval_levels(n, branching)]


@dataclass(frozen=True, eq=False)
class IntervalDesign:
    """Measured levels (``groups[l][code]`` = its group, −1 for none) over n codes."""

    n: int
    groups: tuple[IntArray, ...]

    def information(self, precision: npt.ArrayLike) -> FloatArray:
        info = np.zeros((self.n, self.n))
        for g, u in zip(self.groups, np.asarray(precision, dtype=np.float64)):
            if u > 0:
                info += u * ((g[:, None] == g[None, :]) & (g[:, None] >= 0))
        return info

    def covariance(self, precision: npt.ArrayLike) -> FloatArray:
        info = self.information(precision)
        try:
            factor = scipy.linalg.cho_factor(info, lower=True, check_finite=False)
            return scipy.linalg.cho_solve(factor, np.eye(self.n), check_finite=False)
        except np.linalg.LinAlgError:
            return np.linalg.pinv(info, hermitian=True)

    def variances(self, precision: npt.ArrayLike, spans: Spans,
                  cov: FloatArray | None = None) -> FloatArray:
        """The exact GLS variance of every query (module docs)."""
        c = self.covariance(precision) if cov is None else cov
        p = np.zeros((self.n + 1, self.n + 1))
        p[1:, 1:] = c.cumsum(0).cumsum(1)

        def block(lo1: IntArray, hi1: IntArray, lo2: IntArray, hi2: IntArray) -> FloatArray:
            return p[hi1, hi2] - p[lo1, hi2] - p[hi1, lo2] + p[lo1, lo2]

        out = np.zeros(spans.n_queries)
        counts = np.bincount(spans.query, minlength=spans.n_queries)
        single = counts[spans.query] == 1
        out[spans.query[single]] = block(spans.lo[single], spans.hi[single],
                                         spans.lo[single], spans.hi[single])
        for q in np.flatnonzero(counts > 1):
            k = np.flatnonzero(spans.query == q)
            lo, hi = spans.lo[k], spans.hi[k]
            out[q] = float(block(lo[:, None], hi[:, None], lo[None, :], hi[None, :]).sum())
        return out

    def reconstruct(self, answers: Sequence[npt.ArrayLike], precision: npt.ArrayLike,
                    spans: Spans, cov: FloatArray | None = None) -> FloatArray:
        """GLS answers of the queries from the noisy group counts of every level."""
        c = self.covariance(precision) if cov is None else cov
        rhs = np.zeros(self.n)
        for g, u, y in zip(self.groups, np.asarray(precision, dtype=np.float64), answers):
            if u > 0:
                ok = g >= 0
                rhs[ok] += u * np.asarray(y, dtype=np.float64)[g[ok]]
        xhat = c @ rhs
        cum = np.concatenate([[0.0], np.cumsum(xhat)])
        out = np.zeros(spans.n_queries)
        np.add.at(out, spans.query, cum[spans.hi] - cum[spans.lo])
        return out


def level_costs(n_levels: int, total: float, ratio: float) -> FloatArray:
    """Per-level costs c_l ∝ ratio^l (root l = 0) summing to ``total``."""
    c = ratio ** np.arange(n_levels, dtype=np.float64)
    return total * c / c.sum()
