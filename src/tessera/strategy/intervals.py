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
Σ_{s,s'} Σ_{i∈s, j∈s'} (I⁻¹)_{ij}, read in O(1) a pair from the 2-D prefix sums of I⁻¹
(P[a, b] = Cov(Σ_{i<a} x̂_i, Σ_{j<b} x̂_j): a range [lo, hi) has variance
P[hi, hi] − 2 P[lo, hi] + P[lo, lo]; all n(n+1)/2 ranges in one vectorised gather).

I⁻¹ of a tree in O(n²) (:func:`nested_inverse`). When the levels are nested interval
partitions (every group of level l + 1 inside one group of level l) and the finest level is
single codes with u > 0, I restricted to the codes of a group v of level l is
A_v = blockdiag(A_c : c a child of v) + u_l 11ᵀ (A of a single code: u_finest), so by
Sherman–Morrison, with B = blockdiag(A_c⁻¹) and z = B1,

    A_v⁻¹ = B − u_l z zᵀ / (1 + u_l 1ᵀz).

Bottom-up, level l costs Σ_v |v|² = n · (group size), O(n² b/(b−1)) in all — no n³
factorisation (docs/theory.md §10.3). Other designs (groups not nested, no single-code level)
take a dense Cholesky (or the pseudo-inverse when I is singular).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import scipy.linalg

from tessera.workload.families import interval_levels

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Most codes the dense n × n information matrix is built for (32 MiB at 2,048 codes).
MAX_CODES = 4096
#: Levels with at most this many groups are assembled by slices, others by one scatter.
FEW_GROUPS = 64
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

    def gram(self, n: int, weights: npt.ArrayLike) -> FloatArray:
        """M = Σ_q w_q 1_q 1_qᵀ (n × n, 1_q the indicator of query q's codes), so that
        Σ_q w_q Var_q = ⟨Cov x̂, M⟩ for any design (the trace form of the total error): each
        single-span query adds w_q on its square [lo, hi)², by a 2-D difference array and two
        prefix sums, O(queries + n²); a query of several spans adds its span pairs."""
        w = np.asarray(weights, dtype=np.float64)
        d = np.zeros((n + 1, n + 1))
        counts = np.bincount(self.query, minlength=self.n_queries)
        k = counts[self.query] == 1
        lo, hi, wk = self.lo[k], self.hi[k], w[self.query[k]]
        for a, b, sign in ((lo, lo, 1.0), (lo, hi, -1.0), (hi, lo, -1.0), (hi, hi, 1.0)):
            d += np.bincount(a * (n + 1) + b, weights=sign * wk,
                             minlength=(n + 1) ** 2).reshape(n + 1, n + 1)
        for q in np.flatnonzero(counts > 1):
            j = np.flatnonzero(self.query == q)
            for s1 in j:
                for s2 in j:
                    for a, b, sign in ((self.lo[s1], self.lo[s2], 1.0),
                                       (self.lo[s1], self.hi[s2], -1.0),
                                       (self.hi[s1], self.lo[s2], -1.0),
                                       (self.hi[s1], self.hi[s2], 1.0)):
                        d[a, b] += sign * w[q]
        return np.cumsum(np.cumsum(d, axis=0), axis=1)[:n, :n]

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


def _runs(g: IntArray) -> list[tuple[int, int]] | None:
    """The groups of one level as contiguous runs [s, e) in code order, or None when some
    group is not one run or some code is in no group."""
    if len(g) == 0 or np.any(g < 0):
        return None
    cuts = np.flatnonzero(np.diff(g)) + 1
    starts = np.concatenate([[0], cuts])
    ends = np.concatenate([cuts, [len(g)]])
    if len(np.unique(g)) != len(starts):
        return None
    return list(zip(starts.tolist(), ends.tolist()))


def nested_inverse(groups: Sequence[IntArray], precision: npt.ArrayLike) -> FloatArray | None:
    """I⁻¹ for nested interval levels (root first) by the bottom-up Sherman–Morrison recursion
    of the module docs, O(n²); None when the levels are not nested intervals ending in single
    codes with positive precision (the caller factorises densely).

    Vectorised a level at a time: the groups of a level are held as one array of blocks
    padded with zero rows and columns to the largest group (a zero row stays zero under the
    rank-one update, z being 0 there), the children scattered into their parents' blocks."""
    u = np.asarray(precision, dtype=np.float64)
    runs = [_runs(g) for g in groups]
    if not runs or any(r is None for r in runs) or u[-1] <= 0 or np.any(u < 0):
        return None
    n = len(groups[-1])
    if len(runs[-1]) != n:  # type: ignore[arg-type]
        return None
    starts = np.arange(n)
    sizes = np.ones(n, dtype=np.int64)
    blocks = np.full((n, 1, 1), 1.0 / u[-1])  # padded inverses, one per group
    for level in range(len(groups) - 2, -1, -1):
        rs = np.array(runs[level], dtype=np.int64)
        gs, ge = rs[:, 0], rs[:, 1]
        parent = np.searchsorted(ge, starts, side="right")
        if np.any(parent >= len(gs)) or np.any(starts < gs[np.minimum(parent, len(gs) - 1)]):
            return None
        if np.any(starts + sizes > ge[parent]):
            return None  # a child straddles its group: not nested
        span = int((ge - gs).max())
        new = np.zeros((len(gs), span, span))
        off = starts - gs[parent]
        if len(gs) <= FEW_GROUPS:  # large blocks: copied as slices
            for k, (p, o, size) in enumerate(zip(parent.tolist(), off.tolist(),
                                                 sizes.tolist())):
                new[p, o:o + size, o:o + size] = blocks[k, :size, :size]
        else:  # many small blocks: one scatter of their real entries
            m = np.arange(blocks.shape[1])
            real = ((m[None, :, None] < sizes[:, None, None])
                    & (m[None, None, :] < sizes[:, None, None]))
            j, a, b = np.nonzero(real)
            new[parent[j], off[j] + a, off[j] + b] = blocks[j, a, b]
        if u[level] > 0:
            z = new.sum(axis=2)
            scale = u[level] / (1.0 + u[level] * z.sum(axis=1))
            new -= scale[:, None, None] * z[:, :, None] * z[:, None, :]
        blocks, starts, sizes = new, gs, ge - gs
    if len(starts) == 1:
        return np.ascontiguousarray(blocks[0, :n, :n])
    out = np.zeros((n, n))
    for k, (s, size) in enumerate(zip(starts.tolist(), sizes.tolist())):
        out[s:s + size, s:s + size] = blocks[k, :size, :size]
    return out


@dataclass(frozen=True, eq=False)
class IntervalDesign:
    """Measured levels (``groups[l][code]`` = its group, −1 for none) over n codes. The last
    covariance computed is kept (``cov`` of the same precisions is not recomputed)."""

    n: int
    groups: tuple[IntArray, ...]
    _last: dict[tuple[float, ...], FloatArray] = field(default_factory=dict, repr=False)

    def information(self, precision: npt.ArrayLike) -> FloatArray:
        info = np.zeros((self.n, self.n))
        for g, u in zip(self.groups, np.asarray(precision, dtype=np.float64)):
            if u > 0:
                info += u * ((g[:, None] == g[None, :]) & (g[:, None] >= 0))
        return info

    def covariance(self, precision: npt.ArrayLike) -> FloatArray:
        """I⁻¹: the tree recursion when it applies (:func:`nested_inverse`), else dense; the
        last result is kept for the same precisions (read-only)."""
        key = tuple(np.asarray(precision, dtype=np.float64).tolist())
        if key in self._last:
            return self._last[key]
        cov = nested_inverse(self.groups, key)
        if cov is None:
            cov = self._dense_covariance(key)
        cov.setflags(write=False)
        self._last.clear()
        self._last[key] = cov
        return cov

    def _dense_covariance(self, precision: npt.ArrayLike) -> FloatArray:
        info = self.information(precision)
        try:
            factor = scipy.linalg.cho_factor(info, lower=True, check_finite=False)
            return scipy.linalg.cho_solve(factor, np.eye(self.n), check_finite=False)
        except np.linalg.LinAlgError:
            return np.linalg.pinv(info, hermitian=True)

    def total(self, precision: npt.ArrayLike, gram: FloatArray) -> float:
        """Σ_q w_q Var_q = ⟨I⁻¹, M⟩ for M = :meth:`Spans.gram` (no per-query work)."""
        return float(np.vdot(self.covariance(precision), gram))

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
