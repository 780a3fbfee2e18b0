r"""The minimax programs of ``--objective max`` in one form (docs/theory.md §10.4): over the
shares x of a total (x ≥ 0, Σ x = 1), minimise max_j f_j(x) through its epigraph

    min z  s.t.  f_j(x) / z₀ ≤ z  (every j),  Σ x = 1,  10⁻⁹ ≤ x ≤ 1,

solved by SLSQP with the exact Jacobian of f, z₀ = max_j f_j(x₀) scaling z to ≈ 1. Residual
contrasts (:meth:`~.contrasts.ResidualContrasts.minimax_costs`), marginals measured as counts
(:func:`~.marginals.minimax_precisions`) and tree levels
(:func:`~.tree_allocation.minimax_level_costs`) each call it with their own f.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
from scipy.optimize import minimize

__all__ = ["epigraph_minimax"]

FloatArray = npt.NDArray[np.float64]


def epigraph_minimax(values: Callable[[FloatArray], FloatArray],
                     jacobian: Callable[[FloatArray], FloatArray], start: FloatArray, *,
                     maxiter: int, ftol: float) -> FloatArray:
    """The shares x (clipped at 10⁻¹² and renormalised to Σ x = 1) SLSQP reaches on the
    epigraph program (module docstring) from the shares ``start``; ``values(x)`` gives every
    f_j, ``jacobian(x)`` its matrix ∂f_j/∂x_i. Not checked against the start: callers keep
    the better one by their exact objective."""
    x0 = np.asarray(start, dtype=np.float64)
    k = x0.size
    z0 = float(np.max(values(x0)))
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
