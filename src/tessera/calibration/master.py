"""The master problem of the weighted allocation and its dual bound (docs/theory.md §3).

(P_𝓘): min Σ_q w_q v_q^{−k} s.t. Σ_{q∈I} v_q ≤ 1 for I ∈ 𝓘, 0 < v_q ≤ 1 (budget normalised
to 1), solved by a primal-dual interior-point method with an active-set polish; the Lagrangian
lower bound G(λ, ν) of :func:`dual_bound` certifies the optimum whatever the solver did (the
derivation is in :mod:`tessera.calibration.allocation`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import scipy.linalg
import scipy.optimize
import scipy.sparse as sp

from tessera.calibration.oracles import Cut, FloatArray, incidence_matrix

#: Relative duality gap at which the master's interior-point method stops.
MASTER_GAP = 1e-11


@dataclass(frozen=True)
class MasterSolution:
    """Solution of min Σ w_q v_q^{−k} s.t. A v ≤ 1, v ≤ 1 (budget normalised to 1).

    ``v`` is feasible up to rounding (A v ≤ 1 + 1e-12: it is only a shape, the caller
    rescales it with the oracle); ``value`` = Σ w v^{−k}; ``lower_bound`` = G(λ, ν) ≤ the optimum
    (weak duality, valid whatever the solver did); ``multipliers`` = λ (one per cut)."""

    v: FloatArray
    value: float
    lower_bound: float
    multipliers: FloatArray
    iterations: int
    converged: bool

    @property
    def gap(self) -> float:
        return (self.value - self.lower_bound) / self.value


def dual_bound(w: FloatArray, k: int, a: sp.csr_matrix, lam: FloatArray, nu: FloatArray) -> float:
    """G(λ, ν) = C_k Σ_q w_q^{1/(k+1)} σ_q^{k/(k+1)} − Σλ − Σν, σ = Aᵀλ + ν, for budget 1:
    a lower bound on min Σ w v^{−k} s.t. A v ≤ 1, v ≤ 1 for any λ, ν ≥ 0 (module docs)."""
    sigma = np.maximum(a.T @ lam + nu, 0.0)
    ck = (k + 1) * k ** (-k / (k + 1))
    terms = ck * w ** (1.0 / (k + 1)) * sigma ** (k / (k + 1))
    return math.fsum(terms.tolist()) - math.fsum(lam.tolist()) - math.fsum(nu.tolist())


def _newton_solve(d: FloatArray, a: sp.csr_matrix, da: FloatArray, rhs: FloatArray) -> FloatArray:
    """Solve (diag(d) + Aᵀ diag(da) A) x = rhs (d, da > 0): Woodbury in the m×m space when the
    cuts are fewer than the queries, else the t×t normal matrix; Cholesky, with fallbacks."""
    m, t = a.shape
    if m == 0:
        return rhs / d

    def small() -> FloatArray:
        dinv = 1.0 / d
        ad = a.multiply(dinv[None, :]).tocsr()
        mat = (ad @ a.T).toarray()
        mat[np.diag_indices(m)] += 1.0 / da
        y = rhs * dinv
        z = scipy.linalg.cho_solve(scipy.linalg.cho_factor(mat, check_finite=False), a @ y)
        return np.asarray(y - dinv * (a.T @ z))

    def large() -> FloatArray:
        mat = (a.T.multiply(da[None, :]) @ a).toarray()
        mat[np.diag_indices(t)] += d
        return np.asarray(
            scipy.linalg.cho_solve(scipy.linalg.cho_factor(mat, check_finite=False), rhs)
        )

    order = (small, large) if m <= t else (large, small)
    for solve in order:
        try:
            x = solve()
        except (np.linalg.LinAlgError, ValueError):
            continue
        if np.all(np.isfinite(x)):
            return x
    mat = (a.T.multiply(da[None, :]) @ a).toarray()
    mat[np.diag_indices(t)] += d
    return np.asarray(np.linalg.lstsq(mat, rhs, rcond=None)[0])


def solve_master(
    importance: npt.ArrayLike,
    k: int,
    sets: Sequence[Cut],
    *,
    gap_tol: float = MASTER_GAP,
    max_iter: int = 200,
) -> MasterSolution:
    """min Σ_q w_q v_q^{−k} s.t. Σ_{q∈I} v_q ≤ 1 (I ∈ ``sets``), 0 < v_q ≤ 1.

    Primal-dual interior-point method (Boyd & Vandenberghe §11.7) on the m + t linear
    constraints; v > 0 is kept by the line search (the objective is infinite at 0). Near the
    optimum the slacks 1 − Σ v lose relative precision, so the method stops when the certified
    gap (value − G)/value ≤ ``gap_tol`` or progress stalls, and the active constraints
    (λ > slack) are then solved as equalities by Newton's method (quadratic convergence, no
    slacks), which gives both a boundary point and accurate multipliers for G.
    """
    w = np.asarray(importance, dtype=np.float64)
    t = w.size
    a = incidence_matrix(t, sets)
    m = a.shape[0]
    n_cons = m + t

    def grad(v: FloatArray) -> FloatArray:
        return -k * w * v ** (-k - 1.0)

    def residual(
        v: FloatArray, lam: FloatArray, nu: FloatArray, sa: FloatArray, sb: FloatArray, tau: float
    ) -> float:
        rd = grad(v) + a.T @ lam + nu
        rc = np.concatenate([lam * sa, nu * sb]) - 1.0 / tau
        return float(np.sqrt(np.sum(rd**2) + np.sum(rc**2)))

    shape = w ** (1.0 / (k + 1))
    v = 0.5 * shape / max(float(np.max(shape)), float(np.max(a @ shape)) if m else 0.0)
    sa, sb = 1.0 - a @ v, 1.0 - v
    # Start on the central path of the constraints, the box multipliers dual feasible.
    value = float(np.sum(w * v ** (-k)))
    nu = np.maximum(-grad(v), value / n_cons / sb)
    lam = value / n_cons / sa
    best_lb, stalls, it = -math.inf, 0, 0
    while it < max_iter:
        it += 1
        value = float(np.sum(w * v ** (-k)))
        best_lb = max(best_lb, dual_bound(w, k, a, lam, nu))
        # the polish below finishes from here; more IPM steps would fight rounding in the slacks
        if value - best_lb <= max(gap_tol, 1e-9) * value or stalls >= 3:
            break
        eta = float(sa @ lam + sb @ nu)
        tau = 10.0 * n_cons / eta
        hess = k * (k + 1.0) * w * v ** (-k - 2.0)
        rhs = -grad(v) - a.T @ (1.0 / (tau * sa)) - 1.0 / (tau * sb)
        dv = _newton_solve(hess + nu / sb, a, lam / sa, rhs)
        adv = a @ dv
        dlam = 1.0 / (tau * sa) - lam + lam * adv / sa
        dnu = 1.0 / (tau * sb) - nu + nu * dv / sb
        step = 1.0
        for mult, dm in ((lam, dlam), (nu, dnu)):
            neg = dm < 0
            if np.any(neg):
                step = min(step, float(np.min(-mult[neg] / dm[neg])))
        step *= 0.99
        r0 = residual(v, lam, nu, sa, sb, tau)
        while step > 1e-12:
            v1 = v + step * dv
            sa1, sb1 = sa - step * adv, 1.0 - v1
            if np.all(v1 > 0) and np.all(sb1 > 0) and (m == 0 or np.all(sa1 > 0)):
                lam1, nu1 = lam + step * dlam, nu + step * dnu
                if residual(v1, lam1, nu1, sa1, sb1, tau) <= (1.0 - 0.01 * step) * r0:
                    break
            step *= 0.5
        else:
            break  # no progress possible in floating point
        stalls = stalls + 1 if step < 1e-3 else 0
        v, lam, nu = v1, lam1, nu1
        # recompute the slacks from v, not by updating them: no drift from rounding
        sa, sb = 1.0 - a @ v, 1.0 - v
        if (m and np.any(sa <= 0)) or np.any(sb <= 0):
            break
    value = float(np.sum(w * v ** (-k)))
    best_lb = max(best_lb, dual_bound(w, k, a, lam, nu))
    # Active-set refinement: polish on the face the interior point points at; drop rows with
    # negative multipliers and add violated rows until the face is optimal (a few rounds).
    act_cuts, act_box = lam > sa, nu > sb
    for _ in range(8):
        polished = _polish(w, k, a, v, act_cuts, act_box)
        if polished is None:
            break
        pv, plam, pnu = polished
        best_lb = max(best_lb, dual_bound(w, k, a, np.maximum(plam, 0.0), np.maximum(pnu, 0.0)))
        loads = a @ pv if m else np.zeros(0)
        add_cuts, add_box = (loads > 1.0 + 1e-12) & ~act_cuts, (pv > 1.0 + 1e-12) & ~act_box
        scale = max(float(np.max(np.abs(plam), initial=0.0)), float(np.max(np.abs(pnu))))
        neg_cuts, neg_box = plam < -1e-9 * scale, pnu < -1e-9 * scale
        if not (add_cuts.any() or add_box.any() or neg_cuts.any() or neg_box.any()):
            pvalue = float(np.sum(w * pv ** (-k)))
            if pvalue <= value:
                v, value, lam = pv, pvalue, np.maximum(plam, 0.0)
            break
        act_cuts = (act_cuts & ~neg_cuts) | add_cuts
        act_box = (act_box & ~neg_box) | add_box
    # v ≤ 1 gives the trivial certificate Σ w; keep the better
    best_lb = min(max(best_lb, math.fsum(w.tolist())), value)
    v = np.minimum(v, 1.0)
    converged = value - best_lb <= max(gap_tol, 1e-9) * value
    return MasterSolution(v, value, best_lb, lam, it, converged)


def _polish(
    w: FloatArray,
    k: int,
    a: sp.csr_matrix,
    v: FloatArray,
    cuts: npt.NDArray[np.bool_],
    box: npt.NDArray[np.bool_],
) -> tuple[FloatArray, FloatArray, FloatArray] | None:
    """Newton's method on min Σ w v^{−k} s.t. the active rows G v = 1 hold with equality, from
    the interior-point estimate ``v``; returns (v, λ, ν) — multipliers of the active rows, 0
    elsewhere, negative when a row should not be active — or None if it fails.

    Newton step: min ½ dᵀH d + ∇fᵀd s.t. G d = 1 − G v. With at most t active rows it is solved
    in the multipliers, (G H⁻¹ Gᵀ) μ = −G H⁻¹ ∇f − (1 − G v); with more (a degenerate vertex:
    G H⁻¹ Gᵀ is singular) in the primal, d = H^{−½}(−h + C⁺(r + C h)), C = G H^{−½},
    h = H^{−½}∇f, and the multipliers at the end by non-negative least squares on
    ∇f + Gᵀμ = 0 (then they are ≥ 0 by construction)."""
    t = w.size
    g_rows = sp.vstack([a[np.flatnonzero(cuts)], sp.eye(t, format="csr")[np.flatnonzero(box)]])
    g_rows = sp.csr_matrix(g_rows)
    n_act = g_rows.shape[0]
    x = v.copy()
    mult = np.zeros(n_act)
    for _ in range(30):
        grad = -k * w * x ** (-k - 1.0)
        hinv = 1.0 / (k * (k + 1.0) * w * x ** (-k - 2.0))
        r = 1.0 - g_rows @ x
        if n_act == 0:
            dx = -hinv * grad
        elif n_act <= t:
            mat = (g_rows.multiply(hinv[None, :]) @ g_rows.T).toarray()
            rhs = -(g_rows @ (hinv * grad)) - r
            try:
                mult = scipy.linalg.cho_solve(
                    scipy.linalg.cho_factor(mat, check_finite=False), rhs, check_finite=False
                )
            except (np.linalg.LinAlgError, ValueError):
                mult = np.linalg.lstsq(mat, rhs, rcond=1e-14)[0]
            dx = -hinv * (grad + g_rows.T @ mult)
        else:
            hs = np.sqrt(hinv)
            c_mat = g_rows.multiply(hs[None, :]).toarray()
            h = hs * grad
            dx = hs * (-h + np.linalg.lstsq(c_mat, r + c_mat @ h, rcond=1e-14)[0])
        neg = dx < 0
        step = 1.0 if not np.any(neg) else min(1.0, 0.9 * float(np.min(-x[neg] / dx[neg])))
        x = x + step * dx
        if not np.all(np.isfinite(x)) or np.any(x <= 0):
            return None
        if step == 1.0 and float(np.max(np.abs(dx) / x)) < 1e-13:
            break
    if n_act > t:
        grad = -k * w * x ** (-k - 1.0)
        mult = scipy.optimize.nnls(g_rows.T.toarray(), -grad)[0]
    n_cuts = int(np.count_nonzero(cuts))
    lam = np.zeros(a.shape[0])
    nu = np.zeros(t)
    lam[np.flatnonzero(cuts)] = mult[:n_cuts]
    nu[np.flatnonzero(box)] = mult[n_cuts:]
    return x, lam, nu


#: Floor on the box multipliers ν_q in :func:`solve_master_dual` (keeps σ_q > 0, where the dual
#: objective is differentiable; G stays a valid bound for any ν ≥ 0).
DUAL_FLOOR = 1e-12


def solve_master_dual(
    importance: npt.ArrayLike,
    k: int,
    a: sp.csr_matrix,
    lam0: FloatArray | None = None,
    nu0: FloatArray | None = None,
    *,
    max_iter: int = 300,
) -> tuple[MasterSolution, FloatArray]:
    """An approximate master by dual ascent, warm-started: max G(λ, ν) over λ ≥ 0, ν ≥
    :data:`DUAL_FLOOR` by L-BFGS-B from (``lam0``, ``nu0``) (the previous round's multipliers,
    0 for new cuts). ∂G/∂λ_I = Σ_{q∈I} v_q − 1 and ∂G/∂ν_q = v_q − 1 with
    v_q = (k w_q/σ_q)^{1/(k+1)} the minimiser of the Lagrangian, which is the returned point
    (capped at 1): near the master's optimum, feasible for its cuts only up to the dual's
    accuracy — a point to separate, not a
    split (the caller rescales any split by a proven load). ``lower_bound`` = G, valid for any
    multipliers (weak duality). Returns the solution and ν (the next warm start)."""
    w = np.asarray(importance, dtype=np.float64)
    t = w.size
    m = a.shape[0]
    ck = (k + 1) * k ** (-k / (k + 1))
    coef = ck * w ** (1.0 / (k + 1))
    e = k / (k + 1.0)
    at = a.T.tocsr()
    lam = np.zeros(m) if lam0 is None else np.maximum(np.asarray(lam0, dtype=np.float64), 0.0)
    nu = k * w if nu0 is None else np.maximum(np.asarray(nu0, dtype=np.float64), DUAL_FLOOR)

    def negative_g(z: FloatArray) -> tuple[float, FloatArray]:
        sigma = (at @ z[:m] if m else 0.0) + z[m:]
        v = (k * w / sigma) ** (1.0 / (k + 1))
        g = float(np.sum(coef * sigma**e)) - float(np.sum(z))
        grad = np.concatenate([(a @ v) - 1.0 if m else np.zeros(0), v - 1.0])
        return -g, -grad

    bounds = [(0.0, None)] * m + [(DUAL_FLOOR, None)] * t
    res = scipy.optimize.minimize(negative_g, np.concatenate([lam, nu]), jac=True,
                                  method="L-BFGS-B", bounds=bounds,
                                  options={"maxiter": max_iter, "gtol": 1e-9, "ftol": 1e-13})
    z = np.maximum(res.x, 0.0)
    z[m:] = np.maximum(z[m:], DUAL_FLOOR)
    lam, nu = z[:m], z[m:]
    sigma = (at @ lam if m else 0.0) + nu
    v = np.minimum((k * w / sigma) ** (1.0 / (k + 1)), 1.0)
    value = float(np.sum(w * v ** (-k)))
    lb = min(dual_bound(w, k, a, lam, nu), value)
    return MasterSolution(v, value, lb, lam, int(res.nit), False), nu
