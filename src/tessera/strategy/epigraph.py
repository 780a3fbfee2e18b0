r"""The minimax programs of ``--objective max`` in one form (docs/theory.md §10.4): over the
shares x of a total (x ≥ 0, Σ x = 1), minimise max_j f_j(x) through its epigraph

    min z  s.t.  f_j(x) / z₀ ≤ z  (every j),  Σ x = 1,  10⁻⁹ ≤ x ≤ 1,

solved by SLSQP with the exact Jacobian of f, z₀ = max_j f_j(x₀) scaling z to ≈ 1. Residual
contrasts (:meth:`~.contrasts.ResidualContrasts.minimax_costs`), marginals measured as counts
(:func:`~.marginals.minimax_precisions`) and tree levels
(:func:`~.tree_allocation.minimax_level_costs`) each call it with their own f;
:func:`frank_wolfe_bound` is the certified lower bound of marginals (ρ-zCDP) and of 2-D
products of trees (:mod:`~.rectangle_minimax`), where every f_j is convex.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
from scipy.optimize import minimize

__all__ = ["epigraph_minimax", "frank_wolfe_bound", "frank_wolfe_dual"]

FloatArray = npt.NDArray[np.float64]


def epigraph_minimax(values: Callable[[FloatArray], FloatArray],
                     jacobian: Callable[[FloatArray], FloatArray], start: FloatArray, *,
                     maxiter: int, ftol: float, scale: float | None = None) -> FloatArray:
    """The shares x (clipped at 10⁻¹² and renormalised to Σ x = 1) SLSQP reaches on the
    epigraph program (module docstring) from the shares ``start``; ``values(x)`` gives every
    f_j, ``jacobian(x)`` its matrix ∂f_j/∂x_i. Not checked against the start: callers keep
    the better one by their exact objective. ``scale``: z₀ (default max_j f_j(x₀)); tree
    levels pass their best worst query so far, as before this solver was shared — under pure ε
    (not convex) the scale moves SLSQP's path, and with it the local minimum it reaches."""
    x0 = np.asarray(start, dtype=np.float64)
    k = x0.size
    z0 = float(np.max(values(x0))) if scale is None else float(scale)
    res = minimize(lambda x: x[-1], np.r_[x0, 1.0], method="SLSQP",
                   jac=lambda x: np.r_[np.zeros(k), 1.0],
                   bounds=[(1e-9, 1.0)] * k + [(0.0, None)],
                   constraints=[
                       {"type": "ineq", "fun": lambda x: x[-1] - values(x[:-1]) / z0,
                        "jac": lambda x: np.hstack([-jacobian(x[:-1]) / z0,
                                                    np.ones((len(values(x[:-1])), 1))])},
                       {"type": "eq", "fun": lambda x: x[:-1].sum() - 1.0,
                        "jac": lambda x: np.r_[np.ones(k), 0.0]}],
                   options={"maxiter": maxiter, "ftol": ftol})
    x = np.clip(res.x[:-1], 1e-12, None)
    return x / x.sum()


def frank_wolfe_bound(values: FloatArray, jacobian: FloatArray, x: FloatArray,
                      total: float) -> float:
    """A lower bound on min_x max_j f_j(x) over the simplex {x ≥ 0, Σ x = ``total``} when every
    f_j is **convex**, from ``values`` f(x') and ``jacobian`` J = ∂f/∂x at any point x': for
    λ ∈ Δ, min max_j f_j ≥ min_x h_λ(x) with h_λ = Σ λ_j f_j, and ≥ h_λ(x') + min_i total·∂_i
    h_λ(x') − ∇h_λ(x')·x' (the Frank–Wolfe bound: a convex function lies above its tangent
    plane, whose minimum over the simplex is at a vertex). The bound is linear in λ, so the
    best λ is the linear program  max λ·(f − Jx') + total·t  s.t.  t ≤ (Jᵀλ)_i, λ ∈ Δ (HiGHS).
    Any subset of the f_j gives a valid (weaker) bound. Equal to the minimax at its solution
    (KKT); 0 when the program fails. Not a bound when some f_j is not convex."""
    return frank_wolfe_dual(values, jacobian, x, total)[0]


def frank_wolfe_dual(values: FloatArray, jacobian: FloatArray, x: FloatArray,
                     total: float) -> tuple[float, FloatArray]:
    """(:func:`frank_wolfe_bound`, the best λ ∈ Δ of its linear program; uniform when the
    program fails, with the bound 0)."""
    from scipy.optimize import linprog

    f = np.asarray(values, dtype=np.float64)
    jac = np.asarray(jacobian, dtype=np.float64)
    m, k = jac.shape
    res = linprog(np.r_[-(f - jac @ x), -total],
                  A_ub=np.hstack([-jac.T, np.ones((k, 1))]), b_ub=np.zeros(k),
                  A_eq=np.r_[np.ones(m), 0.0][None, :], b_eq=[1.0],
                  bounds=[(0.0, None)] * m + [(None, None)], method="highs")
    if res.status != 0:
        return 0.0, np.full(m, 1.0 / m)
    return float(-res.fun), np.clip(res.x[:m], 0.0, None)
