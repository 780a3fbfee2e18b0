r"""Per-level costs of a tree strategy that minimise W's total GLS error (docs/theory.md §10.3,
§10.7; Qardaji, Yang, Li 2013 study the uniform and geometric splits this improves on).

For levels l with costs c_l (Σ c_l = c, the total ρ or ε) the noise precisions are
u_l = 2c_l (ρ-zCDP, σ² = 1/(2ρ_l)) or c_l²/2 (ε-DP, Laplace variance 2/ε_l²), and W's total
error is f(u) = ⟨I(u)⁻¹, M⟩ with M = Σ_q w_q 1_q 1_qᵀ (:meth:`~.intervals.Spans.gram`). f is
convex in u (the trace of an inverse of a matrix linear in u) and

    ∂f/∂u_l = −⟨I⁻¹ G_lᵀG_l I⁻¹, M⟩ = −Σ_{g ∈ level l} x_gᵀ M x_g,   x_g = I⁻¹ 1_g,

every x_g a difference of two column prefix sums of I⁻¹ (the groups are intervals). For the
lazy families the quadratic form needs no M: with S = [0; cumsum(x)] (the n + 1 prefix sums),
Σ over all ranges (1_qᵀx)² = Σ_{a<b} (S_b − S_a)² = (n+1) Σ S_a² − (Σ S_a)², and over all
prefixes Σ_b S_b² — so one gradient costs O(n · groups) per level, O(n²) in all, like f
itself. With an explicit M (:func:`gram_quadratic`) x_gᵀ M x_g costs n² a group (tests; the
candidates use the closed forms only).

The costs are p · c with p = softmax(θ) (the simplex), minimised by L-BFGS from the best
geometric split (costs ∝ r^l); the result is kept only when it is better, so the candidate is
never worse than before. Deterministic for given inputs (the shares are then rounded as every
strategy's, :func:`~.candidates.shares_for`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt
from scipy.optimize import minimize

from tessera.strategy.epigraph import epigraph_minimax
from tessera.strategy.intervals import IntervalDesign, Spans

FloatArray = npt.NDArray[np.float64]
Quadratic = Callable[[FloatArray], FloatArray]
#: L-BFGS iterations (the optimum of a 1,024-code binary tree is reached in ~16 evaluations).
MAX_ITERATIONS = 40


def family_quadratic(kind: str, weight: float) -> Quadratic:
    """Column-wise Σ_q w (1_qᵀx)² over all ranges (``kind='ranges'``: (n+1) Σ S_a² − (Σ S_a)²)
    or all prefixes (Σ_b S_b²), S the n + 1 prefix sums of x, S_0 = 0 (module docs); the form
    of the prefix sums themselves is ``.from_prefix_sums``."""

    def from_prefix_sums(s: FloatArray) -> FloatArray:
        if kind == "ranges":
            return weight * (len(s) * np.einsum("ij,ij->j", s, s) - s.sum(axis=0) ** 2)
        return weight * np.einsum("ij,ij->j", s[1:], s[1:])

    def quad(x: FloatArray) -> FloatArray:
        s = np.zeros((x.shape[0] + 1, x.shape[1]))
        np.cumsum(x, axis=0, out=s[1:])
        return from_prefix_sums(s)

    quad.from_prefix_sums = from_prefix_sums  # type: ignore[attr-defined]
    return quad


def gram_quadratic(gram: FloatArray) -> Quadratic:
    """Column-wise xᵀ M x for an explicit M."""
    return lambda x: np.einsum("ij,ij->j", x, gram @ x)


def optimal_level_costs(design: IntervalDesign, levels: Sequence[Sequence[tuple[int, int]]],
                        start: FloatArray, total: float, zcdp: bool, gram: FloatArray,
                        quad: Quadratic) -> tuple[FloatArray, float]:
    """(costs, f) minimising the total error from the costs ``start`` (module docs)."""
    n = design.n
    prefix_form = getattr(quad, "from_prefix_sums", None)
    lo = [np.array([s for s, _ in lv], dtype=np.int64) for lv in levels]
    hi = [np.array([e for _, e in lv], dtype=np.int64) for lv in levels]

    def precisions(p: FloatArray) -> tuple[FloatArray, FloatArray]:
        c = total * p
        return (2.0 * c, np.full_like(c, 2.0 * total)) if zcdp else (0.5 * c * c, total * c)

    def value_grad(theta: FloatArray) -> tuple[float, FloatArray]:
        p = np.exp(theta - theta.max())
        p /= p.sum()
        u, du_dp = precisions(p)
        cov = design.covariance(u)
        if prefix_form is not None:  # S = P[:, hi] − P[:, lo], P the 2-D prefix sums of I⁻¹
            pref = np.zeros((n + 1, n + 1))
            np.cumsum(cov, axis=1, out=pref[1:, 1:])
            np.cumsum(pref, axis=0, out=pref)
            df_du = np.array([-float(prefix_form(pref[:, h] - pref[:, lw]).sum())
                              for lw, h in zip(lo, hi)])
        else:
            ccum = np.zeros((n, n + 1))
            np.cumsum(cov, axis=1, out=ccum[:, 1:])
            df_du = np.array([-float(quad(ccum[:, h] - ccum[:, lw]).sum())
                              for lw, h in zip(lo, hi)])
        g = df_du * du_dp
        return float(np.vdot(cov, gram)), p * (g - float(p @ g))

    theta0 = np.log(np.maximum(start / start.sum(), 1e-12))
    f0 = value_grad(theta0)[0]
    res = minimize(value_grad, theta0, jac=True, method="L-BFGS-B",
                   options={"maxiter": MAX_ITERATIONS})
    if not np.isfinite(res.fun) or res.fun >= f0:
        return start, f0
    p = np.exp(res.x - res.x.max())
    return total * p / p.sum(), float(res.fun)


#: Queries added to the SLSQP program per round of :func:`minimax_level_costs` (the worst ones).
ACTIVE_QUERIES = 32
#: Rounds of constraint generation (each: one SLSQP solve, one pass over every query).
MINIMAX_ROUNDS = 8
#: Under pure ε (not convex), the extra starts tried: the start moved half-way to a level's
#: vertex (all of it on that level), the best few by their worst query.
PURE_STARTS = 3


def minimax_level_costs(design: IntervalDesign, levels: Sequence[Sequence[tuple[int, int]]],
                        start: FloatArray, total: float, zcdp: bool, spans: Spans,
                        weights: FloatArray) -> tuple[FloatArray, float, float]:
    r"""(costs, worst, bound): per-level costs (Σ = ``total``) minimising the worst weighted
    query max_q w_q Var_q (w_q > 0 only), Var_q = 1_qᵀ I(u)⁻¹ 1_q, from ``start``
    (docs/theory.md §10.4).

    Var_q is convex in u (a matrix-fractional function of I(u), linear in u), so under ρ-zCDP
    (u = 2c) the program is **convex**; under pure ε (u = c²/2) it is not: the best local
    minimum from ``start`` and :data:`PURE_STARTS` starts moved towards one level (pure ε
    favours few levels), without a guarantee.

    Constraint generation: the :data:`ACTIVE_QUERIES` worst queries at the current costs enter
    the epigraph program min z s.t. w_q Var_q(c) ≤ z (q active), Σ c = total, solved by
    SLSQP with the exact gradient ∂Var_q/∂u_l = −Σ_{g∈l} (1_gᵀ I⁻¹ 1_q)² (one product I⁻¹E
    for the active indicators E, group sums from its prefix sums); then every query's
    variance is recomputed in one vectorised gather (:meth:`IntervalDesign.variances`: all
    524,800 ranges of 1,024 codes in ~0.3 s) and the worst violators join, for at most
    :data:`MINIMAX_ROUNDS` rounds. ``bound`` is the relaxed program's optimum over the last
    active set: under ρ-zCDP a lower bound on the minimax when SLSQP converged (a subset of
    the constraints); ``worst`` ≤ the start's (the start is returned if nothing improves
    it)."""
    n = design.n
    lo = [np.array([s for s, _ in lv], dtype=np.int64) for lv in levels]
    hi = [np.array([e for _, e in lv], dtype=np.int64) for lv in levels]
    live = weights > 0
    order = np.argsort(spans.query, kind="stable")
    first = np.searchsorted(spans.query[order], np.arange(spans.n_queries + 1))

    def precisions(c: FloatArray) -> tuple[FloatArray, FloatArray]:
        return (2.0 * c, np.full_like(c, 2.0)) if zcdp else (0.5 * c * c, c)

    def weighted(c: FloatArray) -> FloatArray:
        v = weights * design.variances(precisions(c)[0], spans)
        return np.where(live, v, -np.inf)

    def indicators(queries: npt.NDArray[np.int64]) -> FloatArray:
        e = np.zeros((n, len(queries)))
        for j, q in enumerate(queries.tolist()):
            for k in order[first[q]:first[q + 1]].tolist():
                e[spans.lo[k]:spans.hi[k], j] += 1.0
        return e

    def active_values(c: FloatArray, e: FloatArray, wq: FloatArray
                      ) -> tuple[FloatArray, FloatArray]:
        u, du = precisions(c)
        x = design.covariance(u) @ e  # I⁻¹ 1_q, one column per active query
        var = np.einsum("ij,ij->j", e, x)
        s = np.zeros((n + 1, x.shape[1]))
        np.cumsum(x, axis=0, out=s[1:])
        dvar = np.stack([-((s[h] - s[lw]) ** 2).sum(axis=0) for lw, h in zip(lo, hi)], axis=1)
        return wq * var, wq[:, None] * dvar * du[None, :]

    def descend(start: FloatArray) -> tuple[FloatArray, float, float]:
        best = np.asarray(start, dtype=np.float64)
        f = weighted(best)
        worst = float(f.max())
        active = np.argsort(f)[::-1][:ACTIVE_QUERIES]
        bound = 0.0
        x_cur = best / total
        for _ in range(MINIMAX_ROUNDS):
            e, wq = indicators(active), weights[active]
            x_cur = epigraph_minimax(
                lambda x, e=e, wq=wq: active_values(total * x, e, wq)[0],
                lambda x, e=e, wq=wq: active_values(total * x, e, wq)[1] * total,
                x_cur, maxiter=200, ftol=1e-12, scale=worst)
            c = total * x_cur
            bound = float(np.max(active_values(c, e, wq)[0]))
            f = weighted(c)
            if float(f.max()) < worst:
                best, worst = c, float(f.max())
            if float(f.max()) <= bound * (1 + 1e-9):
                break
            active = np.concatenate([active, np.setdiff1d(np.argsort(f)[::-1][:ACTIVE_QUERIES],
                                                          active)])
        return best, worst, bound

    start = np.asarray(start, dtype=np.float64)
    starts = [start]
    if not zcdp:  # not convex: also from the start moved half-way to each level's vertex,
        # the PURE_STARTS best of them by their own worst query
        moved = [0.5 * start + 0.5 * total * np.eye(len(start))[j] for j in range(len(start))]
        moved.sort(key=lambda c: float(weighted(c).max()))
        starts += moved[:PURE_STARTS]
    return min((descend(s) for s in starts), key=lambda r: r[1])
